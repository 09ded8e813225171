/** One `Range: bytes=...` header against a representation of `size` bytes (RFC 9110 §14). */

export type RangeAnswer = { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

const SINGLE = /^bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i;

/**
 * A single satisfiable range gives `partial`; one that starts past the end gives
 * `unsatisfiable`. Anything else — no header, a syntax we ignore, several ranges — is served
 * whole, which RFC 9110 allows (multipart/byteranges is not worth it for package files).
 */
export function parseRange(header: string | undefined, size: number): RangeAnswer {
  if (!header) return { kind: 'full' };
  const m = SINGLE.exec(header);
  if (!m) return { kind: 'full' };
  const [, first = '', last = ''] = m;
  if (first === '' && last === '') return { kind: 'full' };
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Number(last);
  if (start >= size) return { kind: 'unsatisfiable' };
  if (end < start) return { kind: 'full' };
  return { kind: 'partial', start, end: Math.min(end, size - 1) };
}
