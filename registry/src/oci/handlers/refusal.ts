/**
 * An error answered before the request's body was read: a write refused for its credentials (401)
 * or its target (403), a name or upload session that does not exist (404), a verb the route does
 * not have (405). A small body (within the manifest cap) that arrives at once is read to its end
 * first, so a client that writes its whole body before it reads the answer (containerd) sees the
 * refusal and retries on a clean connection. A larger one, or one the client is slow to send (or
 * never sends), does not hold the answer up: it goes out at once and the connection closes
 * (`http/discard-body.ts`).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { settleUnreadBody } from '../../http/discard-body.js';
import { MAX_MANIFEST_BYTES } from '../model/manifest-check.js';

/** With 413 and 503: a body refused for the scratch space it declared (storage/scratch-budget.ts). */
const ANSWERED_BEFORE_BODY = new Set([401, 403, 404, 405, 413, 503]);

export function isAnsweredBeforeBody(answer: { status: number }): boolean {
  return ANSWERED_BEFORE_BODY.has(answer.status);
}

export function beforeRefusal(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  return settleUnreadBody(request, reply, MAX_MANIFEST_BYTES);
}
