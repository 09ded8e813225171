/**
 * Parses a `WWW-Authenticate` header (RFC 9110 §11.6.1) as upstream registries send it:
 * `Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a:pull"`,
 * or `Basic realm="x"`, possibly several challenges in one value. The bytes come from an upstream,
 * so the parser never throws: what it cannot read it skips, and a header it cannot read at all
 * gives no challenge. Scheme names compare case-insensitively; parameter names are lower-cased.
 */

export interface Challenge {
  /** Lower case: `bearer`, `basic`, ... */
  scheme: string;
  /** Parameter name (lower case) -> value, quotes and escapes removed. The first of a repeated name wins. */
  params: Record<string, string>;
  /** The token68 form (`Negotiate abc==`), when the challenge has one instead of parameters. */
  token68?: string;
}

const TOKEN = /[!#$%&'*+.^_`|~0-9A-Za-z-]+/y;
const TOKEN68 = /[A-Za-z0-9._~+/-]+=*/y;
const SPACE = /[ \t]*/y;

class Cursor {
  pos = 0;
  constructor(readonly text: string) {}

  match(re: RegExp): string | undefined {
    re.lastIndex = this.pos;
    const m = re.exec(this.text);
    if (!m) return undefined;
    this.pos = re.lastIndex;
    return m[0];
  }

  skipSpace(): void {
    this.match(SPACE);
  }

  peek(): string | undefined {
    return this.text[this.pos];
  }

  done(): boolean {
    return this.pos >= this.text.length;
  }

  /** A quoted-string at the cursor (the opening quote already seen), unescaped. */
  quoted(): string | undefined {
    let out = '';
    for (let i = this.pos + 1; i < this.text.length; i++) {
      const c = this.text[i]!;
      if (c === '\\' && i + 1 < this.text.length) {
        out += this.text[++i];
      } else if (c === '"') {
        this.pos = i + 1;
        return out;
      } else {
        out += c;
      }
    }
    return undefined;
  }
}

/** Every challenge of the header value(s), in order. */
export function parseWwwAuthenticate(value: string | readonly string[] | undefined): Challenge[] {
  if (value === undefined) return [];
  if (typeof value !== 'string') return value.flatMap((v) => parseWwwAuthenticate(v));
  const c = new Cursor(value);
  const out: Challenge[] = [];
  let current: Challenge | undefined;
  while (!c.done()) {
    c.skipSpace();
    if (c.peek() === ',') {
      c.pos++;
      continue;
    }
    const start = c.pos;
    const name = c.match(TOKEN);
    if (name === undefined) {
      // Unreadable: resynchronise at the next comma.
      const comma = value.indexOf(',', c.pos + 1);
      c.pos = comma === -1 ? value.length : comma;
      continue;
    }
    c.skipSpace();
    if (c.peek() === '=' && current && !/^=+\s*(,|$)/.test(value.slice(c.pos))) {
      // An auth-param of the current challenge.
      c.pos++;
      c.skipSpace();
      let v: string | undefined;
      if (c.peek() === '"') v = c.quoted();
      else v = c.match(TOKEN);
      if (v === undefined) {
        const comma = value.indexOf(',', c.pos);
        c.pos = comma === -1 ? value.length : comma;
        continue;
      }
      const key = name.toLowerCase();
      if (!Object.hasOwn(current.params, key)) defineParam(current.params, key, v);
      continue;
    }
    // A new challenge: `scheme`, then a token68, parameters, or nothing.
    c.pos = start + name.length;
    current = { scheme: name.toLowerCase(), params: Object.create(null) as Record<string, string> };
    out.push(current);
    c.skipSpace();
    const afterScheme = c.pos;
    const t68 = c.match(TOKEN68);
    if (t68 !== undefined) {
      c.skipSpace();
      if (c.done() || c.peek() === ',') current.token68 = t68;
      else c.pos = afterScheme;
    }
  }
  return out.map((ch) => ({ ...ch, params: { ...ch.params } }));
}

/** Parameters are data from an upstream: defined (never assigned), so `__proto__` is just a name. */
function defineParam(params: Record<string, string>, key: string, value: string): void {
  Object.defineProperty(params, key, { value, enumerable: true, writable: true, configurable: true });
}

/** The first challenge of `scheme` (lower case), if any. */
export function challengeOf(challenges: readonly Challenge[], scheme: string): Challenge | undefined {
  return challenges.find((ch) => ch.scheme === scheme);
}
