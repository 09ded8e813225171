/**
 * The hosted role's repository state: tag maps, manifest records and referrer lists of one hosted
 * index, kept in the MetaStore with compare-and-swap updates. Manifest bytes are published to the
 * blob store before any document points at them, so a reader never sees a record without bytes.
 * Two NameSets (storage/name-set.ts) spare the request paths a listing: the manifests of each
 * repository (`_digests`, what the status summary counts) and the repositories of the index
 * (`oci/<index>/catalog`, what `/v2/_catalog` serves). Both are added to after the manifest record
 * commits and removed from after it is deleted.
 */
import type { IndexConfig } from '../../../config/types.js';
import { ByteLru } from '../../../storage/byte-lru.js';
import { NameSet } from '../../../storage/name-set.js';
import type { MetaStore, ReadOptions } from '../../../storage/types.js';
import { updateDoc } from '../../../storage/update.js';
import { isManifestMediaType } from '../../model/manifest-check.js';
import { catalogKey, keys, repoPrefix, type Descriptor, type ManifestRecord, type ReferrersDoc, type TagsDoc } from '../../model/meta.js';
import type { Reference } from '../../model/names.js';
import { repositoriesIn } from './repositories.js';
import { seenIn, type IndexHolds } from '../index-holds.js';
import type { FoundManifest, MemberReader } from '../member.js';

/**
 * Bytes of records a process remembers for its next read of their tags. A record carries the
 * manifest's annotations, which a pusher or an upstream chooses (up to the 4 MiB a manifest may
 * have): the budget is in bytes, not entries.
 */
const MAX_REMEMBERED_BYTES = 8 * 1024 * 1024;

/**
 * What a tag named when this process last served it: the digest, the manifest's record, and the
 * tag's time (`taggedAt`), which changes whenever the tag is pointed anew, also at the same digest.
 */
interface LastServed {
  hex: string;
  record: ManifestRecord;
  taggedAt: string | undefined;
}

export class HostedRepos implements MemberReader {
  readonly #catalog: NameSet;
  /** `repo:tag` -> what it named when last served here; only ever a guess (see `resolve`). */
  readonly #lastServed = new ByteLru<LastServed>(MAX_REMEMBERED_BYTES, (last) => JSON.stringify(last.record).length);

  constructor(
    readonly index: IndexConfig,
    private readonly meta: MetaStore,
    /** Whose holds on a manifest's bytes decide whether the repository sees it. */
    private readonly holds: IndexHolds,
  ) {
    this.#catalog = new NameSet(meta, catalogKey(index), async () => (await repositoriesIn(meta, index)).map((r) => r.join('/')));
  }

  async manifest(repo: readonly string[], hex: string, opts?: ReadOptions): Promise<ManifestRecord | null> {
    const found = await this.meta.get<ManifestRecord>(keys.manifest(this.index, repo, hex), opts);
    return found?.doc ?? null;
  }

  async tags(repo: readonly string[], opts?: ReadOptions): Promise<Record<string, string>> {
    const found = await this.meta.get<TagsDoc>(keys.tags(this.index, repo), opts);
    return found?.doc.tags ?? {};
  }

