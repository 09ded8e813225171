/**
 * The cached (pull-through) role of an OCI index: manifests and tags read through its upstream
 * registry and kept in the same documents a hosted index keeps (`HostedRepos`: tag map, manifest
 * records, referrers, catalog), the bytes in the shared blob store held by this index.
 *
 * Freshness (docs/oci.md):
 * - a manifest by digest never changes: once stored it is served with no upstream contact; the
 *   first pull of one runs once per server (under the workers' shared lock);
 * - a tag is the cached role's one decision (roles/revalidator.ts): confirmed by the upstream at
 *   most every `cache_ttl_secs`, the confirmation stored with the mapping so that every worker and
 *   replica relies on it (confirmations.ts); past that, one HEAD (shared by every concurrent
 *   request for the tag, and by the server's workers) compares
 *   `Docker-Content-Digest` with the stored mapping (`refreshes`), and only a different digest
 *   fetches the manifest again (`changed`); a cold tag is fetched with one GET;
 * - with several upstreams, every exchange asks them in order (upstream.ts): the tag's HEAD (and
 *   the GET that follows it) of the first that answers, a 404 passing on where the upstream says
 *   `failover_on_404`; a manifest by digest from any of them (the digest pins it);
 * - a tag the upstreams answer 404 for is dropped (`upstream_deletions = "follow"`), or kept:
 *   the stored mapping served on, marked kept in the tag map (`TagsDoc.keptSince`, set once:
 *   `onKept` hears of it once), and asked again after `cache_ttl_secs`; a HEAD that names the
 *   stored digest again, or a manifest fetched for the tag, clears the mark. Manifests by digest
 *   and blobs are never asked again once stored, so a kept tag pulls whole;
 * - when the upstreams are down, answer 5xx or 429, the stored mapping is served (`stale_served`),
 *   and with nothing stored the answer is 502 UNKNOWN (`upstream_errors`). After a failure an
 *   upstream is left alone for a short backoff, after a 429 for its Retry-After
 *   (roles/upstream-health.ts).
 *
 * What the upstream sent is verified and stored outside the catch of its failures: a store that
 * does not answer is the store's 503, never the upstream's 502.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { CachedIndex } from '../../../config/types.js';
import type { UpstreamSlots } from '../../../limits/upstream-slots.js';
import type { IndexCounters } from '../../../observe/counters.js';
import type { SharedFetches } from '../../../roles/flight-peers.js';
import { PromiseFlights } from '../../../roles/promise-flights.js';
import { Revalidator, type CachedCopy, type Kept, type Retained } from '../../../roles/revalidator.js';
import { discard, header, readBounded, type UpstreamResponse } from '../../../roles/upstream.js';
import { UpstreamError } from '../../../roles/upstream-error.js';
import type { Holder } from '../../../storage/holds.js';
import type { KeyLocks } from '../../../storage/key-locks.js';
import type { BlobStore, MetaStore, ReadOptions } from '../../../storage/types.js';
import { OciError } from '../../model/errors.js';
import { checkManifest, isObject, MAX_MANIFEST_BYTES, OCI_INDEX } from '../../model/manifest-check.js';
import { manifestRecord } from '../../model/manifest-record.js';
import type { Descriptor } from '../../model/meta.js';
import type { Reference } from '../../model/names.js';
import { CachedBlobs } from './blobs.js';
import { confirmedUntil } from './confirmations.js';
import { MANIFEST_ACCEPT, type UpstreamRegistry } from './upstream-registry.js';
import { fetchUpstreamTags, type UpstreamTags } from './upstream-tags.js';
import { CachedUpstream } from './upstream.js';
import { HostedRepos } from '../hosted/repos.js';
import type { IndexHolds } from '../index-holds.js';
import type { FoundManifest, MemberReader } from '../member.js';

/** A manifest as the upstream sent it, read whole (at most MAX_MANIFEST_BYTES), not yet verified. */
interface UpstreamManifest {
  body: Buffer;
  headers: IncomingHttpHeaders;
}

/** What the upstream said about a stored tag: the same digest, gone, or a manifest to keep. */
type TagAnswer = { kind: 'same'; headers: IncomingHttpHeaders } | { kind: 'gone' } | ({ kind: 'manifest' } & UpstreamManifest);

