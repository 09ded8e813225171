/**
 * The cached (pull-through) role of an OCI index: manifests and tags read through its upstream
 * registry and kept in the same documents a hosted index keeps (`HostedRepos`: tag map, manifest
 * records, referrers, catalog), the bytes in the shared blob store held by this index.
 *
 * Freshness (docs/oci.md):
 * - a manifest by digest never changes: once stored it is served with no upstream contact;
 * - a tag is confirmed by the upstream at most every `cache_ttl_secs` (shortened by the upstream's
 *   own Cache-Control, roles/freshness.ts); past that, one HEAD (shared by every concurrent
 *   request for the tag) compares `Docker-Content-Digest` with the stored mapping (`refreshes`),
 *   and only a different digest fetches the manifest again (`changed`);
 * - a cold tag is fetched with one GET;
 * - when the upstream is down, answers 5xx or 429, the stored mapping is served (`stale_served`),
 *   and with nothing stored the answer is 502 UNKNOWN (`upstream_errors`). After a failure the
 *   upstream is left alone for a short backoff (roles/upstream-health.ts). A failed exchange
 *   with the upstream is caught in one place, `CachedUpstream.orElse` (upstream.ts); each caller
 *   says only what is answered instead.
 *
 * Confirmation times live in process memory: another replica, or this one after a restart,
 * revalidates a tag once on its first read.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { CachedIndex } from '../../../config/types.js';
import type { UpstreamSlots } from '../../../limits/upstream-slots.js';
import type { IndexCounters } from '../../../observe/counters.js';
import type { SharedFetches } from '../../../roles/flight-peers.js';
import { ttlSecs } from '../../../roles/freshness.js';
import { PromiseFlights } from '../../../roles/promise-flights.js';
import { discard, DocumentTooLargeError, header, readBounded, type UpstreamResponse } from '../../../roles/upstream.js';
import type { Holder } from '../../../storage/holds.js';
import type { KeyLocks } from '../../../storage/key-locks.js';
import type { BlobStore, MetaStore } from '../../../storage/types.js';
import { OciError } from '../../model/errors.js';
import { checkManifest, isObject, MAX_MANIFEST_BYTES, OCI_INDEX } from '../../model/manifest-check.js';
import { manifestRecord } from '../../model/manifest-record.js';
import type { Descriptor } from '../../model/meta.js';
import type { Reference } from '../../model/names.js';
import { CachedBlobs } from './blobs.js';
import { UpstreamFailure } from './upstream-failure.js';
import { MANIFEST_ACCEPT, UpstreamRegistry } from './upstream-registry.js';
import { fetchUpstreamTags, type UpstreamTags } from './upstream-tags.js';
import { CachedUpstream } from './upstream.js';
import { HostedRepos } from '../hosted/repos.js';
import type { IndexHolds } from '../index-holds.js';
import type { FoundManifest, MemberReader } from '../member.js';

/** Tag confirmations kept before the expired ones are swept. */
const MAX_CONFIRMATIONS = 10_000;

