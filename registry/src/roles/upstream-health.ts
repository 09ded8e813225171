/**
 * Whether one upstream answered lately, and what it said about its own pressure. One per
 * configured upstream (roles/upstream-list.ts walks them in order); shown per upstream in
 * `/+status` and `/metrics`.
 *
 * - After a failure the upstream rests for a short backoff: the next upstream is asked instead,
 *   and with none left a stored copy is served stale at once rather than every request waiting
 *   out a connect timeout first. A miss with nothing else to ask still tries it.
 * - A 429 rests it for its `Retry-After` (bounded: roles/pull-limits.ts; the failure backoff when
 *   it gives none), and then it is not asked at all, not even by a miss: it said when to come back.
 * - `ratelimit-limit` / `ratelimit-remaining` of any answer are kept as the last figures seen.
 *
 * Every message kept here is already free of credentials and query strings (UpstreamError's rule).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { UpstreamReport } from '../observe/describe.js';
import { parseRateLimitHeader, parseRetryAfter, type RateLimitFigure } from './pull-limits.js';
import { UpstreamError } from './upstream-error.js';

export const DEFAULT_OFFLINE_BACKOFF_MS = 10_000;

/**
 * What the revalidator (roles/revalidator.ts) asks of the upstream side and tells it: one
 * upstream's `UpstreamHealth`, or a whole `UpstreamList`, which marks each member during its walk
 * and so takes the revalidator's `up`/`down` as already done.
 */
export interface UpstreamState {
  /** True while every upstream failed its last exchange. */
  readonly offline: boolean;
  readonly lastError: string | undefined;
  /** True while nothing should be asked about a stored copy: it is served stale. */
  resting(now: number): boolean;
  up(): void;
  down(err: unknown, now: number): void;
}

interface Pressure {
  limit: RateLimitFigure | null;
  remaining: RateLimitFigure | null;
  observedAt: number;
}

export class UpstreamHealth implements UpstreamState {
  #offline = false;
  #retryAt = 0;
  /** Until when the upstream asked (Retry-After) not to be asked; 0: it did not. */
  #limitedUntil = 0;
  #lastError: { kind: string; message: string; at: number } | undefined;
  #pressure: Pressure | undefined;
  #rateLimited = 0;

  constructor(readonly backoffMs = DEFAULT_OFFLINE_BACKOFF_MS) {}

  get offline(): boolean {
    return this.#offline;
  }

  /** The last failure's message (already free of credentials and query strings). */
  get lastError(): string | undefined {
    return this.#lastError?.message;
  }

  get lastFailure(): { kind: string; message: string; at: number } | undefined {
    return this.#lastError;
  }

  up(): void {
    this.#offline = false;
  }

  down(err: unknown, now: number): void {
    this.#offline = true;
    this.#retryAt = Math.max(this.#retryAt, now + this.backoffMs);
    this.#lastError = { kind: err instanceof UpstreamError ? err.kind : 'broken', message: err instanceof Error ? err.message : String(err), at: now };
  }

  /** True while the upstream should not be asked when there is a stored copy or another upstream. */
  resting(now: number): boolean {
    return (this.#offline && now < this.#retryAt) || this.limited(now);
  }

  /** True while the upstream's own Retry-After runs: not asked at all. */
  limited(now: number): boolean {
    return now < this.#limitedUntil;
  }

  /** Reads one answer's pressure headers (and a 429's `Retry-After`) (every answer passes here: roles/upstream.ts `onAnswer`). */
  observe(status: number, headers: IncomingHttpHeaders, now: number): void {
    const limit = parseRateLimitHeader(one(headers['ratelimit-limit']));
    const remaining = parseRateLimitHeader(one(headers['ratelimit-remaining']));
    if (limit || remaining) this.#pressure = { limit, remaining, observedAt: now };
    if (status !== 429) return;
    this.#rateLimited++;
    const wait = parseRetryAfter(one(headers['retry-after']), now) ?? this.backoffMs;
    this.#limitedUntil = Math.max(this.#limitedUntil, now + wait);
  }

  /** What `/+status` and `/metrics` show of it (without its URL: the caller knows that). */
  report(now: number): Omit<UpstreamReport, 'url'> {
    const limited = this.limited(now);
    const resting = this.resting(now);
    const p = this.#pressure;
    return {
      state: limited ? 'rate_limited' : resting ? 'backing_off' : 'online',
      online: !resting,
      retry_at: resting ? new Date(Math.max(this.#limitedUntil, this.#offline ? this.#retryAt : 0)).toISOString() : null,
      last_error: this.#lastError ? { kind: this.#lastError.kind, message: this.#lastError.message, at: new Date(this.#lastError.at).toISOString() } : null,
      rate_limited_total: this.#rateLimited,
      rate_limit: p
        ? {
            limit: p.limit?.count ?? null,
            remaining: p.remaining?.count ?? null,
            window_secs: p.limit?.windowSecs ?? p.remaining?.windowSecs ?? null,
            observed_at: new Date(p.observedAt).toISOString(),
          }
        : null,
    };
  }
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
