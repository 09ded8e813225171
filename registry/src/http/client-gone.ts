/**
 * An AbortSignal that fires when the client goes away before its response is complete, so work
 * queued for it (a slot wait) gives up its place. Its reason is a `ClientGoneError`, a 499 nobody
 * receives: it ends the handler without an error in the log.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
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

/** The errors a read or write of a connection the client closed ends with. */
const GONE_CODES = new Set(['ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE']);

/**
 * True when a request failed because its client went away (a body read cut off, a closed socket):
 * nobody is there to receive an answer, and the server did nothing wrong, so it is no error. The
 * client's own socket must be closed: the same codes from an upstream connection are real failures.
 */
export function isClientGone(err: unknown, request: FastifyRequest): boolean {
  if (err instanceof ClientGoneError) return true;
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && GONE_CODES.has(code) && request.raw.socket?.destroyed === true;
}

/** Logs a request its client abandoned, at info: a closed laptop or a cancelled pull is routine. */
export function logClientGone(err: unknown, request: FastifyRequest): void {
  const message = err instanceof Error ? err.message : String(err);
  request.log.info({ reason: message }, 'client closed the connection before the response');
}
