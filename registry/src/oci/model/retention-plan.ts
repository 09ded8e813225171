/**
 * What a retention run does to one repository of a hosted index, decided from its records alone:
 * a pure function of the repository's tags and manifests, the index's rules and the time, so the
 * dry run and the real run compute the same plan, and tests need no store.
 *
 * 1. `keep_tags`: for each rule, the tags its glob matches, newest first by the time the tag was
 *    pushed (the manifest's push time for a tag recorded before tag times were kept); the first
 *    `newest` stay. A tag that some rule matches and no matching rule keeps is untagged. A tag no
 *    rule matches is never touched.
 * 2. `untagged_after`: what must stay is every manifest still tagged, every one younger than the
 *    duration, and every one with no known push time (a record of an earlier version: the run
 *    records when it first saw it, and counts from then; never deleted on first sight); then,
 *    until nothing changes, every manifest a kept one names as a child (an image index's images)
 *    and every referrer (a manifest with a `subject`) of a kept one. A referrer whose subject the
 *    repository records is judged with its subject, not by its own age: it goes when its subject
 *    goes (unless it is seen for the first time). Everything else is deleted. Without `untagged_after` nothing is deleted.
 *
 * Deletions are ordered so that a manifest comes after every deleted manifest that names it (as a
 * child or as its subject): the DELETE path lets a manifest's bytes go only when no manifest of
 * the repository names it any more.
 */
import type { RetentionRules } from '../../config/types.js';
import { formatDuration } from '../../config/duration.js';
import { compileGlob } from '../../policy/glob.js';

/** One tag of the repository: the manifest it names, and when it was pushed (epoch ms) if known. */
export interface TagState {
  tag: string;
  hex: string;
  taggedAt?: number;
}

/** One manifest the repository records. */
export interface ManifestState {
  hex: string;
  /** When it was pushed, or first seen by a retention run (epoch ms); absent: never seen before. */
  since?: number;
  /** Hex of its subject, when it is a referrer. */
  subject?: string;
  /** The hexes it names (an index's children; configs and layers may be among them, and are ignored). */
  names: readonly string[];
}

export interface RepoState {
  tags: readonly TagState[];
  manifests: readonly ManifestState[];
}

export interface PlannedUntag {
  tag: string;
  hex: string;
  /** The rule that lets go of it, as the config spells it. */
  rule: string;
}

export interface PlannedDeletion {
  hex: string;
  /** The tags this run removes from it (empty: it was untagged already). */
  tags: string[];
  /** Seconds since it was pushed (or first seen). */
  ageSecs: number;
  rule: string;
}

export interface RepoPlan {
  untag: PlannedUntag[];
  /** In the order they must run: a manifest after every deleted one that names it. */
  delete: PlannedDeletion[];
  /** Manifests with no known time: the run records now as their first sight. */
  firstSeen: string[];
}

export function planRepository(state: RepoState, rules: RetentionRules, now: number): RepoPlan {
  const untag = tagsToRemove(state, rules);
  const removed = new Set(untag.map((u) => u.tag));
  const firstSeen = state.manifests.filter((m) => m.since === undefined).map((m) => m.hex);
  const deletions = rules.untaggedAfterSecs === undefined ? [] : toDelete(state, removed, untag, rules.untaggedAfterSecs, now);
  return { untag, delete: deletions, firstSeen };
}

