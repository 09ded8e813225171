/** What a request says of its body's length before any of it is read. */
import type { IncomingHttpHeaders } from 'node:http';

/** The request's Content-Length when it is a positive whole number; undefined otherwise (absent, chunked, unreadable, 0). */
export function declaredLength(headers: IncomingHttpHeaders): number | undefined {
  const n = Number(headers['content-length']);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}
