/**
 * Conditional GET by entity tag (RFC 9110 §13.1.2), one helper for every response that sends an
 * `ETag` (index pages, package files). An answer without one (a digest header as the only
 * validator) never answers 304, so this is not called for it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

/** `If-None-Match` against one strong ETag (weak comparison, as RFC 9110 asks for GET). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

/**
 * Answers 304 (no body; the headers already set stay) when the request's `If-None-Match` matches
 * `etag`, and says so; otherwise sends nothing and returns false.
 */
export function answeredNotModified(request: FastifyRequest, reply: FastifyReply, etag: string): boolean {
  if (!etagMatches(request.headers['if-none-match'], etag)) return false;
  void reply.code(304).send();
  return true;
}