/** Step 1: the tags some `keep_tags` rule matches and none of the matching rules keeps. */
function tagsToRemove(state: RepoState, rules: RetentionRules): PlannedUntag[] {
  if (rules.keepTags.length === 0) return [];
  const since = new Map(state.manifests.map((m) => [m.hex, m.since]));
  // Unknown times count as now: a tag whose age cannot be told is among the newest, so it stays.
  const timeOf = (t: TagState) => t.taggedAt ?? since.get(t.hex) ?? Number.POSITIVE_INFINITY;
  const newestFirst = [...state.tags].sort((a, b) => timeOf(b) - timeOf(a) || (a.tag < b.tag ? 1 : a.tag > b.tag ? -1 : 0));
  const kept = new Set<string>();
  const firstMatch = new Map<string, string>();
  for (const rule of rules.keepTags) {
    const glob = compileGlob(rule.match);
    const matched = newestFirst.filter((t) => glob.test(t.tag));
    for (const t of matched.slice(0, rule.newest)) kept.add(t.tag);
    for (const t of matched) if (!firstMatch.has(t.tag)) firstMatch.set(t.tag, `keep_tags match = "${rule.match}", newest = ${rule.newest}`);
  }
  return newestFirst.filter((t) => firstMatch.has(t.tag) && !kept.has(t.tag)).map((t) => ({ tag: t.tag, hex: t.hex, rule: firstMatch.get(t.tag)! }));
}

/** Step 2: the manifests nothing keeps, in a safe order. */
function toDelete(state: RepoState, removed: ReadonlySet<string>, untag: readonly PlannedUntag[], afterSecs: number, now: number): PlannedDeletion[] {
  const byHex = new Map(state.manifests.map((m) => [m.hex, m]));
  const tagged = new Set(state.tags.filter((t) => !removed.has(t.tag)).map((t) => t.hex));
  const referrersOf = new Map<string, string[]>();
  for (const m of state.manifests) if (m.subject !== undefined && byHex.has(m.subject)) push(referrersOf, m.subject, m.hex);
  // A referrer of a recorded subject follows its subject; anything else may stand on its own age.
  const followsSubject = (m: ManifestState) => m.subject !== undefined && byHex.has(m.subject);
  const young = (m: ManifestState) => m.since !== undefined && now - m.since < afterSecs * 1000;

  const kept = new Set<string>();
  const queue: string[] = [];
  const keep = (hex: string) => {
    if (kept.has(hex) || !byHex.has(hex)) return;
    kept.add(hex);
    queue.push(hex);
  };
  // Roots: what is tagged, what has no time yet (first sight: a referrer too), what is young and not bound to a subject.
  for (const m of state.manifests) if (tagged.has(m.hex) || m.since === undefined || (!followsSubject(m) && young(m))) keep(m.hex);
  while (queue.length > 0) {
    const hex = queue.pop()!;
    for (const named of byHex.get(hex)!.names) keep(named);
    for (const referrer of referrersOf.get(hex) ?? []) keep(referrer);
  }

  const rule = `untagged_after = "${formatDuration(afterSecs)}"`;
  const tagsOf = new Map<string, string[]>();
  for (const u of untag) push(tagsOf, u.hex, u.tag);
  const going = state.manifests.filter((m) => !kept.has(m.hex));
  const planned = new Map(
    going.map((m): [string, PlannedDeletion] => [
      m.hex,
      {
        hex: m.hex,
        tags: (tagsOf.get(m.hex) ?? []).sort(),
        ageSecs: Math.max(0, Math.floor((now - (m.since ?? now)) / 1000)),
        rule: followsSubject(m) ? `with its subject sha256:${m.subject}` : rule,
      },
    ]),
  );
  return parentsFirst(going, planned);
}

/**
 * The deletions ordered so that each comes after every deletion that names it (child or
 * subject). Content addressing rules out cycles; the visited set makes sure anyway.
 */
function parentsFirst(going: readonly ManifestState[], planned: ReadonlyMap<string, PlannedDeletion>): PlannedDeletion[] {
  const namedBy = new Map<string, string[]>();
  for (const m of going) {
    for (const named of new Set([...m.names, ...(m.subject !== undefined ? [m.subject] : [])])) {
      if (planned.has(named) && named !== m.hex) push(namedBy, named, m.hex);
    }
  }
  const ordered: PlannedDeletion[] = [];
  const visited = new Set<string>();
  const visit = (hex: string) => {
    if (visited.has(hex)) return;
    visited.add(hex);
    for (const parent of namedBy.get(hex) ?? []) visit(parent);
    ordered.push(planned.get(hex)!);
  };
  for (const m of going) visit(m.hex);
  return ordered;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
