/**
 * How a failure is answered on `/v2/`: the error shape of the handler factory
 * (ecosystem/error-handler.ts) in the distribution-spec body (`model/errors.ts`). OCI's own errors
 * are answers as they are; a neutral failure of the core is answered by OCI's one table
 * (`OCI_ANSWERS`); an `HttpError` of the shared HTTP helpers keeps its status in the OCI body.
 */
import type { FastifyReply } from 'fastify';
import type { NeutralAnswers } from '../../ecosystem/answers.js';
import { errorHandler, type ErrorShape } from '../../ecosystem/error-handler.js';
import { HttpError } from '../../http/errors.js';
import { ERROR_STATUS, errorPayload, OciError, OciStatusError } from '../model/errors.js';
import { beforeRefusal } from './refusal.js';

/** An answer on `/v2/`: a status, its code (a distribution-spec one where the spec has it), the message and headers. */
export interface OciAnswer {
  status: number;
  code: string;
  message: string;
  headers: Record<string, string>;
  /** The spec's optional `detail` of the error entry. */
  detail?: unknown;
}

/** What a 503 for an unavailable store suggests: a restarting object store is back within seconds. */
const STORE_RETRY_AFTER_SECS = 5;

/** The upstream gave no usable answer and nothing else could be served: the spec's UNKNOWN (502). */
const unknown = (err: Error): OciAnswer => ({ status: ERROR_STATUS.UNKNOWN, code: 'UNKNOWN', message: err.message, headers: {} });
/** Not there, as a role or the upstream found: 404 with a code of ours (the spec's codes name what is missing). */
const notFound = (err: Error): OciAnswer => ({ status: 404, code: 'NOT_FOUND', message: err.message, headers: {} });

/** OCI's answer to every neutral kind (errors/neutral.ts). */
export const OCI_ANSWERS: NeutralAnswers<OciAnswer> = {
  connect: unknown,
  timeout: unknown,
  redirect: unknown,
  aborted: unknown,
  refused: unknown,
  status: unknown,
  gone: notFound,
  too_large: unknown,
  token: unknown,
  range: unknown,
  malformed: unknown,
  mismatch: unknown,
  broken: unknown,
  slots_busy: (err) => ({ status: ERROR_STATUS.TOOMANYREQUESTS, code: 'TOOMANYREQUESTS', message: err.message, headers: { 'Retry-After': String(err.retryAfterSecs) } }),
  // The distribution registry's code for 503 (its errcode ErrorCodeUnavailable). The cause
  // (endpoint, error code) is for the server's log, not for clients.
  store_unavailable: () => ({
    status: 503,
    code: 'UNAVAILABLE',
    message: 'the storage backend is not answering; retry later',
    headers: { 'Retry-After': String(STORE_RETRY_AFTER_SECS) },
  }),
  cached_bytes_lost: unknown,
  // The spec binds 403 to DENIED; the denial object rides in the entry's `detail`. (No OCI route
  // applies a policy yet.)
  policy_denied: (err) => ({ status: ERROR_STATUS.DENIED, code: 'DENIED', message: err.message, headers: {}, detail: err.denial }),
  not_found: notFound,
  // No distribution-spec code has 413; SIZE_INVALID is the one for a size the registry will not take.
  scratch_too_large: (err) => ({ status: 413, code: 'SIZE_INVALID', message: err.message, headers: {} }),
  // As for the store: UNAVAILABLE (503) with Retry-After, which crane, docker and oras retry.
  scratch_busy: (err) => ({ status: 503, code: 'UNAVAILABLE', message: err.message, headers: { 'Retry-After': String(err.retryAfterSecs) } }),
};

/** The code of an `HttpError`'s status, for the statuses the shared HTTP helpers answer on `/v2/`. */
const CODE_OF_HTTP_STATUS: Record<number, string> = {
  400: 'REQUEST_INVALID',
  404: 'NOT_FOUND',
  413: 'SIZE_INVALID',
  429: 'TOOMANYREQUESTS',
  502: 'UNKNOWN',
  503: 'UNAVAILABLE',
};

/**
 * OCI's own errors as they are, and an `HttpError` with its status kept. An `HttpError` of
 * another 5xx is no answer: the handler's internal error (500) answers it.
 */
function ownAnswer(err: unknown): OciAnswer | undefined {
  if (err instanceof OciError || err instanceof OciStatusError) return err;
  if (!(err instanceof HttpError) || (err.status >= 500 && err.status !== 502 && err.status !== 503)) return undefined;
  return { status: err.status, code: CODE_OF_HTTP_STATUS[err.status] ?? 'REQUEST_INVALID', message: err.message, headers: err.headers };
}

export function sendOci(reply: FastifyReply, answer: OciAnswer): FastifyReply {
  reply.headers(answer.headers);
  return reply.code(answer.status).type('application/json').send(errorPayload(answer.code, answer.message, answer.detail));
}

export const OCI_ERRORS: ErrorShape<OciAnswer> = {
  own: ownAnswer,
  neutral: OCI_ANSWERS,
  send: sendOci,
  // Not UNKNOWN for an internal error: that code means an upstream failure (502) in the spec's table.
  unanswered: (status, message) => errorPayload(status >= 500 ? 'INTERNAL_ERROR' : 'REQUEST_INVALID', message),
  beforeAnswer: beforeRefusal,
  logLine: 'OCI request failed',
};

/** The error handler of the `/v2/` scope. */
export const answerOciError = errorHandler(OCI_ERRORS);