/** What a cached index reads and writes through: the shared services it uses, by name. */
export interface CachedServices {
  meta: MetaStore;
  /** The shared blob store: manifests and blobs pulled through are stored there. */
  blobs: BlobStore;
  /** Who holds which blob: the index's own hold, and what its stored documents see. */
  holds: IndexHolds;
  /** The index's own counters. */
  counters: IndexCounters;
  /** The index's cap on concurrent upstream fetches (`upstream_concurrency`). */
  slots: UpstreamSlots;
  /** With several worker processes: how they share upstream fetches. */
  fetches?: SharedFetches;
  /** Told (not awaited) when what the index holds of a repository changed: a manifest stored, a tag dropped. */
  onChanged?: (repo: string) => void;
  /**
   * Told (not awaited) when a tag gone upstream is kept (`upstream_deletions = "keep"`: since
   * when, once per mark) naming the manifest `hex`, and when the mark goes (null).
   */
  onKept?: (repo: string, tag: string, hex: string, since: number | null) => void;
}

export class CachedRepos implements MemberReader {
  /** The documents this index keeps, as a hosted index keeps them. */
  readonly #stored: HostedRepos;
  /** The upstream registry, its health, and the one catch of its failures. */
  readonly upstream: CachedUpstream;
  /** Blobs pulled through this index. */
  readonly blobs: CachedBlobs;
  readonly #store: BlobStore;
  readonly #holder: Holder;
  readonly #counters: IndexCounters;
  readonly #locks: KeyLocks | undefined;
  readonly #onChanged: ((repo: string) => void) | undefined;
  readonly #onKept: CachedServices['onKept'];
  /** Tags: stored, confirmed, revalidated or served stale (roles/revalidator.ts). */
  readonly #tags: Revalidator<FoundManifest>;
  /** First pulls of manifests by digest, one per digest at a time. */
  readonly #flights = new PromiseFlights<FoundManifest | null>();

  constructor(
    readonly index: CachedIndex,
    services: CachedServices,
  ) {
    const { meta, blobs, holds, counters, slots, fetches } = services;
    this.#stored = new HostedRepos(index, meta, holds);
    this.#store = blobs;
    this.#holder = holds.of(index.name);
    this.#counters = counters;
    this.#locks = fetches?.locks;
    this.#onChanged = services.onChanged;
    this.#onKept = services.onKept;
    this.upstream = new CachedUpstream(index, slots, counters);
    this.blobs = new CachedBlobs(this.upstream, blobs, this.#holder, counters, fetches && { flights: fetches.flights, scope: `oci:${index.name}` });
    this.#tags = new Revalidator<FoundManifest>({
      counters,
      health: this.upstream.list,
      ...(this.#locks ? { locks: this.#locks } : {}),
      nothingCached: (why) => this.upstream.nothingCached(why),
      deletions: index.upstreamDeletions,
    });
  }

