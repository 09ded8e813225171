/**
 * The eviction plan (lifecycle/budget/plan.ts) against its rules, for random recorded downloads
 * and budgets: what it picks is the least recently downloaded first (a prefix of the entries
 * oldest first), everything unused for `evict_unused_after` is picked, and after it the index is
 * within `max_bytes` unless nothing downloaded is left to evict, and no more than that is picked.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planEviction } from '../../registry/src/lifecycle/budget/plan.js';

const NOW = 10_000_000;
const entry = fc.record({
  hex: fc.stringMatching(/^[0-9a-f]{64}$/),
  size: fc.integer({ min: 0, max: 10_000 }),
  lastMs: fc.integer({ min: NOW - 1_000_000, max: NOW }),
});

describe('the eviction plan', () => {
  it('evicts the least recently downloaded first, all unused ones, and down to the budget', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(entry, { selector: (e) => e.hex, maxLength: 40 }),
        fc.integer({ min: 0, max: 50_000 }),
        fc.option(fc.integer({ min: 1, max: 300_000 }), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 1000 }), { nil: undefined }),
        (entries, extra, maxBytes, unusedSecs) => {
          // What the index holds: the recorded files plus pages and manifests that are never evicted.
          const held = entries.reduce((a, e) => a + e.size, 0) + extra;
          const budget = { ...(maxBytes !== undefined ? { maxBytes } : {}), ...(unusedSecs !== undefined ? { evictUnusedAfterSecs: unusedSecs } : {}) };
          const plan = planEviction(entries, held, budget, NOW);
          const oldestFirst = [...entries].sort((a, b) => a.lastMs - b.lastMs || a.hex.localeCompare(b.hex));
          expect(plan.map((p) => p.hex)).toEqual(oldestFirst.slice(0, plan.length).map((e) => e.hex));
          if (unusedSecs !== undefined) {
            for (const e of entries) if (e.lastMs < NOW - unusedSecs * 1000) expect(plan.some((p) => p.hex === e.hex)).toBe(true);
          }
          const left = held - plan.reduce((a, p) => a + p.size, 0);
          if (maxBytes !== undefined && plan.length < entries.length) expect(left).toBeLessThanOrEqual(maxBytes);
          if (maxBytes === undefined && unusedSecs === undefined) expect(plan).toEqual([]);
          // No more than needed: the last one picked for the budget was still over it before.
          const last = plan.at(-1);
          if (last?.why === 'over_budget') expect(left + last.size).toBeGreaterThan(maxBytes!);
        },
      ),
      { numRuns: 500 },
    );
  });
});
