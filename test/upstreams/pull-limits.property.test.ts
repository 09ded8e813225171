/**
 * Property-based checks of the upstream-pressure header parsers (roles/pull-limits.ts), which read
 * upstream bytes: any string parses without throwing; a rendered `ratelimit-*` figure (with any
 * spacing, a quoted or bare window, more policies or unknown parameters after it) parses back to
 * what was rendered; `Retry-After` in seconds or as an HTTP date gives the wait it says, never
 * below zero nor above the bound. And the walk over the upstreams (roles/upstream-list.ts) against
 * a model: which upstream answers, and which were asked.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { UpstreamConfig } from '../../registry/src/config/types.js';
import { MAX_RETRY_AFTER_SECS, parseRateLimitHeader, parseRetryAfter } from '../../registry/src/roles/pull-limits.js';
import { UpstreamError } from '../../registry/src/roles/upstream-error.js';
import { failsOver, UpstreamList } from '../../registry/src/roles/upstream-list.js';

const RUNS = { numRuns: 500 };
const NOW = Date.parse('2026-11-27T10:00:00Z');
const space = fc.constantFrom('', ' ', '  ', '\t');
const count = fc.integer({ min: 0, max: 1_000_000_000 });
const windowSecs = fc.integer({ min: 1, max: 10_000_000 });

describe('parseRateLimitHeader', () => {
  it('never throws, and gives a figure only with a non-negative integer count', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (v) => {
        const got = parseRateLimitHeader(v);
        if (got !== null) {
          expect(Number.isSafeInteger(got.count) && got.count >= 0).toBe(true);
          if (got.windowSecs !== undefined) expect(got.windowSecs).toBeGreaterThan(0);
        }
      }),
      RUNS,
    );
  });

  it('reads back a rendered figure: count, window, spacing, quoting, what follows', () => {
    fc.assert(
      fc.property(
        count,
        fc.option(windowSecs, { nil: undefined }),
        space,
        space,
        fc.boolean(),
        fc.constantFrom('', ', 1000;w=86400', ';comment="x"', ', 5'),
        (n, w, s1, s2, quoted, tail) => {
          const win = w === undefined ? '' : `${s1};${s2}w=${quoted ? `"${w}"` : w}`;
          expect(parseRateLimitHeader(`${s1}${n}${win}${tail}${s2}`)).toEqual(w === undefined ? { count: n } : { count: n, windowSecs: w });
        },
      ),
      RUNS,
    );
  });

  it("reads Docker Hub's figures, and nothing from what is not one", () => {
    expect(parseRateLimitHeader('100;w=21600')).toEqual({ count: 100, windowSecs: 21600 });
    expect(parseRateLimitHeader('76;w=21600')).toEqual({ count: 76, windowSecs: 21600 });
    for (const bad of [undefined, '', '-1', '1.5', 'abc', '100;w=0', '100;w=-5', '100;w=x', '1e3']) expect(parseRateLimitHeader(bad)).toBeNull();
  });
});

describe('parseRetryAfter', () => {
  it('never throws, and is within [0, the bound] or null', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (v) => {
        const got = parseRetryAfter(v, NOW);
        if (got !== null) expect(got >= 0 && got <= MAX_RETRY_AFTER_SECS * 1000).toBe(true);
      }),
      RUNS,
    );
  });

  it('gives the seconds it says, bounded', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), space, (secs, sp) => {
        expect(parseRetryAfter(`${sp}${secs}${sp}`, NOW)).toBe(Math.min(secs, MAX_RETRY_AFTER_SECS) * 1000);
      }),
      RUNS,
    );
  });

  it('gives the time until an HTTP date, zero for one past, bounded', () => {
    fc.assert(
      fc.property(fc.integer({ min: -86_400, max: 86_400 }), (offsetSecs) => {
        const date = new Date(NOW + offsetSecs * 1000).toUTCString();
        expect(parseRetryAfter(date, NOW)).toBe(Math.min(Math.max(offsetSecs, 0), MAX_RETRY_AFTER_SECS) * 1000);
      }),
      RUNS,
    );
  });

  it('takes no number that is not whole seconds, and no date without a day name', () => {
    for (const bad of [undefined, '', '1.5', '-3', '12s', 'soon', '27 Nov 2026 10:00:00 GMT']) expect(parseRetryAfter(bad, NOW)).toBeNull();
  });
});

/** What one upstream does when asked, in the model. */
type Behaviour = 'ok' | 'absent' | 'gone' | 'connect' | '429' | '503' | '401';

const failure = (b: Behaviour): UpstreamError | null => {
  switch (b) {
    case 'connect':
      return new UpstreamError('connect', null, 'refused');
    case '429':
    case '503':
    case '401':
      return new UpstreamError('status', null, `answered ${b}`, { status: Number(b) });
    case 'gone':
      return new UpstreamError('gone', null, 'not here', { status: 404 });
    default:
      return null;
  }
};

describe('UpstreamList.ask against a model', () => {
  const upstream = fc.record({ behaviour: fc.constantFrom<Behaviour>('ok', 'absent', 'gone', 'connect', '429', '503', '401'), failoverOn404: fc.boolean() });

  it('answers from the first upstream that answers, passing on failures and (where configured) 404s', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(upstream, { minLength: 1, maxLength: 5 }), fc.boolean(), async (ups, pinned) => {
        const configs = ups.map((u, i): UpstreamConfig => ({ url: `http://up${i}.example/`, hosts: [], failoverOn404: u.failoverOn404 })) as [UpstreamConfig, ...UpstreamConfig[]];
        const list = new UpstreamList(configs, (_c, _h) => null, () => NOW);
        const asked: number[] = [];
        const result = await list
          .ask(
            async (m) => {
              asked.push(m.position);
              const b = ups[m.position]!.behaviour;
              const err = failure(b);
              if (err) throw err;
              return { from: m.position, absent: b === 'absent' };
            },
            { absent: (v) => v.absent, pinned },
          )
          .then(
            (a) => ({ value: a.value }),
            (err: unknown) => ({ error: err as UpstreamError }),
          );

        // The model: walk in order; failures that fail over pass on; a "not here" passes on where
        // configured (or pinned); a "not here" after a failure is not believed.
        const expectedAsked: number[] = [];
        let failed: Behaviour | undefined;
        let expected: { value?: number; absentFrom?: number; error?: Behaviour } = {};
        for (const [i, u] of ups.entries()) {
          expectedAsked.push(i);
          const last = i === ups.length - 1;
          const b = u.behaviour;
          if (b === 'ok') {
            expected = { value: i };
            break;
          }
          if (b === 'absent' || b === 'gone') {
            if (failed !== undefined) {
              expected = { error: failed };
              break;
            }
            expected.absentFrom ??= i;
            if ((u.failoverOn404 || pinned) && !last) continue;
            break;
          }
          const passes = failsOver(failure(b));
          if (!passes || last) {
            expected = { error: b };
            break;
          }
          failed = b;
        }
        expect(asked).toEqual(expectedAsked);
        if (expected.value !== undefined) expect(result).toEqual({ value: { from: expected.value, absent: false } });
        else if (expected.error !== undefined) expect('error' in result && result.error.message).toBe(failure(expected.error)!.message);
        else {
          // Every one said "not here": the first such answer stands (a thrown one is thrown).
          const firstAbsent = ups[expected.absentFrom!]!.behaviour;
          if (firstAbsent === 'absent') expect(result).toEqual({ value: { from: expected.absentFrom, absent: true } });
          else expect('error' in result && result.error.kind).toBe('gone');
        }
      }),
      RUNS,
    );
  });
});