  /** `opts` apply to the first read of the stored copy; a pull's own reads ask the store. */
  async resolve(repo: readonly string[], ref: Reference, opts?: ReadOptions): Promise<FoundManifest | null> {
    const name = repo.join('/');
    if (ref.kind === 'digest') {
      const lookedAt = Date.now();
      const held = await this.#stored.resolve(repo, ref, opts);
      if (held) return held;
      return this.#flights.run(`${name}@${ref.hex}`, () => this.#firstPull(repo, ref, lookedAt));
    }
    const lookedAt = Date.now();
    const mapped = await this.#stored.resolve(repo, ref, opts);
    const read = await this.#tags.read(`oci:${this.index.name}:${name}:${ref.tag}`, this.#tagCopy(repo, ref.tag, mapped), {
      stored: Promise.resolve(mapped),
      storedAt: lookedAt,
      project: name,
    });
    return read?.doc ?? null;
  }

  /**
   * For a virtual index's tag list: the upstream's tags (its first page) with the stored ones;
   * while the upstream fails, the stored ones. (A lone cached index passes the upstream's list
   * through instead: `upstreamTags`.) The digests are the stored mappings' where known.
   */
  async tags(repo: readonly string[]): Promise<Record<string, string>> {
    const stored = await this.#stored.tags(repo);
    const upstream = await this.#upstreamPart(async () => (await fetchUpstreamTags(this.upstream, repo, new URLSearchParams())).tags);
    const out: Record<string, string> = {};
    for (const tag of upstream) defineTag(out, tag, '');
    for (const [tag, hex] of Object.entries(stored)) defineTag(out, tag, hex);
    return out;
  }

  /**
   * A lone cached index's tag list: one page of the upstream's, as it answered (`query`, the
   * client's `n` and `last`, forwarded); 502 UNKNOWN when it fails.
   */
  upstreamTags(repo: readonly string[], query: URLSearchParams): Promise<UpstreamTags> {
    return this.upstream.orUnavailable(() => fetchUpstreamTags(this.upstream, repo, query), repo);
  }

  /**
   * The upstream's referrers of `subjectHex` (its referrers API, or else the referrers tag schema's
   * `sha256-<hex>` index, pulled through like any tag) with those this index stored; while the
   * upstream fails, the stored ones alone.
   */
  async referrers(repo: readonly string[], subjectHex: string): Promise<Descriptor[]> {
    const stored = await this.#stored.referrers(repo, subjectHex);
    const upstream = await this.#upstreamPart(() => this.#upstreamReferrers(repo, subjectHex));
    const byDigest = new Map<string, Descriptor>();
    for (const d of [...upstream, ...stored]) if (!byDigest.has(d.digest)) byDigest.set(d.digest, d);
    return [...byDigest.values()];
  }

  async #upstreamReferrers(repo: readonly string[], subjectHex: string): Promise<Descriptor[]> {
    const listed = await this.upstream.ask(
      repo,
      async (registry) => {
        const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `referrers/sha256:${subjectHex}`, headers: { accept: OCI_INDEX } });
        if (res.status === 200 && header(res.headers, 'content-type')?.startsWith(OCI_INDEX)) return descriptorsIn(await readCapped(res));
        discard(res);
        if (res.status !== 404) throw new UpstreamError('status', null, `answered ${res.status} to the referrers API`, { status: res.status });
        return null;
      },
      // The subject's digest pins what its referrers are about.
      { absent: (d) => d === null, pinned: true },
    );
    if (listed !== null) return listed;
    // No referrers API: the tag schema's index, if the upstream has one.
    const found = await this.resolve(repo, { kind: 'tag', tag: `sha256-${subjectHex}` });
    if (!found) return [];
    const bytes = await this.#store.get(found.hex);
    return bytes ? descriptorsIn(await buffer(bytes)) : [];
  }

  repositories(): Promise<string[][]> {
    return this.#stored.repositories();
  }

  /**
   * What the upstream adds to a stored list: nothing while it fails (marked down), nor when it
   * answers that it has nothing to add (an `OciError` such as NAME_UNKNOWN).
   */
  #upstreamPart<T>(list: () => Promise<T[]>): Promise<T[]> {
    const answered = async (): Promise<T[]> => {
      try {
        return await list();
      } catch (err) {
        if (err instanceof OciError) return [];
        throw err;
      }
    };
    return this.upstream.orElse(answered, () => []);
  }

  /**
   * A manifest by digest this index does not hold: fetched (a failure answered 502 UNKNOWN, with
   * nothing stored to fall back on), then verified and stored. With several worker processes it
   * runs under a lock they share, after reading the store again when another pull of it ended
   * since the request looked (`lookedAt`): a manifest another worker just pulled is not fetched twice.
   */
  #firstPull(repo: readonly string[], ref: Reference & { kind: 'digest' }, lookedAt: number): Promise<FoundManifest | null> {
    const pull = async () => {
      const answer = await this.upstream.orUnavailable(
        () => this.upstream.ask(repo, (registry) => fetchManifest(registry, repo, `sha256:${ref.hex}`), { absent: (m) => m === null, pinned: true }),
        repo,
      );
      return answer && this.#keepManifest(repo, `sha256:${ref.hex}`, answer, { digest: ref.hex });
    };
    const locks = this.#locks;
    if (!locks) return pull();
    return locks.run(
      `oci-pull:${this.index.name}:${repo.join('/')}:sha256:${ref.hex}`,
      async (grant) => (grant.releasedSince ? await this.#stored.resolve(repo, ref) : null) ?? pull(),
      lookedAt,
    );
  }

  /**
   * A tag as the revalidator sees it: the stored mapping with the upstream's last confirmation of
   * it (`confirmedUntil`). A mapping that appeared after this request looked (`seen` null) was
   * stored by a pull that just happened, here or in another worker: as good as a confirmation.
   */
  #tagCopy(repo: readonly string[], tag: string, seen: FoundManifest | null): CachedCopy<FoundManifest, TagAnswer> {
    return {
      stored: () => this.#stored.resolve(repo, { kind: 'tag', tag }),
      isFresh: (found, now) => seen === null || now < (found.confirmedUntil ?? 0),
      ask: (current) => this.#askTag(repo, tag, current),
      keep: (answer, current) => this.#keepTag(repo, tag, answer, current),
      gone: (answer) => answer.kind === 'gone',
      retain: (current) => this.#retainTag(repo, tag, current),
    };
  }

  /** The stored mapping of a tag gone upstream, kept: marked once, trusted for another `cache_ttl_secs`. */
  async #retainTag(repo: readonly string[], tag: string, current: FoundManifest): Promise<Retained<FoundManifest>> {
    const now = Date.now();
    const until = now + this.index.cacheTtlSecs * 1000;
    const kept = await this.#stored.keepTag(repo, tag, current.hex, until, now);
    // The tag names another manifest by now (a pull elsewhere moved it): served as this request found it.
    if (!kept) return { doc: current, marked: false };
    if (kept.marked) this.#onKept?.(repo.join('/'), tag, current.hex, kept.since);
    return { doc: { ...current, confirmedUntil: until, keptSince: kept.since }, marked: kept.marked };
  }

  /** A tag that was kept after the upstream's delete is the upstream's again (or dropped). */
  #unmarked(repo: readonly string[], tag: string, previous: FoundManifest | null): void {
    if (previous?.keptSince !== undefined) this.#onKept?.(repo.join('/'), tag, previous.hex, null);
  }

  /** The tag asked of the upstreams in order (a 404 passes on where `failover_on_404` says). */
  #askTag(repo: readonly string[], tag: string, current: FoundManifest | null): Promise<TagAnswer> {
    return this.upstream.ask(repo, (registry) => askTagOf(registry, repo, tag, current), { absent: (a) => a.kind === 'gone' });
  }

  async #keepTag(repo: readonly string[], tag: string, answer: TagAnswer, current: FoundManifest | null): Promise<Kept<FoundManifest> | null> {
    switch (answer.kind) {
      case 'same': {
        // `ask` answers `same` only with a stored mapping.
        const { keptSince: _kept, ...found } = current!;
        const until = confirmedUntil(this.index.cacheTtlSecs, answer.headers, Date.now());
        await this.#stored.confirmTag(repo, tag, found.hex, until);
        this.#unmarked(repo, tag, current);
        return { doc: { ...found, ...(until !== undefined ? { confirmedUntil: until } : {}) }, same: true };
      }
      case 'gone':
        if ((await this.#stored.deleteTag(repo, tag)) !== undefined) this.#onChanged?.(repo.join('/'));
        this.#unmarked(repo, tag, current);
        return null;
      case 'manifest': {
        const found = await this.#keepManifest(repo, tag, answer, { tag, confirmedUntil: confirmedUntil(this.index.cacheTtlSecs, answer.headers, Date.now()) });
        this.#unmarked(repo, tag, current);
        return { doc: found, same: found.hex === current?.hex };
      }
    }
  }

  /**
   * A manifest the upstream sent, verified (against the requested digest, or the upstream's
   * `Docker-Content-Digest`) and stored byte for byte with its media type, the tag pointed at it.
   * Content refused is MANIFEST_INVALID (counted `rejected`); nothing of it is stored.
   */
  async #keepManifest(
    repo: readonly string[],
    reference: string,
    sent: UpstreamManifest,
    want: { digest?: string; tag?: string; confirmedUntil?: number | undefined },
  ): Promise<FoundManifest> {
    const name = repo.join('/');
    const { body, headers } = sent;
    const hex = createHash('sha256').update(body).digest('hex');
    const announced = header(headers, 'docker-content-digest');
    const expected = want.digest ?? (announced?.startsWith('sha256:') ? announced.slice('sha256:'.length) : undefined);
    if (expected !== undefined && expected !== hex) {
      this.#counters.add('rejected', 1, name);
      throw new OciError('MANIFEST_INVALID', `the upstream's manifest for "${reference}" has digest sha256:${hex}, not sha256:${expected}; it was not stored`);
    }
    let checked;
    try {
      checked = checkManifest(body, header(headers, 'content-type'));
    } catch (err) {
      this.#counters.add('rejected', 1, name);
      throw new OciError('MANIFEST_INVALID', `the upstream's manifest for "${reference}" cannot be served: ${err instanceof Error ? err.message : String(err)}`);
    }
    const record = manifestRecord(checked, hex, body.length);
    // The hold, then the bytes, then the documents that point at them. A manifest this index did
    // not hold is most likely new to the store too: its holds document is written without a read
    // first (one that exists after all is read and updated as usual).
    await this.#holder.hold(hex, body.length, { fresh: true });
    await this.#store.put(Readable.from([body]), hex);
    const stored = await this.#stored.putManifest(repo, hex, record, want.tag, want.confirmedUntil);
    this.#onChanged?.(repo.join('/'));
    return { hex, record: stored, index: this.index, ...(want.confirmedUntil !== undefined ? { confirmedUntil: want.confirmedUntil } : {}) };
  }
}

