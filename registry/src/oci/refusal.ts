/**
 * A write refused for its credentials (401) or its target (403) before its body was read. A
 * small body (within the manifest cap) is read to its end first, so a client that writes its
 * whole body before it reads the answer (containerd) sees the refusal and retries on a clean
 * connection. A larger one is refused at once, and the connection closes after the answer.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { discardBody } from '../http/discard-body.js';
import { OciError, type OciStatusError } from './errors.js';
import { MAX_MANIFEST_BYTES } from './manifests.js';

export function isWriteRefusal(err: OciError | OciStatusError): boolean {
  return err instanceof OciError && (err.code === 'UNAUTHORIZED' || err.code === 'DENIED');
}

export async function beforeRefusal(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const discarded = await discardBody(request.raw, MAX_MANIFEST_BYTES);
  if (discarded !== 'read') reply.header('Connection', 'close');
}
