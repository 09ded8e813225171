/**
 * What happens to the rest of a request body after the upload was refused early (before the auth
 * check read anything, or when a size limit stopped the staging): the shared bounded discard of
 * `http/discard-body.ts`.
 */
import type { FastifyRequest } from 'fastify';
import { discardRest as discardRaw } from '../../../http/discard-body.js';

export function discardRest(request: FastifyRequest): void {
  discardRaw(request.raw);
}