/**
 * One upstream's answer about a tag. With a mapping stored, one HEAD: the same digest is the
 * answer; another, none named or gone asks that upstream for the manifest itself. With none
 * stored, the manifest's GET.
 */
async function askTagOf(registry: UpstreamRegistry, repo: readonly string[], tag: string, current: FoundManifest | null): Promise<TagAnswer> {
  if (current) {
    const res = await registry.fetch({ method: 'HEAD', repository: registry.upstreamName(repo), path: `manifests/${tag}`, headers: { accept: MANIFEST_ACCEPT } });
    discard(res);
    if (res.status === 200 && header(res.headers, 'docker-content-digest') === `sha256:${current.hex}`) return { kind: 'same', headers: res.headers };
    if (res.status !== 200 && res.status !== 404) throw new UpstreamError('status', null, `answered ${res.status} to a HEAD of the tag`, { status: res.status });
  }
  const manifest = await fetchManifest(registry, repo, tag);
  return manifest ? { kind: 'manifest', ...manifest } : { kind: 'gone' };
}

/**
 * GET of one manifest from one upstream, read whole and capped; null when it does not know it.
 * Throws an `UpstreamError` when it gave no usable answer.
 */
async function fetchManifest(registry: UpstreamRegistry, repo: readonly string[], reference: string): Promise<UpstreamManifest | null> {
  const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `manifests/${reference}`, headers: { accept: MANIFEST_ACCEPT } });
  if (res.status === 404) {
    discard(res);
    return null;
  }
  if (res.status !== 200) {
    discard(res);
    throw new UpstreamError('status', null, `answered ${res.status} to the manifest GET`, { status: res.status });
  }
  return { body: await readCapped(res), headers: res.headers };
}

