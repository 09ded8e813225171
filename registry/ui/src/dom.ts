/**
 * The one way the pages make DOM: elements from a tag, attributes and children, where strings
 * become text nodes. Nothing is ever parsed as HTML (no innerHTML anywhere), so a package's
 * metadata is shown as the text it is. Links to anywhere but this server or http(s) are dropped.
 */
export type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((e: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Array<Child | Child[]>): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'href' && !safeHref(String(value))) continue;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(el: Element, children: Array<Child | Child[]>): void {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces everything in `el`. */
export function fill(el: Element, ...children: Array<Child | Child[]>): void {
  el.replaceChildren();
  append(el, children);
}

function safeHref(href: string): boolean {
  return href.startsWith('/') || href.startsWith('?') || href.startsWith('#') || /^https?:\/\//i.test(href);
}

/** A SVG element (the chart). */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}, ...children: Node[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

export function message(text: string, kind: 'error' | 'note' = 'note'): HTMLElement {
  return h('p', { class: kind, role: kind === 'error' ? 'alert' : 'status' }, text);
}
