/**
 * The distribution API reads bodies as streams whatever their Content-Type, but fastify answers
 * 415, outside the OCI error model, to a header that is not `type/subtype` (an empty one
 * included) before any handler runs.
 */
import type { FastifyRequest } from 'fastify';

const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(?:;.*)?$/s;

/**
 * Such a header names no media type, so it is dropped and the request goes on as if it had none:
 * a manifest PUT then takes the body's `mediaType`.
 */
export function dropMalformedContentType(request: FastifyRequest): void {
  const value = request.raw.headers['content-type'];
  if (value !== undefined && !MEDIA_TYPE.test(value)) delete request.raw.headers['content-type'];
}
