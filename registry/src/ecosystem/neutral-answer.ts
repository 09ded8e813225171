/**
 * The default answer to a neutral failure (roles/, limits/, storage/ throw them without a status):
 * what index routes and the server's own routes send (app/error-handler.ts). It sits at the seam
 * because an ecosystem with its own error shape starts from it too: `/v2/` maps the same failures
 * to its own codes (oci/handlers/answers.ts).
 */
import { HttpError } from '../http/errors.js';
import { SlotsBusyError } from '../limits/slots.js';
import { CachedBytesLostError, UpstreamUnavailableError } from '../roles/errors.js';
import { StoreUnavailableError } from '../storage/types.js';

/** What a 503 for an unavailable store suggests: a restarting object store is back within seconds. */
const STORE_RETRY_AFTER_SECS = 5;

export function neutralAnswer(err: unknown): HttpError | undefined {
  if (err instanceof SlotsBusyError) return new HttpError(429, err.message, { 'Retry-After': String(err.retryAfterSecs) });
  if (err instanceof UpstreamUnavailableError || err instanceof CachedBytesLostError) return new HttpError(502, err.message);
  // The cause (endpoint, error code) is for the server's log, not for clients.
  if (err instanceof StoreUnavailableError) return new HttpError(503, 'the storage backend is not answering; retry later', { 'Retry-After': String(STORE_RETRY_AFTER_SECS) });
  return undefined;
}
