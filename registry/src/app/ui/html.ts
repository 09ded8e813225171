/**
 * HTML text the server writes: every value that did not come from this file goes through `text`
 * (or `attr`), so a project name, a config value or anything a client sent is shown, never run.
 */
const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes for element content and quoted attribute values alike. */
export function text(value: string | number): string {
  return String(value).replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** An HTML fragment already escaped (built from `text` and literals); what `html` joins. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** A tagged template: literals as written, every interpolated value escaped unless it is `Html`. */
export function html(strings: TemplateStringsArray, ...values: Array<string | number | Html | Html[]>): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += Array.isArray(v) ? v.map((h) => h.value).join('') : v instanceof Html ? v.value : text(v);
    out += strings[i + 1]!;
  });
  return new Html(out);
}
