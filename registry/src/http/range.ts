/**
 * The one `Range` request header parser (RFC 9110 §14.2), for every ecosystem's byte downloads,
 * so package files and blobs answer a range the same way. Each ecosystem maps `unsatisfiable` to
 * its own error shape, with a `Content-Range` naming only the size (`unsatisfiedRange`).
 */
import type { ByteRange } from '../storage/types.js';

export type RangeAnswer = { kind: 'full' } | ({ kind: 'partial' } & ByteRange) | { kind: 'unsatisfiable' };

/**
 * `bytes=a-b`, `bytes=a-` and `bytes=-n` against a representation of `size` bytes. No header, a
 * range in another unit, or a list of several ranges is served whole (RFC 9110 allows ignoring
 * them; multipart/byteranges is not worth it here). A malformed or unsatisfiable bytes range is
 * `unsatisfiable` (416), as the OCI distribution spec requires and RFC 9110 permits.
 */
export function parseRange(header: string | undefined, size: number): RangeAnswer {
  if (header === undefined) return { kind: 'full' };
  const eq = header.indexOf('=');
  if (eq === -1) return { kind: 'unsatisfiable' };
  if (header.slice(0, eq).trim().toLowerCase() !== 'bytes') return { kind: 'full' };
  const spec = header.slice(eq + 1).trim();
  if (spec.includes(',')) return { kind: 'full' };
  const m = /^(\d*)-(\d*)$/.exec(spec);
  if (!m || (m[1] === '' && m[2] === '')) return { kind: 'unsatisfiable' };
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(size - suffix, 0), end: size - 1 };
  }
  const start = Number(m[1]);
  if (start >= size || (m[2] !== '' && Number(m[2]) < start)) return { kind: 'unsatisfiable' };
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  return { kind: 'partial', start, end };
}

/** The `Content-Range` value of a 206 carrying `range` of `size` bytes. */
export function contentRange(range: ByteRange, size: number): string {
  return `bytes ${range.start}-${range.end}/${size}`;
}

/** The `Content-Range` value of a 416: the representation's size, no range. */
export function unsatisfiedRange(size: number): string {
  return `bytes */${size}`;
}
