/**
 * Splits a raw request path into decoded segments, refusing anything that could climb out of a
 * route or smuggle a separator: `.` and `..`, encoded slashes, backslashes or dots, NUL, empty
 * inner segments. Works on the raw URL because a decoded path has already lost `%2F` vs `/`.
 */
import type { IncomingMessage } from 'node:http';
import { HttpError } from './errors.js';

export interface SafePath {
  segments: string[];
  trailingSlash: boolean;
  /** The raw query string without `?`, or ''. */
  query: string;
}

const ENCODED_UNSAFE = /%(2f|5c|00|2e)/i;

export function parseSafePath(rawUrl: string): SafePath {
  const q = rawUrl.indexOf('?');
  const rawPath = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = q === -1 ? '' : rawUrl.slice(q + 1);
  if (!rawPath.startsWith('/')) throw new HttpError(400, 'the request path must start with "/"');
  const trailingSlash = rawPath.length > 1 && rawPath.endsWith('/');
  const inner = rawPath.slice(1, trailingSlash ? -1 : undefined);
  const rawSegments = inner === '' ? [] : inner.split('/');
  const segments = rawSegments.map((raw) => {
    if (raw === '') throw new HttpError(400, 'the request path has an empty segment ("//")');
    if (ENCODED_UNSAFE.test(raw)) throw new HttpError(400, `unsafe path segment "${raw}": encoded slashes, backslashes, dots and NUL are refused`);
    let seg: string;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      throw new HttpError(400, `path segment "${raw}" is not valid percent-encoding`);
    }
    if (seg === '.' || seg === '..') throw new HttpError(400, `unsafe path segment "${seg}"`);
    if (seg.includes('\\') || seg.includes('\0') || seg.includes('/')) throw new HttpError(400, `unsafe path segment "${raw}"`);
    return seg;
  });
  return { segments, trailingSlash, query };
}

const parsedByRequest = new WeakMap<IncomingMessage, SafePath>();

/**
 * `parseSafePath` of a request's URL, parsed once per request: the rate limiter classifies by it
 * before the index namespace routes by it.
 */
export function requestPath(raw: IncomingMessage): SafePath {
  let path = parsedByRequest.get(raw);
  if (!path) {
    path = parseSafePath(raw.url ?? '/');
    parsedByRequest.set(raw, path);
  }
  return path;
}