  /**
   * The manifest `ref` names, when its record exists and the repository sees its bytes. For a
   * digest: the record and the hold, read together. For a tag: the tag map, read together with the
   * hold of the digest the tag named when this process last served it; when the tag map still
   * names that digest with the same `taggedAt`, the record served then is the record now, and
   * only those two reads go out. Why that holds: a record is written before any tag points at it
   * and deleted only after every tag pointing at it is gone, and pointing a tag again (also at
   * the same digest, after a delete and a new push) writes a new `taggedAt`. A record changes in
   * place only by fields no read serves (`firstSeenAt`), or from an earlier version's record
   * without a media type, which is never remembered. A tag moved since costs one more round trip.
   * `opts.recent`: a request's read (`ReadOptions`).
   */
  async resolve(repo: readonly string[], ref: Reference, opts?: ReadOptions): Promise<FoundManifest | null> {
    if (ref.kind === 'digest') return this.#heldManifest(repo, ref.hex, opts);
    const key = `${repo.join('/')}:${ref.tag}`;
    const last = this.#lastServed.get(key);
    const [tagsDoc, lastHolders] = await Promise.all([
      this.meta.get<TagsDoc>(keys.tags(this.index, repo), opts),
      last === undefined ? null : this.holds.holders(last.hex, opts),
    ]);
    const tags = tagsDoc?.doc;
    const hex = tags ? tagTarget(tags.tags, ref.tag) : undefined;
    const taggedAt = tags?.taggedAt && tagTarget(tags.taggedAt, ref.tag);
    const unchanged = hex !== undefined && last !== undefined && lastHolders !== null && last.hex === hex && last.taggedAt === taggedAt;
    // Kept (its recency renewed by the read above) only while it still stands for the tag.
    if (!unchanged) this.#lastServed.delete(key);
    if (hex === undefined) return null;
    const found = unchanged ? (seenIn(lastHolders, this.index, repo) ? { hex, record: last.record, index: this.index } : null) : await this.#heldManifest(repo, hex, opts);
    if (!found) return null;
    if (!unchanged && isManifestMediaType(found.record.mediaType)) this.#lastServed.set(key, { hex, record: found.record, taggedAt });
    const until = tags?.confirmedUntil && tagTarget(tags.confirmedUntil, ref.tag);
    const kept = tags?.keptSince && tagTarget(tags.keptSince, ref.tag);
    if (until === undefined && kept === undefined) return found;
    return { ...found, ...(until !== undefined ? { confirmedUntil: until } : {}), ...(kept !== undefined ? { keptSince: kept } : {}) };
  }

