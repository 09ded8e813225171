/** The `Range` request header of a blob GET: one byte range, or none. */
import type { ByteRange } from '../storage/types.js';

export type RangeRequest = { kind: 'none' } | { kind: 'range'; range: ByteRange } | { kind: 'unsatisfiable' };

/**
 * `bytes=a-b`, `bytes=a-` and `bytes=-n` against a blob of `size` bytes. A range in another
 * unit, or a list of several ranges, is ignored (the full blob is served, as RFC 9110 allows);
 * a malformed or unsatisfiable bytes range is refused.
 */
export function parseRange(header: string | undefined, size: number): RangeRequest {
  if (header === undefined) return { kind: 'none' };
  const eq = header.indexOf('=');
  if (eq === -1) return { kind: 'unsatisfiable' };
  if (header.slice(0, eq).trim().toLowerCase() !== 'bytes') return { kind: 'none' };
  const spec = header.slice(eq + 1).trim();
  if (spec.includes(',')) return { kind: 'none' };
  const m = /^(\d*)-(\d*)$/.exec(spec);
  if (!m || (m[1] === '' && m[2] === '')) return { kind: 'unsatisfiable' };
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    start = Math.max(size - suffix, 0);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return { kind: 'unsatisfiable' };
    if (start >= size) return { kind: 'unsatisfiable' };
  }
  return { kind: 'range', range: { start, end } };
}

const CONTENT_RANGE = /^(?:bytes[ =])?(\d{1,15})-(\d{1,15})(?:\/(?:\d{1,15}|\*))?$/;

/**
 * The `Content-Range` of an upload chunk: the OCI form `<start>-<end>` or the HTTP form
 * `bytes <start>-<end>/<total>`. Null when malformed, when the end lies before the start, or when
 * a number has more digits than a byte offset can (15: below 2^53, so no precision is lost).
 */
export function parseContentRange(header: string): ByteRange | null {
  const m = CONTENT_RANGE.exec(header.trim());
  if (!m) return null;
  const start = Number(m[1]);
  const end = Number(m[2]);
  return end >= start ? { start, end } : null;
}
