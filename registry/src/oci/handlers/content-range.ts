/** The `Content-Range` header of an OCI upload chunk (the `Range` of a GET is `http/range.ts`). */
import type { ByteRange } from '../../storage/types.js';

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
