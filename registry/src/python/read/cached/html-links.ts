/**
 * A small, forgiving reader of PEP 503 HTML pages: the `<a>` elements (attributes and text) and
 * the `<meta name=... content=...>` elements. Not a general HTML parser: it only needs to read
 * what indexes emit, and to never throw on what they should not emit (unclosed tags, odd quoting,
 * comments, uppercase names). Attribute values and text come back with entities decoded.
 */

export interface Anchor {
  /** Lowercased attribute names; a bare attribute has the value `''`. */
  attrs: Map<string, string>;
  text: string;
}

export interface HtmlLinks {
  anchors: Anchor[];
  /** `<meta name>` → `content`, names lowercased. */
  meta: Map<string, string>;
  /** The `<title>` text, if any. */
  title: string | null;
}

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

export function decodeEntities(text: string): string {
  return text.replace(/&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z]{2,8});?/g, (whole, ref: string) => {
    if (ref.startsWith('#')) {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : '\ufffd';
    }
    return NAMED[ref.toLowerCase()] ?? whole;
  });
}

/** Attributes of one start tag, from just after its name to its `>`. */
function parseAttributes(src: string): Map<string, string> {
  const attrs = new Map<string, string>();
  const re = /([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?/g;
  for (let m = re.exec(src); m; m = re.exec(src)) {
    const name = m[1]!.toLowerCase();
    // HTML keeps the first of duplicated attributes.
    if (attrs.has(name)) continue;
    attrs.set(name, decodeEntities(m[2] ?? m[3] ?? m[4] ?? ''));
  }
  return attrs;
}

/** The end of a start tag that begins at `from` (quotes may hide a `>`), or -1. */
function tagEnd(html: string, from: number): number {
  let quote: string | null = null;
  for (let i = from; i < html.length; i++) {
    const c = html[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '>') return i;
  }
  return -1;
}

export function readHtmlLinks(html: string): HtmlLinks {
  const anchors: Anchor[] = [];
  const meta = new Map<string, string>();
  let title: string | null = null;
  const open = /<!--|<(a|meta|title)(?=[\s>/])/gi;
  for (let m = open.exec(html); m; m = open.exec(html)) {
    if (m[0] === '<!--') {
      const close = html.indexOf('-->', m.index + 4);
      if (close < 0) break;
      open.lastIndex = close + 3;
      continue;
    }
    const tag = m[1]!.toLowerCase();
    const end = tagEnd(html, open.lastIndex);
    if (end < 0) break;
    const attrs = parseAttributes(html.slice(open.lastIndex, end));
    open.lastIndex = end + 1;
    if (tag === 'meta') {
      const name = attrs.get('name');
      if (name !== undefined) meta.set(name.toLowerCase(), attrs.get('content') ?? '');
      continue;
    }
    const closing = new RegExp(`</${tag}\\s*>`, 'gi');
    closing.lastIndex = end + 1;
    const close = closing.exec(html);
    const textEnd = close ? close.index : html.length;
    const text = decodeEntities(html.slice(end + 1, textEnd).replace(/<[^>]*>/g, '')).trim();
    if (close) open.lastIndex = closing.lastIndex;
    if (tag === 'title') title ??= text;
    else anchors.push({ attrs, text });
  }
  return { anchors, meta, title };
}
