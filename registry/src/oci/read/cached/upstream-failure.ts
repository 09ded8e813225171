/**
 * An upstream exchange that gave no usable answer: no connection, a timeout, a body that broke
 * off, a token realm that refused, or a status that is neither the content nor "not found"
 * (5xx, 429, an unexpected 401/403). The cached role serves what it has stored instead, or
 * answers 502 UNKNOWN. Messages name the upstream as `displayUrl` shows it (scheme and host) and
 * the cause, never a credential.
 */
import { SlotsBusyError } from '../../../limits/slots.js';
import { OciError } from '../../model/errors.js';

export class UpstreamFailure extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UpstreamFailure';
  }
}

/**
 * `err` as an upstream failure, or undefined for what is not one: an answer for the client (an
 * `OciError`) or a busy upstream cap (429 to the client, not the upstream's fault).
 */
export function upstreamFailureOf(err: unknown): UpstreamFailure | undefined {
  if (err instanceof OciError || err instanceof SlotsBusyError) return undefined;
  if (err instanceof UpstreamFailure) return err;
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    // UpstreamError and TokenError messages show URLs through `displayUrl`; a socket error's may not.
    const safe = err.name === 'UpstreamError' || err.name === 'TokenError';
    return new UpstreamFailure(safe ? err.message : `the transfer failed${code ? ` (${code})` : ''}`, { cause: err });
  }
  return new UpstreamFailure('the transfer failed');
}