interface Resolved {
  found: FoundManifest | null;
  /** Served from the stored mapping because the upstream failed. */
  stale: boolean;
}

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
  /** `repo:tag` -> until when the upstream's confirmation holds (ms since the epoch). */
  readonly #freshUntil = new Map<string, number>();
  readonly #flights = new PromiseFlights<Resolved>();

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
    this.upstream = new CachedUpstream(new UpstreamRegistry(index, slots), counters);
    this.blobs = new CachedBlobs(this.upstream, blobs, this.#holder, counters, fetches && { flights: fetches.flights, scope: `oci:${index.name}` });
  }

  async resolve(repo: readonly string[], ref: Reference): Promise<FoundManifest | null> {
    const name = repo.join('/');
    if (ref.kind === 'digest') {
      const held = await this.#stored.resolve(repo, ref);
      if (held) return held;
      const r = await this.#flights.run(`${name}@${ref.hex}`, () => this.#firstPull(repo, ref, `sha256:${ref.hex}`, { digest: ref.hex }));
      return r.found;
    }
    const key = `${name}:${ref.tag}`;
    const mapped = await this.#stored.resolve(repo, ref);
    const now = Date.now();
    if (mapped && now < (this.#freshUntil.get(key) ?? 0)) return mapped;
    if (mapped && this.upstream.health.resting(now)) {
      this.#counters.add('stale_served', 1, name);
      return mapped;
    }
    const r = await this.#flights.run(key, () => this.#revalidate(repo, ref.tag, mapped));
    if (r.stale) this.#counters.add('stale_served', 1, name);
    return r.found;
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
    const registry = this.upstream.registry;
    const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `referrers/sha256:${subjectHex}`, headers: { accept: OCI_INDEX } });
    if (res.status === 200 && header(res.headers, 'content-type')?.startsWith(OCI_INDEX)) return descriptorsIn(await readCapped(res));
    discard(res);
    if (res.status !== 404) throw new UpstreamFailure(`answered ${res.status} to the referrers API`);
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
   * `#pull` of a manifest this index does not hold, with a failure answered 502 UNKNOWN (nothing
   * stored to fall back on). With several worker processes it runs under a lock they share, after
   * reading the store again: a manifest another worker just pulled is not fetched twice.
   */
  #firstPull(repo: readonly string[], ref: Reference, reference: string, want: { digest?: string; tag?: string }): Promise<Resolved> {
    const pull = () => this.upstream.orUnavailable(() => this.#pull(repo, reference, want), repo);
    const locks = this.#locks;
    if (!locks) return pull();
    return locks.run(`oci-pull:${this.index.name}:${repo.join('/')}:${reference}`, async () => {
      const pulled = await this.#stored.resolve(repo, ref);
      return pulled ? { found: pulled, stale: false } : pull();
    });
  }

  /** A stored tag past its confirmation: one HEAD, and the manifest again only when it moved; the stored mapping while the upstream fails. */
  async #revalidate(repo: readonly string[], tag: string, mapped: FoundManifest | null): Promise<Resolved> {
    const name = repo.join('/');
    if (!mapped) return this.#firstPull(repo, { kind: 'tag', tag }, tag, { tag });
    const registry = this.upstream.registry;
    const revalidated = async (): Promise<Resolved> => {
      const res = await registry.fetch({ method: 'HEAD', repository: registry.upstreamName(repo), path: `manifests/${tag}`, headers: { accept: MANIFEST_ACCEPT } });
      discard(res);
      if (res.status === 200 && header(res.headers, 'docker-content-digest') === `sha256:${mapped.hex}`) {
        this.upstream.health.up();
        this.#counters.add('refreshes', 1, name);
        this.#confirm(repo, tag, res);
        return { found: mapped, stale: false };
      }
      if (res.status !== 200 && res.status !== 404) throw new UpstreamFailure(`answered ${res.status} to a HEAD of the tag`);
      // Gone, another digest, or none named: ask for the manifest itself.
      const pulled = await this.#pull(repo, tag, { tag });
      this.#counters.add('refreshes', 1, name);
      if (pulled.found?.hex !== mapped.hex) this.#counters.add('changed', 1, name);
      return pulled;
    };
    return this.upstream.orElse(revalidated, () => ({ found: mapped, stale: true }));
  }

  /**
   * GET of one manifest: verified (against the requested digest, or the upstream's
   * `Docker-Content-Digest`), capped, stored byte for byte with its media type, the tag pointed at
   * it. Null when the upstream does not know it. Throws `UpstreamFailure` (or what
   * `upstreamFailureOf` reads as one) when the upstream gave no answer.
   */
  async #pull(repo: readonly string[], reference: string, want: { digest?: string; tag?: string }): Promise<Resolved> {
    const name = repo.join('/');
    const registry = this.upstream.registry;
    const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `manifests/${reference}`, headers: { accept: MANIFEST_ACCEPT } });
    if (res.status === 404) {
      discard(res);
      this.upstream.health.up();
      if (want.tag !== undefined) {
        await this.#stored.deleteTag(repo, want.tag);
        this.#freshUntil.delete(`${name}:${want.tag}`);
      }
      return { found: null, stale: false };
    }
    if (res.status !== 200) {
      discard(res);
      throw new UpstreamFailure(`answered ${res.status} to the manifest GET`);
    }
    const body = await readCapped(res);
    this.upstream.health.up();
    const hex = createHash('sha256').update(body).digest('hex');
    const announced = header(res.headers, 'docker-content-digest');
    const expected = want.digest ?? (announced?.startsWith('sha256:') ? announced.slice('sha256:'.length) : undefined);
    if (expected !== undefined && expected !== hex) {
      this.#counters.add('rejected', 1, name);
      throw new OciError('MANIFEST_INVALID', `the upstream's manifest for "${reference}" has digest sha256:${hex}, not sha256:${expected}; it was not stored`);
    }
    let checked;
    try {
      checked = checkManifest(body, header(res.headers, 'content-type'));
    } catch (err) {
      this.#counters.add('rejected', 1, name);
      throw new OciError('MANIFEST_INVALID', `the upstream's manifest for "${reference}" cannot be served: ${err instanceof Error ? err.message : String(err)}`);
    }
    const record = manifestRecord(checked, hex, body.length);
    // The hold, then the bytes, then the documents that point at them.
    await this.#holder.hold(hex);
    await this.#store.put(Readable.from([body]), hex);
    await this.#stored.putManifest(repo, hex, record, want.tag);
    if (want.tag !== undefined) this.#confirm(repo, want.tag, res);
    const stored = await this.#stored.manifest(repo, hex);
    return { found: { hex, record: stored ?? record, index: this.index }, stale: false };
  }

  #confirm(repo: readonly string[], tag: string, res: UpstreamResponse): void {
    const secs = ttlSecs(this.index.cacheTtlSecs, {
      ...optional('cacheControl', header(res.headers, 'cache-control')),
      ...optional('age', header(res.headers, 'age')),
    });
    const now = Date.now();
    if (secs === 0) {
      this.#freshUntil.delete(`${repo.join('/')}:${tag}`);
      return;
    }
    this.#freshUntil.set(`${repo.join('/')}:${tag}`, now + secs * 1000);
    // Expired confirmations are worth nothing: dropped once there are many.
    if (this.#freshUntil.size > MAX_CONFIRMATIONS) for (const [key, until] of this.#freshUntil) if (until <= now) this.#freshUntil.delete(key);
  }
}

/** A manifest (or a referrers index) from the upstream, at most MAX_MANIFEST_BYTES. */
async function readCapped(res: UpstreamResponse): Promise<Buffer> {
  try {
    return await readBounded(res, MAX_MANIFEST_BYTES);
  } catch (err) {
    if (err instanceof DocumentTooLargeError) throw new UpstreamFailure(`sent a manifest over the ${MAX_MANIFEST_BYTES}-byte (4 MiB) limit`);
    throw err;
  }
}

/** The well-formed descriptors of an image index's `manifests` (upstream bytes: anything else is skipped). */
function descriptorsIn(body: Buffer): Descriptor[] {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw new UpstreamFailure('sent a referrers index that is not JSON');
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

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

function defineTag(tags: Record<string, string>, tag: string, hex: string): void {
  Object.defineProperty(tags, tag, { value: hex, enumerable: true, writable: true, configurable: true });
}
