/**
 * The distribution-spec error model: every failure on `/v2/` is `{errors: [{code, message,
 * detail?}]}` with `Content-Type: application/json`, and each code has exactly one status.
 */
import type { FastifyReply } from 'fastify';
import { neutralAnswer } from '../../ecosystem/neutral-answer.js';
import { HttpError } from '../../http/errors.js';
import { SlotsBusyError } from '../../limits/slots.js';

export const ERROR_STATUS = {
  NAME_UNKNOWN: 404,
  MANIFEST_UNKNOWN: 404,
  BLOB_UNKNOWN: 404,
  BLOB_UPLOAD_UNKNOWN: 404,
  DIGEST_INVALID: 400,
  MANIFEST_INVALID: 400,
  // An image manifest names a config or layer the target index does not hold.
  MANIFEST_BLOB_UNKNOWN: 400,
  // Distribution-spec codes for input that fails the grammar of a name or a tag.
  NAME_INVALID: 400,
  TAG_INVALID: 400,
  DENIED: 403,
  UNAUTHORIZED: 401,
  UNSUPPORTED: 405,
  // The distribution spec's code for 429: the layer-contents walk cap had no slot in time.
  TOOMANYREQUESTS: 429,
  UNKNOWN: 502,
} as const;

export type OciErrorCode = keyof typeof ERROR_STATUS;

export class OciError extends Error {
  readonly status: number;

  constructor(
    readonly code: OciErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly detail?: unknown,
  ) {
    super(message);
    this.name = 'OciError';
    this.status = ERROR_STATUS[code];
  }
}

/**
 * A failure that has a status but no distribution-spec code: out-of-order chunks and
 * unsatisfiable ranges (416), and the layer-contents route (415, 404, 416, 422). The body keeps
 * the OCI shape with a descriptive code so clients parse it the same way.
 */
export class OciStatusError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'OciStatusError';
  }
}

export function errorPayload(code: string, message: string, detail?: unknown): string {
  const entry: { code: string; message: string; detail?: unknown } = { code, message };
  if (detail !== undefined) entry.detail = detail;
  return JSON.stringify({ errors: [entry] });
}

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
