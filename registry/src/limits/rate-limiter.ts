/**
 * Per-class request budgets keyed by client address: a sliding-window counter.
 *
 * Each key keeps two counts: requests allowed in the current aligned window and in the one
 * before it. The estimate of requests in the sliding window that ends now weighs the previous
 * window by the share of it still inside: `previous * (1 - elapsed) + current`. A request is
 * allowed when the estimate, with the request itself, stays within `requests`. The weighted term
 * is never negative, so no aligned window ever holds more than `requests` allowed requests (what
 * a fixed window guarantees), and unlike a fixed window a client cannot spend two budgets back to
 * back across a window boundary: right after a full window the estimate still counts it, and
 * room comes back gradually. O(1) time and two numbers per key. Denied requests are not counted,
 * so a client that waits `Retry-After` gets in.
 *
 * Memory: keys live in a Map kept in last-use order (a hit moves its key to the end). Each
 * request first drops keys idle for two windows from the front (their state equals a fresh
 * key's, so dropping changes no answer), and a hard cap drops the least recently used key when a
 * flood of distinct addresses fills the table. Dropping a live key forgets its count (it starts
 * afresh): the cost falls on the client seen least recently, never on memory.
 *
 * Why not @fastify/rate-limit: it counts per route config, and velodex serves every index path
 * from one catch-all route, so the class must come from our own path parsing anyway; it keeps no
 * per-class allowed/denied counts for the metrics; its local store is a fixed window. What is left
 * to reuse is the table below, about as long as the glue the plugin would need.
 *
 * The clock is injected (milliseconds, monotonic) so tests step it instead of sleeping.
 */
import type { RateClass, RateClassName } from '../config/types.js';

export const RATE_CLASSES = ['read', 'download', 'write', 'admin'] as const satisfies readonly RateClassName[];

export const DEFAULT_MAX_KEYS = 100_000;

export type RateDecision = { allowed: true } | { allowed: false; retryAfterSecs: number };

/** One shared answer for the common case: no allocation per allowed request. */
const ALLOWED: RateDecision = Object.freeze({ allowed: true });

export interface RateLimitSnapshot {
  allowed: Record<RateClassName, number>;
  denied: Record<RateClassName, number>;
}

/** What the metrics module reads. */
export interface RateLimitCounters {
  snapshot(): RateLimitSnapshot;
}

export interface RateLimiterOptions {
  now?: () => number;
  /** Keys kept per class at most. */
  maxKeys?: number;
}

interface Entry {
  /** The aligned window `current` counts in (window number, not milliseconds). */
  window: number;
  current: number;
  previous: number;
  /** Last time the entry was touched, for idle eviction. */
  seen: number;
}

class ClassWindow {
  readonly #requests: number;
  readonly #windowMs: number;
  readonly #maxKeys: number;
  readonly #keys = new Map<string, Entry>();

  constructor(limit: RateClass, maxKeys: number) {
    this.#requests = limit.requests;
    this.#windowMs = limit.windowSecs * 1000;
    this.#maxKeys = maxKeys;
  }

  get size(): number {
    return this.#keys.size;
  }

  take(key: string, now: number): RateDecision {
    this.#evictIdle(now);
    const window = Math.floor(now / this.#windowMs);
    let entry = this.#keys.get(key);
    if (entry) {
      this.#keys.delete(key);
      if (entry.window !== window) {
        entry.previous = entry.window === window - 1 ? entry.current : 0;
        entry.current = 0;
        entry.window = window;
      }
    } else {
      if (this.#keys.size >= this.#maxKeys) this.#dropOldest();
      entry = { window, current: 0, previous: 0, seen: now };
    }
    entry.seen = now;
    this.#keys.set(key, entry);

    // previous * (1 - elapsed) + current + 1 <= requests, multiplied out by the window length.
    const left = this.#windowMs - (now - window * this.#windowMs);
    if (entry.previous * left <= (this.#requests - 1 - entry.current) * this.#windowMs) {
      entry.current++;
      return ALLOWED;
    }
    return { allowed: false, retryAfterSecs: this.#retryAfter(entry, now, window) };
  }

  /**
   * Whole seconds until one more request would pass if none came meanwhile; at least 1, at most
   * two windows. Solves `previous * (1 - f) + current + 1 <= requests` for the share `f` of the
   * window that must have passed: in this window while `current` leaves room, else in the next,
   * where this window's count becomes the previous one.
   */
  #retryAfter(entry: Entry, now: number, window: number): number {
    const room = this.#requests - 1 - entry.current;
    // A denial with room in `current` means `previous` outweighs it (so previous > room >= 0);
    // without room, `current` (= requests >= 1) is the previous count of the next window.
    const [start, weighed, free] =
      room >= 0 ? [window * this.#windowMs, entry.previous, room] : [(window + 1) * this.#windowMs, entry.current, this.#requests - 1];
    const at = start + (1 - free / weighed) * this.#windowMs;
    return Math.max(1, Math.ceil((at - now) / 1000));
  }

  #evictIdle(now: number): void {
    const idleMs = 2 * this.#windowMs;
    for (const [key, entry] of this.#keys) {
      if (now - entry.seen < idleMs) return;
      this.#keys.delete(key);
    }
  }

  #dropOldest(): void {
    const oldest = this.#keys.keys().next();
    if (!oldest.done) this.#keys.delete(oldest.value);
  }
}

export class RateLimiter implements RateLimitCounters {
  readonly #now: () => number;
  readonly #classes: Partial<Record<RateClassName, ClassWindow>> = {};
  readonly #allowed = zeros();
  readonly #denied = zeros();

  constructor(classes: Partial<Record<RateClassName, RateClass>>, opts: RateLimiterOptions = {}) {
    this.#now = opts.now ?? (() => performance.now());
    for (const cls of RATE_CLASSES) {
      const limit = classes[cls];
      if (limit) this.#classes[cls] = new ClassWindow(limit, opts.maxKeys ?? DEFAULT_MAX_KEYS);
    }
  }

  /** Counts one request of `cls` from `key`; a class without a window is unlimited. */
  take(cls: RateClassName, key: string): RateDecision {
    const window = this.#classes[cls];
    const decision: RateDecision = window ? window.take(key, this.#now()) : { allowed: true };
    if (decision.allowed) this.#allowed[cls]++;
    else this.#denied[cls]++;
    return decision;
  }

  /** Keys held for `cls` right now (for tests of the memory bound). */
  keys(cls: RateClassName): number {
    return this.#classes[cls]?.size ?? 0;
  }

  snapshot(): RateLimitSnapshot {
    return { allowed: { ...this.#allowed }, denied: { ...this.#denied } };
  }
}

function zeros(): Record<RateClassName, number> {
  return { read: 0, download: 0, write: 0, admin: 0 };
}
