/**
 * The retention plan of one repository (oci/model/retention-plan.ts), a pure function of its
 * records: keep_tags by tag push time, untagged_after by manifest push time (or first sight),
 * what a kept manifest keeps (an index's children, referrers of a kept subject), and the order
 * deletions must run in.
 */
import { describe, expect, it } from 'vitest';
import type { RetentionRules } from '../../registry/src/config/types.js';
import { planRepository, type ManifestState, type RepoState, type TagState } from '../../registry/src/oci/model/retention-plan.js';

const NOW = Date.parse('2026-01-10T12:00:00Z');
const MIN = 60_000;
const hex = (c: string) => c.repeat(64).slice(0, 64);
const [A, B, C, D, E, F, G] = ['a', 'b', 'c', 'd', 'e', 'f', '0'].map(hex) as [string, string, string, string, string, string, string];

function manifest(h: string, ageMin: number | undefined, more: Partial<ManifestState> = {}): ManifestState {
  return { hex: h, names: [], ...(ageMin !== undefined ? { since: NOW - ageMin * MIN } : {}), ...more };
}
function tag(name: string, h: string, ageMin?: number): TagState {
  return { tag: name, hex: h, ...(ageMin !== undefined ? { taggedAt: NOW - ageMin * MIN } : {}) };
}
const rules = (r: Partial<RetentionRules>): RetentionRules => ({ keepTags: [], ...r });
const deleted = (s: RepoState, r: RetentionRules) => planRepository(s, r, NOW).delete.map((d) => d.hex);

describe('keep_tags', () => {
  it('keeps the newest N tags a glob matches, by tag push time, and untags the older ones', () => {
    const state: RepoState = {
      manifests: [manifest(A, 100), manifest(B, 100), manifest(C, 100)],
      tags: [tag('v1', A, 50), tag('v2', B, 40), tag('v3', C, 30), tag('v1-again', C, 10), tag('latest', C, 5)],
    };
    const plan = planRepository(state, rules({ keepTags: [{ match: 'v?', newest: 2 }] }), NOW);
    expect(plan.untag).toEqual([{ tag: 'v1', hex: A, rule: 'keep_tags match = "v?", newest = 2' }]);
    expect(plan.delete).toEqual([]);
  });

  it('orders tags recorded without a time by their manifest push time, and never removes a tag of unknown age', () => {
    const state: RepoState = {
      manifests: [manifest(A, 300), manifest(B, 200), manifest(C, undefined)],
      tags: [tag('r-a', A), tag('r-b', B), tag('r-c', C)],
    };
    const plan = planRepository(state, rules({ keepTags: [{ match: 'r-*', newest: 1 }] }), NOW);
    expect(plan.untag.map((u) => u.tag)).toEqual(['r-b', 'r-a']);
  });

  it('keeps a tag that any matching rule keeps, and never touches a tag no rule matches', () => {
    const state: RepoState = {
      manifests: [manifest(A, 10)],
      tags: [tag('v1', A, 30), tag('v2', A, 20), tag('v3', A, 10), tag('nightly', A, 90)],
    };
    const plan = planRepository(state, rules({ keepTags: [{ match: 'v*', newest: 1 }, { match: 'v1', newest: 1 }] }), NOW);
    expect(plan.untag.map((u) => u.tag)).toEqual(['v2']);
  });
});

describe('untagged_after', () => {
  it('deletes untagged manifests pushed longer ago, keeps younger ones, and deletes nothing without it', () => {
    const state: RepoState = { manifests: [manifest(A, 120), manifest(B, 5), manifest(C, 120)], tags: [tag('keep', C, 1)] };
    const plan = planRepository(state, rules({ untaggedAfterSecs: 3600 }), NOW);
    expect(plan.delete).toEqual([{ hex: A, tags: [], ageSecs: 7200, rule: 'untagged_after = "1h"' }]);
    expect(deleted(state, rules({ keepTags: [{ match: '*', newest: 1 }] }))).toEqual([]);
  });

  it('never deletes a record without a time on first sight: it is reported to be marked', () => {
    const state: RepoState = { manifests: [manifest(A, undefined), manifest(B, 500)], tags: [] };
    const plan = planRepository(state, rules({ untaggedAfterSecs: 60 }), NOW);
    expect(plan.firstSeen).toEqual([A]);
    expect(plan.delete.map((d) => d.hex)).toEqual([B]);
  });

  it('deletes in the same run what keep_tags untags, listing the tags it had', () => {
    const state: RepoState = { manifests: [manifest(A, 100), manifest(B, 90), manifest(C, 80)], tags: [tag('v1', A, 100), tag('v1.0', A, 100), tag('v2', B, 90), tag('v3', C, 80)] };
    const plan = planRepository(state, rules({ untaggedAfterSecs: 60, keepTags: [{ match: 'v*', newest: 2 }] }), NOW);
    expect(plan.untag.map((u) => u.tag).sort()).toEqual(['v1', 'v1.0']);
    expect(plan.delete).toEqual([{ hex: A, tags: ['v1', 'v1.0'], ageSecs: 6000, rule: 'untagged_after = "1m"' }]);
  });
});

describe('what a kept manifest keeps', () => {
  it("keeps a kept index's children however old, and deletes an untagged index's children after it", () => {
    const state: RepoState = {
      manifests: [
        manifest(A, 500),
        manifest(B, 500),
        manifest(C, 500, { names: [A, B, hex('9')] }),
        manifest(D, 500),
        manifest(E, 500),
        manifest(F, 500, { names: [D, E] }),
      ],
      tags: [tag('multi', C, 500)],
    };
    const plan = planRepository(state, rules({ untaggedAfterSecs: 60 }), NOW);
    expect(plan.delete.map((d) => d.hex)).toEqual([F, D, E]);
  });

  it('keeps a referrer with its kept subject, deletes it with a deleted one (first), and judges a dangling one by its age', () => {
    const state: RepoState = {
      manifests: [
        manifest(A, 500),
        manifest(B, 500, { subject: A }),
        manifest(C, 500),
        manifest(D, 1, { subject: C }),
        manifest(E, 1, { subject: hex('7') }),
        manifest(F, 500, { subject: hex('8') }),
        manifest(G, 500, { subject: D }),
      ],
      tags: [tag('app', A, 500)],
    };
    const plan = planRepository(state, rules({ untaggedAfterSecs: 600 }), NOW);
    expect(plan.delete.map((d) => [d.hex, d.rule])).toEqual([
      [G, `with its subject sha256:${D}`],
      [D, `with its subject sha256:${C}`],
      [C, 'untagged_after = "10m"'],
      [F, 'untagged_after = "10m"'],
    ]);
  });

  it('keeps what a young untagged index names and the referrers of what it keeps', () => {
    const state: RepoState = {
      manifests: [manifest(A, 500), manifest(B, 500, { subject: A }), manifest(C, 1, { names: [A] })],
      tags: [],
    };
    expect(deleted(state, rules({ untaggedAfterSecs: 600 }))).toEqual([]);
  });

  it('never deletes a referrer seen for the first time, even when its subject goes', () => {
    const state: RepoState = { manifests: [manifest(A, 500), manifest(B, undefined, { subject: A })], tags: [] };
    const plan = planRepository(state, rules({ untaggedAfterSecs: 600 }), NOW);
    expect(plan.delete.map((d) => d.hex)).toEqual([A]);
    expect(plan.firstSeen).toEqual([B]);
  });
});
