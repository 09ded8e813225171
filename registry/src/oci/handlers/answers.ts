/**
 * How a failure is answered on `/v2/`: an OCI error as it is, in the distribution-spec body
 * (`model/errors.ts`), and a failure raised outside the OCI code mapped to its code once.
 */
import type { FastifyReply } from 'fastify';
import { neutralAnswer } from '../../ecosystem/neutral-answer.js';
import { HttpError } from '../../http/errors.js';
import { SlotsBusyError } from '../../limits/slots.js';
import { errorPayload, OciError, OciStatusError } from '../model/errors.js';

export function sendError(reply: FastifyReply, err: OciError | OciStatusError): FastifyReply {
  reply.headers(err.headers);
  const detail = err instanceof OciError ? err.detail : undefined;
  return reply.code(err.status).type('application/json').send(errorPayload(err.code, err.message, detail));
}

/** The distribution-spec code of a status that some neutral part of the server answered. */
const CODE_OF_STATUS: Record<number, string> = {
  400: 'REQUEST_INVALID',
  404: 'NOT_FOUND',
  413: 'SIZE_INVALID',
  429: 'TOOMANYREQUESTS',
  502: 'UNKNOWN',
  // The distribution registry's code for 503 (its errcode ErrorCodeUnavailable): the store is down.
  503: 'UNAVAILABLE',
};

/**
 * The `/v2/` answer to a failure raised outside the OCI code: the neutral roles' and limits'
 * errors, and an `HttpError` from the shared HTTP helpers (its status kept, its message given the
 * OCI body shape). Undefined for anything else: an internal error.
 */
export function ociAnswerOf(err: unknown): OciError | OciStatusError | undefined {
  if (err instanceof SlotsBusyError) return new OciError('TOOMANYREQUESTS', err.message, { 'Retry-After': String(err.retryAfterSecs) });
  const http = err instanceof HttpError ? err : neutralAnswer(err);
  if (!http || (http.status >= 500 && http.status !== 502 && http.status !== 503)) return undefined;
  return new OciStatusError(http.status, CODE_OF_STATUS[http.status] ?? 'REQUEST_INVALID', http.message, http.headers);
}
