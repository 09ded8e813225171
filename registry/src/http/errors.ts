import { SlotsBusyError } from '../limits/slots.js';
import { CachedBytesLostError, UpstreamUnavailableError } from '../roles/errors.js';
import { StoreUnavailableError } from '../storage/types.js';

/** What a 503 for an unavailable store suggests: a restarting object store is back within seconds. */
const STORE_RETRY_AFTER_SECS = 5;

/** An error with an HTTP status and a message meant for the person behind the client. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Extra headers for the response, e.g. `WWW-Authenticate` or `Retry-After`. */
    readonly headers: Record<string, string> = {},
    /** A JSON body to send instead of the default error body (e.g. a policy denial object). */
    readonly body?: object,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export function reasonPhrase(status: number): string {
  return REASONS[status] ?? 'Error';
}

/** The default error body for non-OCI routes: the shape fastify itself uses. */
export function errorBody(status: number, message: string): { statusCode: number; error: string; message: string } {
  return { statusCode: status, error: reasonPhrase(status), message };
}

/**
 * The default answer to a neutral failure (roles/, limits/): what index routes and the server's
 * own routes send. `/v2/` maps the same failures to its own codes (oci/errors.ts).
 */
export function neutralAnswer(err: unknown): HttpError | undefined {
  if (err instanceof SlotsBusyError) return new HttpError(429, err.message, { 'Retry-After': String(err.retryAfterSecs) });
  if (err instanceof UpstreamUnavailableError || err instanceof CachedBytesLostError) return new HttpError(502, err.message);
  // The cause (endpoint, error code) is for the server's log, not for clients.
  if (err instanceof StoreUnavailableError) return new HttpError(503, 'the storage backend is not answering; retry later', { 'Retry-After': String(STORE_RETRY_AFTER_SECS) });
  return undefined;
}
