/**
 * Before any error answer of the `/v2/` scope: the request's body is settled. It may be unread (a
 * write refused for its credentials (401) or its target (403), a name or upload session that does
 * not exist (404), a verb the route does not have (405), a declared length the scratch space
 * cannot take (413, 503)), or read in part (a body cut mid-stream: past the scratch budget, past
 * the manifest cap, a store that failed; `http/request-body.ts` leaves its rest unread).
 *
 * A small rest (within the manifest cap) that arrives at once is read to its end first, so a
 * client that writes its whole body before it reads the answer (containerd) sees the refusal and
 * retries on a clean connection. A larger one, or one the client is slow to send (or never
 * sends), does not hold the answer up: it goes out at once and the connection closes
 * (`http/discard-body.ts`). A body read to its end needs nothing.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { settleUnreadBody } from '../../http/discard-body.js';
import { MAX_MANIFEST_BYTES } from '../model/manifest-check.js';

export function beforeRefusal(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  return settleUnreadBody(request, reply, MAX_MANIFEST_BYTES);
}
