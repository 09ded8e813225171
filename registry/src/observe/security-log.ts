/**
 * The security log: one JSON line at `warn` per rate-limit denial and per failed authentication,
 * with `event` set so a log pipeline can pick them out. The fields are chosen, not copied from
 * the request: no header, no URL query, no credential ever goes in. The Basic username is left
 * out too: velodex ignores it, and a user who swapped the fields would have put the token there.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { RateClassName } from '../config/types.js';

export interface RateLimitEvent {
  class: RateClassName;
  /** The index route, when the request is under one. */
  index?: string;
  client: string;
  retryAfterSecs: number;
}

export function logRateLimited(log: FastifyBaseLogger, e: RateLimitEvent): void {
  log.warn(
    { event: 'rate_limit', class: e.class, ...(e.index !== undefined ? { index: e.index } : {}), client: e.client, retry_after: e.retryAfterSecs },
    `rate limit: ${e.class} requests from ${e.client} denied; retry in ${e.retryAfterSecs} s`,
  );
}

export interface AuthFailedEvent {
  /** The route of the index the request addressed, or the server's own path (`/v2/token`, `/+status`). */
  index: string;
  method: string;
  client: string;
  /** `missing-credentials` or `wrong-credentials`: which of the two, never what was sent. */
  reason: string;
}

export function logAuthFailed(log: FastifyBaseLogger, e: AuthFailedEvent): void {
  log.warn(
    { event: 'auth_failed', index: e.index, method: e.method, client: e.client, reason: e.reason },
    `authentication failed: ${e.method} on ${e.index} from ${e.client} (${e.reason})`,
  );
}
