/**
 * Properties of the retention plan (oci/model/retention-plan.ts) over random repositories:
 * indexes naming earlier manifests, referrers of recorded and unrecorded subjects, tags with and
 * without times, manifests with and without a push time, and random rules. Whatever the input:
 * nothing a kept manifest names (or a referrer of a kept subject) is planned for deletion, no tag
 * that no rule matches is removed, nothing still tagged or seen for the first time is deleted,
 * each rule keeps its newest N, and every deletion comes after the deletions that name it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RetentionRules } from '../../registry/src/config/types.js';
import { compileGlob } from '../../registry/src/policy/glob.js';
import { planRepository, type ManifestState, type RepoState } from '../../registry/src/oci/model/retention-plan.js';

const NOW = 1_800_000_000_000;
const hexOf = (i: number) => i.toString(16).padStart(64, '0');
const TAG_NAMES = ['v1', 'v2', 'v3', 'v10', 'latest', 'dev', 'dev-1', 'rc1', 'stable', 'sha-1'];
const GLOBS = ['v*', 'dev*', '*', 'v?', 'rc?', 'sha-*', 'stable'];

/** A repository: manifest i may name, or refer to, manifests below i (content addressing: no cycles). */
const repoState: fc.Arbitrary<RepoState> = fc.integer({ min: 1, max: 14 }).chain((n) =>
  fc
    .tuple(
      fc.array(
        fc.record({
          since: fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: undefined }),
          names: fc.array(fc.nat(), { maxLength: 3 }),
          subject: fc.option(fc.integer({ min: 0, max: n + 2 }), { nil: undefined }),
        }),
        { minLength: n, maxLength: n },
      ),
      fc.array(fc.record({ tag: fc.constantFrom(...TAG_NAMES), target: fc.nat(), at: fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: undefined }) }), { maxLength: 8 }),
    )
    .map(([ms, ts]) => {
      const manifests: ManifestState[] = ms.map((m, i) => ({
        hex: hexOf(i),
        // Children only among earlier manifests; one name outside the repository (a layer).
        names: i === 0 ? [hexOf(999)] : m.names.map((k) => hexOf(k % i)),
        ...(m.since !== undefined ? { since: NOW - m.since * 1000 } : {}),
        // A subject may be recorded (an earlier manifest: no cycles) or not (n and above).
        ...(m.subject !== undefined && (m.subject < i || m.subject >= n) ? { subject: hexOf(m.subject) } : {}),
      }));
      const byTag = new Map<string, { tag: string; hex: string; taggedAt?: number }>();
      for (const t of ts) byTag.set(t.tag, { tag: t.tag, hex: hexOf(t.target % n), ...(t.at !== undefined ? { taggedAt: NOW - t.at * 1000 } : {}) });
      return { manifests, tags: [...byTag.values()] };
    }),
);

const retentionRules: fc.Arbitrary<RetentionRules> = fc.record({
  untaggedAfterSecs: fc.option(fc.integer({ min: 1, max: 8_000 }), { nil: undefined }),
  keepTags: fc.array(fc.record({ match: fc.constantFrom(...GLOBS), newest: fc.integer({ min: 1, max: 4 }) }), { maxLength: 3 }),
}).map((r) => (r.untaggedAfterSecs === undefined ? { keepTags: r.keepTags } : { untaggedAfterSecs: r.untaggedAfterSecs, keepTags: r.keepTags }));

const RUNS = { numRuns: 500 };

describe('the retention plan, for any repository and rules', () => {
  it('never plans to delete what a kept manifest names, nor a referrer of a kept subject', () => {
    fc.assert(
      fc.property(repoState, retentionRules, (state, rules) => {
        const plan = planRepository(state, rules, NOW);
        const gone = new Set(plan.delete.map((d) => d.hex));
        for (const m of state.manifests) {
          if (gone.has(m.hex)) continue;
          for (const named of m.names) expect(gone.has(named), `${m.hex} is kept and names ${named}`).toBe(false);
          for (const r of state.manifests) if (r.subject === m.hex) expect(gone.has(r.hex), `${r.hex} refers to kept ${m.hex}`).toBe(false);
        }
      }),
      RUNS,
    );
  });

  it('never removes a tag that no rule matches, and keeps the newest N of each rule', () => {
    fc.assert(
      fc.property(repoState, retentionRules, (state, rules) => {
        const plan = planRepository(state, rules, NOW);
        const removed = new Set(plan.untag.map((u) => u.tag));
        const globs = rules.keepTags.map((r) => ({ re: compileGlob(r.match), newest: r.newest }));
        for (const t of state.tags) if (!globs.some((g) => g.re.test(t.tag))) expect(removed.has(t.tag)).toBe(false);
        for (const g of globs) {
          const matched = state.tags.filter((t) => g.re.test(t.tag));
          const stay = matched.filter((t) => !removed.has(t.tag)).length;
          expect(stay).toBeGreaterThanOrEqual(Math.min(g.newest, matched.length));
        }
      }),
      RUNS,
    );
  });

  it('never deletes a manifest still tagged, seen for the first time, or anything without untagged_after', () => {
    fc.assert(
      fc.property(repoState, retentionRules, (state, rules) => {
        const plan = planRepository(state, rules, NOW);
        const removed = new Set(plan.untag.map((u) => u.tag));
        const tagged = new Set(state.tags.filter((t) => !removed.has(t.tag)).map((t) => t.hex));
        const firstSeen = new Set(plan.firstSeen);
        if (rules.untaggedAfterSecs === undefined) expect(plan.delete).toEqual([]);
        for (const d of plan.delete) {
          expect(tagged.has(d.hex)).toBe(false);
          expect(firstSeen.has(d.hex)).toBe(false);
        }
        expect(new Set(plan.delete.map((d) => d.hex)).size).toBe(plan.delete.length);
      }),
      RUNS,
    );
  });

  it('orders every deletion after the deletions that name it (as a child or a subject)', () => {
    fc.assert(
      fc.property(repoState, retentionRules, (state, rules) => {
        const plan = planRepository(state, rules, NOW);
        const position = new Map(plan.delete.map((d, i) => [d.hex, i]));
        const byHex = new Map(state.manifests.map((m) => [m.hex, m]));
        for (const d of plan.delete) {
          const m = byHex.get(d.hex)!;
          for (const named of [...m.names, ...(m.subject !== undefined ? [m.subject] : [])]) {
            const at = position.get(named);
            if (at !== undefined && named !== d.hex) expect(at).toBeGreaterThan(position.get(d.hex)!);
          }
        }
      }),
      RUNS,
    );
  });
});