/** A manifest (or a referrers index) from the upstream, at most MAX_MANIFEST_BYTES. */
async function readCapped(res: UpstreamResponse): Promise<Buffer> {
  try {
    return await readBounded(res, MAX_MANIFEST_BYTES);
  } catch (err) {
    if (err instanceof UpstreamError && err.kind === 'too_large') throw new UpstreamError('too_large', null, `sent a manifest over the ${MAX_MANIFEST_BYTES}-byte (4 MiB) limit`);
    throw err;
  }
}

/** The well-formed descriptors of an image index's `manifests` (upstream bytes: anything else is skipped). */
function descriptorsIn(body: Buffer): Descriptor[] {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw new UpstreamError('malformed', null, 'sent a referrers index that is not JSON');
  }
  if (!isObject(doc) || !Array.isArray(doc.manifests)) return [];
  const out: Descriptor[] = [];
  for (const m of doc.manifests as unknown[]) {
    if (!isObject(m) || typeof m.mediaType !== 'string' || typeof m.digest !== 'string' || !/^sha256:[a-f0-9]{64}$/.test(m.digest)) continue;
    if (typeof m.size !== 'number' || !Number.isSafeInteger(m.size) || m.size < 0) continue;
    const d: Descriptor = { mediaType: m.mediaType, digest: m.digest, size: m.size };
    if (typeof m.artifactType === 'string') d.artifactType = m.artifactType;
    if (isObject(m.annotations)) {
      const annotations = Object.fromEntries(Object.entries(m.annotations).filter((e): e is [string, string] => typeof e[1] === 'string'));
      if (Object.keys(annotations).length > 0) d.annotations = annotations;
    }
    out.push(d);
  }
  return out;
}

function defineTag(tags: Record<string, string>, tag: string, hex: string): void {
  Object.defineProperty(tags, tag, { value: hex, enumerable: true, writable: true, configurable: true });
}
