/**
 * Reads through an index's members, hosted first: a hosted member shadows a same-named image of
 * an upstream member. The cached (pull-through) role (cached/repos.ts) is consulted after the
 * hosted ones. Every member is read through the same contract (member.ts).
 */
import type { CachedIndex, IndexConfig } from '../../../config/types.js';
import type { UpstreamSlotsByIndex } from '../../../limits/upstream-slots.js';
import type { UsageCounters } from '../../../observe/counters.js';
import type { SharedFetches } from '../../../roles/flight-peers.js';
import { isUpstream, privateFirst } from '../../../roles/shadowing.js';
import { membersOf } from '../../../roles/write-target.js';
import type { BlobStore, MetaStore, ReadOptions } from '../../../storage/types.js';
import { UpstreamError } from '../../../roles/upstream-error.js';
import type { Descriptor } from '../../model/meta.js';
import type { Reference } from '../../model/names.js';
import { CachedRepos } from '../cached/repos.js';
import { HostedRepos } from '../hosted/repos.js';
import type { IndexHolds } from '../index-holds.js';
import type { FoundManifest, MemberReader } from '../member.js';

/** What the members of every index are read through: the shared services, by name. */
export interface MemberServices {
  meta: MetaStore;
  blobs: BlobStore;
  holds: IndexHolds;
  indexByName: ReadonlyMap<string, IndexConfig>;
  /** The usage counters, per index route. */
  counters: UsageCounters;
  /** Every cached index's upstream fetch cap. */
  upstreamSlots: UpstreamSlotsByIndex;
  /** With several worker processes: how they share upstream fetches. */
  fetches?: SharedFetches;
  /** Told (not awaited) when what a cached index holds of a repository changed. */
  onCachedChange?: (index: IndexConfig, repo: string) => void;
  /** Told (not awaited) when a cached index keeps a tag its upstream deleted (since when), or no longer (null). */
  onCachedKept?: (index: IndexConfig, repo: string, tag: string, hex: string, since: number | null) => void;
}

export class Members {
  readonly #hosted = new Map<string, HostedRepos>();
  readonly #cached = new Map<string, CachedRepos>();

  constructor(private readonly services: MemberServices) {}

  /** The hosted state of a hosted index (the target of a write). */
  hosted(index: IndexConfig): HostedRepos {
    let repos = this.#hosted.get(index.name);
    if (!repos) {
      repos = new HostedRepos(index, this.services.meta, this.services.holds);
      this.#hosted.set(index.name, repos);
    }
    return repos;
  }

  /** The pull-through state of a cached index. */
  cached(index: CachedIndex): CachedRepos {
    let repos = this.#cached.get(index.name);
    if (!repos) {
      const { meta, blobs, holds, counters, upstreamSlots, fetches, onCachedChange, onCachedKept } = this.services;
      repos = new CachedRepos(index, {
        meta, blobs, holds, counters: counters.index(index.route), slots: upstreamSlots.for(index),
        ...(fetches ? { fetches } : {}),
        ...(onCachedChange ? { onChanged: (repo: string) => onCachedChange(index, repo) } : {}),
        ...(onCachedKept ? { onKept: (repo: string, tag: string, hex: string, since: number | null) => onCachedKept(index, repo, tag, hex, since) } : {}),
      });
      this.#cached.set(index.name, repos);
    }
    return repos;
  }

  /** The cached members a miss of `repo` under `index` may be pulled through, in lookup order (after shadowing). */
  async pullThrough(index: IndexConfig, repo: readonly string[]): Promise<CachedRepos[]> {
    return (await this.readersFor(index, repo)).filter((r): r is CachedRepos => r instanceof CachedRepos);
  }

  /** Closes the upstream connections of every cached index. */
  close(): void {
    for (const repos of this.#cached.values()) repos.upstream.close();
  }

  /** The readers of an index's members in lookup order (`roles/shadowing.ts`): private members first. */
  readers(index: IndexConfig): MemberReader[] {
    const members = membersOf(index, this.services.indexByName).filter((m) => m.ecosystem === 'oci');
    const ordered = privateFirst(members, (m) => m);
    const readers: MemberReader[] = [];
    for (const member of ordered) {
      if (member.role === 'hosted') readers.push(this.hosted(member));
      else if (member.role === 'cached') readers.push(this.cached(member));
    }
    return readers;
  }

  /**
   * The readers that may answer for `repo`: when a hosted member holds the repository, it shadows
   * the same-named repository of every cached member entirely (tags, digests, referrers, blobs),
   * so a private name is never looked up upstream (dependency confusion). Otherwise all of them.
   */
  async readersFor(index: IndexConfig, repo: readonly string[], opts?: ReadOptions): Promise<MemberReader[]> {
    const readers = this.readers(index);
    if (!readers.some((r) => isUpstream(r.index))) return readers;
    const hosted = readers.filter((r): r is HostedRepos => r instanceof HostedRepos);
    const held = await Promise.all(hosted.map(async (h) => (await h.manifestCount(repo, opts)) > 0));
    return held.some(Boolean) ? readers.filter((r) => !isUpstream(r.index)) : readers;
  }

  /**
   * The first member that has the reference. A cached member whose upstream failed with nothing
   * stored (502) does not stop the lookup: a later member may have it; the failure is the answer
   * only when none does.
   */
  async resolve(index: IndexConfig, repo: readonly string[], ref: Reference, opts?: ReadOptions): Promise<FoundManifest | null> {
    // Hosted members are asked whatever shadowing decides (it only ever drops upstream ones), and
    // before any cached member: their store reads go out together with the shadowing check's.
    const early = new Map<MemberReader, Promise<FoundManifest | null>>();
    for (const reader of this.readers(index)) {
      if (!(reader instanceof HostedRepos)) continue;
      const lookup = reader.resolve(repo, ref, opts);
      // Awaited below in lookup order; a failure of one not reached is not left unhandled.
      lookup.catch(() => undefined);
      early.set(reader, lookup);
    }
    let failure: UpstreamError | undefined;
    for (const reader of await this.readersFor(index, repo, opts)) {
      try {
        const found = await (early.get(reader) ?? reader.resolve(repo, ref, opts));
        if (found) return found;
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        failure ??= err;
      }
    }
    if (failure) throw failure;
    return null;
  }

  /** Union of the members' tags; the first (hosted-first) member's mapping wins. */
  async tags(index: IndexConfig, repo: readonly string[]): Promise<string[]> {
    const seen = new Set<string>();
    for (const reader of await this.readersFor(index, repo)) {
      for (const tag of Object.keys(await reader.tags(repo))) seen.add(tag);
    }
    return [...seen];
  }

  async referrers(index: IndexConfig, repo: readonly string[], subjectHex: string): Promise<Descriptor[]> {
    const byDigest = new Map<string, Descriptor>();
    for (const reader of await this.readersFor(index, repo)) {
      for (const d of await reader.referrers(repo, subjectHex)) if (!byDigest.has(d.digest)) byDigest.set(d.digest, d);
    }
    return [...byDigest.values()];
  }

  /** Union of the members' repositories, as paths under `index`'s route. */
  async repositories(index: IndexConfig): Promise<string[][]> {
    const byPath = new Map<string, string[]>();
    for (const reader of this.readers(index)) {
      for (const repo of await reader.repositories()) byPath.set(repo.join('/'), repo);
    }
    return [...byPath.values()];
  }
}
