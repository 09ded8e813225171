/**
 * What a failed call of the `minio` client means to the s3 backend. The client throws `S3Error`s
 * carrying the S3 error code (`PreconditionFailed`, `NoSuchKey`, ...) but not the HTTP status,
 * Node socket errors (`ECONNREFUSED`, ...) when the server cannot be reached, and plain errors
 * once its retries of a 5xx ran out. Only codes are read here: an error's other fields are never
 * copied into a message, so nothing the client attached can leak through one.
 */
import { StoreUnavailableError } from '../types.js';

/** The S3 error code or the socket error code of `err`, if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && code !== '') return code;
  // Node's happy-eyeballs connect reports one error per address tried.
  const inner = (err as { errors?: unknown }).errors;
  if (Array.isArray(inner)) return errorCode(inner[0]);
  return undefined;
}

/** The object (or the version a condition named) is not there: `NoSuchKey` on GET, `NotFound` on HEAD. */
export function isNotFound(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'NoSuchKey' || code === 'NotFound';
}

/** 412: an `If-Match` or `If-None-Match` condition of a write did not hold. */
export function isPreconditionFailed(err: unknown): boolean {
  return errorCode(err) === 'PreconditionFailed';
}

/** Socket-level failures: nothing answered, or the connection broke mid-request. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED', 'UND_ERR_SOCKET']);

export function isNetworkError(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && NETWORK_CODES.has(code);
}

/** Codes with which S3 says the server itself failed or is overloaded (a 5xx). */
const SERVER_CODES = new Set(['InternalError', 'ServiceUnavailable', 'SlowDown', 'XMinioServerNotInitialized', 'XMinioStorageFull', 'XMinioReadQuorum', 'XMinioWriteQuorum']);

/**
 * Wraps a failure that means "the store is not answering" into a `StoreUnavailableError` naming
 * `endpoint` and the code; anything else (a bug, a refusal the caller handles) is returned as is.
 */
export function asUnavailable(err: unknown, endpoint: string, doing: string): unknown {
  const code = errorCode(err);
  if (isNetworkError(err) || (code !== undefined && SERVER_CODES.has(code))) {
    return new StoreUnavailableError(`object store ${endpoint} failed while ${doing}: ${code}`);
  }
  if (err instanceof Error && !code && /socket hang up|Retryable HTTP status|Retries exhausted/.test(err.message)) {
    return new StoreUnavailableError(`object store ${endpoint} failed while ${doing}: ${err.message.split('\n')[0]}`);
  }
  return err;
}
