/**
 * The server's default error shape (fastify's `{statusCode, error, message}`, http/errors.ts) as
 * an error model: its table of the neutral kinds (`JSON_ANSWERS`, what the server's own routes
 * answer, and what an ecosystem with the same shape starts its table from: Python), and the
 * shape the handler factory (error-handler.ts) sends it in (`jsonErrors`).
 */
import type { FastifyReply } from 'fastify';
import { errorBody, HttpError } from '../http/errors.js';
import type { NeutralAnswers } from './answers.js';
import type { ErrorShape } from './error-handler.js';

/** An answer in the default shape. An `HttpError` is one. */
export interface JsonAnswer {
  status: number;
  message: string;
  headers: Record<string, string>;
  /** Sent instead of the default error body (a policy denial object). */
  body?: object | undefined;
  /** The status line's reason phrase, for clients that print it instead of the body (pip, twine). */
  reasonPhrase?: string;
}

/** What a 503 for an unavailable store suggests: a restarting object store is back within seconds. */
const STORE_RETRY_AFTER_SECS = 5;

/** The upstream gave no usable answer and nothing else could be served: 502, its message as it is. */
const badGateway = (err: Error): HttpError => new HttpError(502, err.message);
const notFound = (err: Error): HttpError => new HttpError(404, err.message);

export const JSON_ANSWERS: NeutralAnswers<HttpError> = {
  connect: badGateway,
  timeout: badGateway,
  redirect: badGateway,
  aborted: badGateway,
  refused: badGateway,
  status: badGateway,
  // The upstream says the thing is not there: so is it here.
  gone: notFound,
  too_large: badGateway,
  token: badGateway,
  range: badGateway,
  malformed: badGateway,
  mismatch: badGateway,
  broken: badGateway,
  slots_busy: (err) => new HttpError(429, err.message, { 'Retry-After': String(err.retryAfterSecs) }),
  // The cause (endpoint, error code) is for the server's log, not for clients.
  store_unavailable: () => new HttpError(503, 'the storage backend is not answering; retry later', { 'Retry-After': String(STORE_RETRY_AFTER_SECS) }),
  cached_bytes_lost: badGateway,
  // The spec's denial object is the body, whichever ecosystem refused.
  policy_denied: (err) => new HttpError(403, err.message, {}, err.denial),
  not_found: notFound,
  // The message names the limit and what to do; twine prints the status line (Python's table).
  scratch_too_large: (err) => new HttpError(413, err.message),
  scratch_busy: (err) => new HttpError(503, err.message, { 'Retry-After': String(err.retryAfterSecs) }),
};

export function sendJson(reply: FastifyReply, answer: JsonAnswer): FastifyReply {
  if (answer.reasonPhrase !== undefined) reply.raw.statusMessage = answer.reasonPhrase;
  reply.headers(answer.headers);
  return reply.code(answer.status).type('application/json').send(answer.body ?? errorBody(answer.status, answer.message));
}

/** The default shape with `neutral` as its table: an `HttpError` is answered as it is. */
export function jsonErrors(neutral: NeutralAnswers<JsonAnswer>): ErrorShape<JsonAnswer> {
  return {
    own: (err) => (err instanceof HttpError ? err : undefined),
    neutral,
    send: sendJson,
    unanswered: errorBody,
  };
}