  /**
   * The record of `hex`, when the repository also sees its bytes (`seenIn`, read/index-holds.ts: a
   * hosted repository's hold, which a blob or manifest DELETE releases; a cached index's).
   */
  async #heldManifest(repo: readonly string[], hex: string, opts?: ReadOptions): Promise<FoundManifest | null> {
    const [record, holders] = await Promise.all([this.manifest(repo, hex, opts), this.holds.holders(hex, opts)]);
    return record && seenIn(holders, this.index, repo) ? { hex, record, index: this.index } : null;
  }

  /** The repositories that hold at least one manifest: one read of the catalog document. */
  async repositories(): Promise<string[][]> {
    return (await this.#catalog.read()).names.map((name) => name.split('/'));
  }

  async referrers(repo: readonly string[], subjectHex: string): Promise<Descriptor[]> {
    const found = await this.meta.get<ReferrersDoc>(keys.referrers(this.index, repo, subjectHex));
    return Object.values(found?.doc.referrers ?? {});
  }

  /**
   * Records a manifest whose bytes are already in the blob store, then its referrer entry and tag.
   * A manifest already recorded keeps its record, so its media type is the one of its first
   * accepted push (a record without a manifest media type, from an earlier version, is replaced).
   * `confirmedUntil`: a cached index's tag, confirmed by its upstream until then (`TagsDoc`).
   * Returns the record as stored.
   */
  async putManifest(repo: readonly string[], hex: string, pushed: ManifestRecord, tag?: string, confirmedUntil?: number): Promise<ManifestRecord> {
    const { doc } = await updateDoc<ManifestRecord>(this.meta, keys.manifest(this.index, repo, hex), (current) =>
      current && isManifestMediaType(current.mediaType) ? undefined : pushed,
    );
    const record = doc ?? pushed;
    // Once the record is in, the documents that point at it are independent of each other: written
    // at once (each store write is a round trip, and on fs two syncs), not one after another.
    const writes: Promise<unknown>[] = [this.#digests(repo).add(hex), this.#catalog.add(repo.join('/'))];
    if (record.subject) {
      const subject = record.subject;
      writes.push(
        updateDoc<ReferrersDoc>(this.meta, keys.referrers(this.index, repo, subject), (doc) => {
          const next = doc ?? { referrers: {} };
          next.referrers[hex] = record.descriptor;
          return next;
        }),
      );
    }
    if (tag !== undefined) {
      writes.push(
        updateDoc<TagsDoc>(this.meta, keys.tags(this.index, repo), (doc) => {
          const next = doc ?? { tags: {} };
          const moved = tagTarget(next.tags, tag) !== hex;
          const confirming = confirmedUntil !== undefined && confirmedUntil > (tagTarget(next.confirmedUntil ?? {}, tag) ?? 0);
          // A cached index's upstream sent the tag: a copy kept after its delete is its own again.
          const unkept = next.keptSince !== undefined && tagTarget(next.keptSince, tag) !== undefined;
          if (unkept) delete next.keptSince![tag];
          if (!moved && !confirming && !unkept) return undefined;
          if (moved) {
            setTag(next.tags, tag, hex);
            // The tag's own push time (retention's keep_tags orders by it), in the same write.
            setTag((next.taggedAt ??= {}), tag, pushed.pushedAt);
            if (next.confirmedUntil) delete next.confirmedUntil[tag];
          }
          if (confirmedUntil !== undefined) setTag((next.confirmedUntil ??= {}), tag, confirmedUntil);
          return next;
        }),
      );
    }
    await Promise.all(writes);
    return record;
  }

  /**
   * A cached index's upstream confirmed that `tag` still names `hex`, until `until` (ms since the
   * epoch; undefined: the answer holds not at all). Nothing is written when the tag names another
   * manifest by now, or a later confirmation is stored already.
   */
  async confirmTag(repo: readonly string[], tag: string, hex: string, until: number | undefined): Promise<void> {
    await updateDoc<TagsDoc>(this.meta, keys.tags(this.index, repo), (doc) => {
      if (!doc || tagTarget(doc.tags, tag) !== hex) return undefined;
      const stored = doc.confirmedUntil ? tagTarget(doc.confirmedUntil, tag) : undefined;
      // The upstream has the tag again: it is no longer a copy kept after its delete.
      const unkept = doc.keptSince !== undefined && tagTarget(doc.keptSince, tag) !== undefined;
      if (unkept) delete doc.keptSince![tag];
      if (until === undefined) {
        if (stored === undefined) return unkept ? doc : undefined;
        delete doc.confirmedUntil![tag];
        return doc;
      }
      if (stored !== undefined && stored >= until) return unkept ? doc : undefined;
      setTag((doc.confirmedUntil ??= {}), tag, until);
      return doc;
    });
  }

  /**
   * A cached index keeps `tag` (still naming `hex`) after its upstream answered that it has it no
   * more (`upstream_deletions = "keep"`): marked kept since `now` unless it is already, and
   * trusted until `until`. `marked`: this call set the mark; `since`: the mark as stored; null
   * when the tag names another manifest by now (nothing written).
   */
  async keepTag(repo: readonly string[], tag: string, hex: string, until: number, now: number): Promise<{ marked: boolean; since: number } | null> {
    let kept: { marked: boolean; since: number } | null = null;
    await updateDoc<TagsDoc>(this.meta, keys.tags(this.index, repo), (doc) => {
      kept = null;
      if (!doc || tagTarget(doc.tags, tag) !== hex) return undefined;
      const since = doc.keptSince ? tagTarget(doc.keptSince, tag) : undefined;
      kept = { marked: since === undefined, since: since ?? now };
      setTag((doc.keptSince ??= {}), tag, kept.since);
      setTag((doc.confirmedUntil ??= {}), tag, until);
      return doc;
    });
    return kept;
  }

  /**
   * Drops one tag mapping and returns the hex it named; undefined when the tag did not exist, or
   * (with `onlyIf`) named another manifest by then: a retention run untags only what it planned.
   */
  async deleteTag(repo: readonly string[], tag: string, onlyIf?: string): Promise<string | undefined> {
    let named: string | undefined;
    await updateDoc<TagsDoc>(this.meta, keys.tags(this.index, repo), (doc) => {
      named = doc ? tagTarget(doc.tags, tag) : undefined;
      if (!doc || named === undefined || (onlyIf !== undefined && named !== onlyIf)) {
        named = undefined;
        return undefined;
      }
      delete doc.tags[tag];
      if (doc.taggedAt) delete doc.taggedAt[tag];
      if (doc.confirmedUntil) delete doc.confirmedUntil[tag];
      if (doc.keptSince) delete doc.keptSince[tag];
      return doc;
    });
    return named;
  }

  /**
   * Removes a manifest from the repository: the tags pointing at it, its referrer entry, then the
   * record. Its bytes and the holds on them are the caller's (handlers/manifests.ts). False when
   * the repository has no such manifest.
   */
  async deleteManifest(repo: readonly string[], hex: string): Promise<boolean> {
    const record = await this.manifest(repo, hex);
    if (!record) return false;
    await updateDoc<TagsDoc>(this.meta, keys.tags(this.index, repo), (doc) => {
      if (!doc) return undefined;
      const stale = Object.keys(doc.tags).filter((t) => doc.tags[t] === hex);
      if (stale.length === 0) return undefined;
      for (const t of stale) {
        delete doc.tags[t];
        if (doc.taggedAt) delete doc.taggedAt[t];
        if (doc.confirmedUntil) delete doc.confirmedUntil[t];
        if (doc.keptSince) delete doc.keptSince[t];
      }
      return doc;
    });
    if (record.subject) {
      await updateDoc<ReferrersDoc>(this.meta, keys.referrers(this.index, repo, record.subject), (doc) => {
        if (!doc || !(hex in doc.referrers)) return undefined;
        delete doc.referrers[hex];
        return doc;
      });
    }
    const deleted = await this.meta.delete(keys.manifest(this.index, repo, hex));
    await this.#digests(repo).remove(hex, async () => (await this.manifest(repo, hex)) !== null);
    await this.#catalog.remove(repo.join('/'), async () => (await this.manifestCount(repo)) > 0);
    return deleted;
  }

  /** The tag map of `repo` with the tags' push times: one read. */
  async tagsDoc(repo: readonly string[]): Promise<TagsDoc> {
    const found = await this.meta.get<TagsDoc>(keys.tags(this.index, repo));
    return found?.doc ?? { tags: {} };
  }

  /**
   * Records `at` as the time retention first saw the manifest, on a record that has neither a
   * push time nor such a time yet (an earlier version's); nothing else changes.
   */
  async markFirstSeen(repo: readonly string[], hex: string, at: Date): Promise<void> {
    await updateDoc<ManifestRecord>(this.meta, keys.manifest(this.index, repo, hex), (current) => {
      if (!current || current.pushedAt || current.firstSeenAt) return undefined;
      return { ...current, firstSeenAt: at.toISOString() };
    });
  }

  /** How many manifests `repo` records: one read of its digest set. */
  async manifestCount(repo: readonly string[], opts?: ReadOptions): Promise<number> {
    return (await this.manifestDigests(repo, opts)).length;
  }

  /** The hex of every manifest `repo` records: one read of its digest set. */
  async manifestDigests(repo: readonly string[], opts?: ReadOptions): Promise<string[]> {
    return (await this.#digests(repo).read(opts)).names;
  }

  #digests(repo: readonly string[]): NameSet {
    const folder = `${repoPrefix(this.index, repo)}/_manifests`;
    return new NameSet(this.meta, keys.digests(this.index, repo), async () => {
      // Built once for a repository stored before the set existed.
      const hexes: string[] = [];
      for await (const key of this.meta.list(folder)) hexes.push(key.slice(folder.length + 1));
      return hexes;
    });
  }
}

/*
 * Tags are keys of a plain JSON object, and the tag grammar allows `constructor`, `toString` or
 * `__proto__`: read only own properties and define (never assign) them, so no tag can reach or
 * replace the object's prototype.
 */
function tagTarget<V>(tags: Record<string, V>, tag: string): V | undefined {
  return Object.hasOwn(tags, tag) ? tags[tag] : undefined;
}

function setTag<V>(tags: Record<string, V>, tag: string, value: V): void {
  Object.defineProperty(tags, tag, { value, enumerable: true, writable: true, configurable: true });
}
