/**
 * The sliding-window counter with a stepped clock (no sleeps): for any sequence of requests from
 * a few keys and any clock steps, no aligned window of a key holds more than `requests` allowed
 * requests, every denial carries a Retry-After of at least one second, waiting that long lets a
 * request through, classes without a window are unlimited, the counters add up, and a flood of
 * distinct keys never holds more than the cap. Retry-After is at most two windows: a full window
 * weighs on the next one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RATE_CLASSES, RateLimiter } from '../../registry/src/limits/rate-limiter.js';

const RUNS = { numRuns: 300 };

const step = fc.record({
  key: fc.constantFrom('a', 'b', 'c'),
  /** Milliseconds to advance the clock before the request. */
  advance: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 5000 })),
});

describe('RateLimiter', () => {
  it('never allows more than `requests` per aligned window, and every denial says when to retry', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }), fc.array(step, { maxLength: 200 }), (requests, windowSecs, steps) => {
        let now = 0;
        const limiter = new RateLimiter({ read: { requests, windowSecs } }, { now: () => now });
        const perWindow = new Map<string, number>();
        for (const s of steps) {
          now += s.advance;
          const d = limiter.take('read', s.key);
          if (d.allowed) {
            const slot = `${s.key}@${Math.floor(now / (windowSecs * 1000))}`;
            const count = (perWindow.get(slot) ?? 0) + 1;
            perWindow.set(slot, count);
            expect(count).toBeLessThanOrEqual(requests);
          } else {
            expect(Number.isInteger(d.retryAfterSecs)).toBe(true);
            expect(d.retryAfterSecs).toBeGreaterThanOrEqual(1);
            expect(d.retryAfterSecs).toBeLessThanOrEqual(2 * windowSecs);
          }
        }
        const snap = limiter.snapshot();
        expect(snap.allowed.read + snap.denied.read).toBe(steps.length);
      }),
      RUNS,
    );
  });

  it('lets a denied client in once it waited Retry-After', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }), fc.array(fc.integer({ min: 0, max: 2000 }), { maxLength: 60 }), (requests, windowSecs, advances) => {
        let now = 0;
        const limiter = new RateLimiter({ download: { requests, windowSecs } }, { now: () => now });
        for (const advance of advances) {
          now += advance;
          const d = limiter.take('download', 'k');
          if (!d.allowed) {
            now += d.retryAfterSecs * 1000;
            expect(limiter.take('download', 'k').allowed).toBe(true);
          }
        }
      }),
      RUNS,
    );
  });

  it('does not let a client spend two budgets back to back across a window boundary', () => {
    let now = 0;
    const limiter = new RateLimiter({ read: { requests: 10, windowSecs: 10 } }, { now: () => now });
    now = 9_900;
    for (let i = 0; i < 10; i++) expect(limiter.take('read', 'k').allowed).toBe(true);
    now = 10_100; // the next aligned window, 200 ms later: a fixed window would allow 10 more
    let allowed = 0;
    for (let i = 0; i < 10; i++) if (limiter.take('read', 'k').allowed) allowed++;
    expect(allowed).toBe(0);
    now = 11_000; // a tenth of the window on: a tenth of the budget is back
    for (let i = 0; i < 10; i++) if (limiter.take('read', 'k').allowed) allowed++;
    expect(allowed).toBe(1);
  });

  it('leaves classes without a window unlimited, and counts them', () => {
    const limiter = new RateLimiter({ write: { requests: 1, windowSecs: 60 } }, { now: () => 0 });
    for (let i = 0; i < 1000; i++) expect(limiter.take('read', 'k').allowed).toBe(true);
    expect(limiter.take('write', 'k').allowed).toBe(true);
    expect(limiter.take('write', 'k').allowed).toBe(false);
    expect(limiter.snapshot()).toEqual({
      allowed: { read: 1000, download: 0, write: 1, admin: 0 },
      denied: { read: 0, download: 0, write: 1, admin: 0 },
    });
    expect(RATE_CLASSES.map((c) => limiter.keys(c))).toEqual([0, 0, 1, 0]);
  });

  it('holds at most the cap of keys under a flood of distinct addresses, and drops idle keys', () => {
    let now = 0;
    const limiter = new RateLimiter({ read: { requests: 5, windowSecs: 1 } }, { now: () => now, maxKeys: 100 });
    for (let i = 0; i < 10_000; i++) limiter.take('read', `10.0.${i >> 8}.${i & 255}`);
    expect(limiter.keys('read')).toBe(100);
    now += 2_000; // two windows idle: every key's state equals a fresh one's
    limiter.take('read', 'fresh');
    expect(limiter.keys('read')).toBe(1);
  });
});
