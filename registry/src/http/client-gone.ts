/**
 * An AbortSignal that fires when the client goes away before its response is complete, so work
 * queued for it (a slot wait) gives up its place. Its reason is a `ClientGoneError`, a 499 nobody
 * receives: it ends the handler without an error in the log.
 */
import type { FastifyReply } from 'fastify';
import { HttpError } from './errors.js';

export class ClientGoneError extends HttpError {
  constructor() {
    super(499, 'the client closed the connection before the response');
    this.name = 'ClientGoneError';
  }
}

export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  const res = reply.raw;
  // `close` also follows a completed response; only one that never finished means the client left.
  const onClose = (): void => {
    if (!res.writableFinished) controller.abort(new ClientGoneError());
  };
  if (res.destroyed) onClose();
  else res.once('close', onClose);
  return controller.signal;
}
