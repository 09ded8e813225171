/**
 * The error handler of the server's own routes and of the index namespace: an `HttpError` is sent
 * as it is, a neutral failure as its default answer (ecosystem/neutral-answer.ts), a client that
 * went away as 499, anything else as a 500 that names the request id (the cause stays in the
 * log). `/v2/` has its own handler in its own error shape (oci/handlers/routes.ts).
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { neutralAnswer } from '../ecosystem/neutral-answer.js';
import { isClientGone, logClientGone } from '../http/client-gone.js';
import { errorBody, HttpError } from '../http/errors.js';

export function answerError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = err instanceof HttpError ? err : neutralAnswer(err);
  if (answer) {
    // A 5xx the server answers on purpose (store or upstream down) still belongs in the log, with its cause.
    if (answer.status >= 500) request.log.warn({ err }, 'request failed');
    reply.headers(answer.headers);
    return reply.code(answer.status).type('application/json').send(answer.body ?? errorBody(answer.status, answer.message));
  }
  if (isClientGone(err, request)) {
    logClientGone(err, request);
    return reply.code(499).send();
  }
  const status = typeof (err as { statusCode?: unknown }).statusCode === 'number' ? (err as { statusCode: number }).statusCode : 500;
  if (status >= 500) {
    request.log.error({ err }, 'request failed');
    return reply.code(500).type('application/json').send(errorBody(500, `internal error (request id ${request.id})`));
  }
  return reply.code(status).type('application/json').send(errorBody(status, err instanceof Error ? err.message : 'bad request'));
}
