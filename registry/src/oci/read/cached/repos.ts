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
 *   upstream is left alone for a short backoff (roles/upstream-health.ts).
 *
 * Confirmation times live in process memory: another replica, or this one after a restart,
 * revalidates a tag once on its first read.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { CachedIndex } from '../../../config/types.js';
import type { ServerContext } from '../../../ecosystem/ecosystem.js';
import type { IndexCounters } from '../../../observe/counters.js';
import { ttlSecs } from '../../../roles/freshness.js';
import { PromiseFlights } from '../../../roles/promise-flights.js';
import { discard, DocumentTooLargeError, header, readBounded, type UpstreamResponse } from '../../../roles/upstream.js';
import { UpstreamHealth } from '../../../roles/upstream-health.js';
import type { Holder } from '../../../storage/holds.js';
import { OciError } from '../../model/errors.js';
import { HostedRepos, type FoundManifest } from '../hosted/repos.js';
import { checkManifest, isObject, OCI_INDEX } from '../../model/manifest-check.js';
import { describe, MAX_MANIFEST_BYTES } from '../../handlers/manifests.js';
import type { Descriptor, ManifestRecord } from '../../model/meta.js';
import type { MemberReader } from '../virtual/members.js';
import type { Reference } from '../../model/names.js';
import { CachedBlobs } from './blobs.js';
import { upstreamTagNames } from './upstream-tags.js';
import { UpstreamFailure, upstreamFailureOf } from './upstream-failure.js';
import { MANIFEST_ACCEPT, UpstreamRegistry } from './upstream-registry.js';

/** Tag confirmations kept before the expired ones are swept. */
const MAX_CONFIRMATIONS = 10_000;

interface Resolved {
  found: FoundManifest | null;
  /** Served from the stored mapping because the upstream failed. */
  stale: boolean;
}

export class CachedRepos implements MemberReader {
  readonly stored: HostedRepos;
  readonly upstream: UpstreamRegistry;
  readonly health = new UpstreamHealth();
  readonly counters: IndexCounters;
  readonly #ctx: ServerContext;
  readonly #holder: Holder;
  /** `repo:tag` -> until when the upstream's confirmation holds (ms since the epoch). */
  readonly #freshUntil = new Map<string, number>();
  readonly #flights = new PromiseFlights<Resolved>();
  /** Blobs pulled through this index. */
  readonly blobs: CachedBlobs;

  constructor(
    readonly index: CachedIndex,
    ctx: ServerContext,
    holder: Holder,
  ) {
    this.#ctx = ctx;
    this.#holder = holder;
    this.stored = new HostedRepos(index, ctx.stores);
    this.upstream = new UpstreamRegistry(index, ctx.upstreamSlots.for(index));
    this.counters = ctx.counters.index(index.route);
    this.blobs = new CachedBlobs(this, ctx.stores.blobs, holder, ctx.fetches && { flights: ctx.fetches.flights, scope: `oci:${index.name}` });
  }

  async resolve(repo: readonly string[], ref: Reference): Promise<FoundManifest | null> {
    const name = repo.join('/');
    if (ref.kind === 'digest') {
      const held = await this.stored.resolve(repo, ref);
      if (held) return held;
      const r = await this.#flights.run(`${name}@${ref.hex}`, () => this.#firstPull(repo, ref, `sha256:${ref.hex}`, { digest: ref.hex }));
      return r.found;
    }
    const key = `${name}:${ref.tag}`;
    const mapped = await this.stored.resolve(repo, ref);
    const now = Date.now();
    if (mapped && now < (this.#freshUntil.get(key) ?? 0)) return mapped;
    if (mapped && this.health.resting(now)) {
      this.counters.add('stale_served', 1, name);
      return mapped;
    }
    const r = await this.#flights.run(key, () => this.#revalidate(repo, ref.tag, mapped));
    if (r.stale) this.counters.add('stale_served', 1, name);
    return r.found;
  }

  /**
   * For a virtual index's tag list: the upstream's tags (its first page) with the stored ones;
   * while the upstream fails, the stored ones. (A lone cached index passes the upstream's list
   * through instead: cached-tags.ts.) The digests are the stored mappings' where known.
   */
  async tags(repo: readonly string[]): Promise<Record<string, string>> {
    const stored = await this.stored.tags(repo);
    let upstream: string[] = [];
    try {
      upstream = await upstreamTagNames(this, repo);
    } catch (err) {
      const failure = upstreamFailureOf(err);
      if (!failure && !(err instanceof OciError)) throw err;
      if (failure) this.health.down(failure, Date.now());
    }
    const out: Record<string, string> = {};
    for (const tag of upstream) defineTag(out, tag, '');
    for (const [tag, hex] of Object.entries(stored)) defineTag(out, tag, hex);
    return out;
  }

  /**
   * The upstream's referrers of `subjectHex` (its referrers API, or else the referrers tag schema's
   * `sha256-<hex>` index, pulled through like any tag) with those this index stored; while the
   * upstream fails, the stored ones alone.
   */
  async referrers(repo: readonly string[], subjectHex: string): Promise<Descriptor[]> {
    const stored = await this.stored.referrers(repo, subjectHex);
    let upstream: Descriptor[] = [];
    try {
      upstream = await this.#upstreamReferrers(repo, subjectHex);
    } catch (err) {
      const failure = upstreamFailureOf(err);
      if (!failure && !(err instanceof OciError)) throw err;
      if (failure) this.health.down(failure, Date.now());
    }
    const byDigest = new Map<string, Descriptor>();
    for (const d of [...upstream, ...stored]) if (!byDigest.has(d.digest)) byDigest.set(d.digest, d);
    return [...byDigest.values()];
  }

  async #upstreamReferrers(repo: readonly string[], subjectHex: string): Promise<Descriptor[]> {
    const res = await this.upstream.fetch({ repository: this.upstream.upstreamName(repo), path: `referrers/sha256:${subjectHex}`, headers: { accept: OCI_INDEX } });
    if (res.status === 200 && header(res.headers, 'content-type')?.startsWith(OCI_INDEX)) return descriptorsIn(await readCapped(res));
    discard(res);
    if (res.status !== 404) throw new UpstreamFailure(`answered ${res.status} to the referrers API`);
    // No referrers API: the tag schema's index, if the upstream has one.
    const found = await this.resolve(repo, { kind: 'tag', tag: `sha256-${subjectHex}` });
    if (!found) return [];
    const bytes = await this.#ctx.stores.blobs.get(found.hex);
    return bytes ? descriptorsIn(await buffer(bytes)) : [];
  }

  repositories(): Promise<string[][]> {
    return this.stored.repositories();
  }

  /** Counts a failure once and turns it into the answer: 502 UNKNOWN. */
  unavailable(err: UpstreamFailure, repo: readonly string[]): OciError {
    this.health.down(err, Date.now());
    this.counters.add('upstream_errors', 1, repo.join('/'));
    return new OciError('UNKNOWN', `the upstream registry ${this.upstream.displayUrl} failed and nothing is cached: ${err.message}`);
  }

  /**
   * `#pullOrFail` of a manifest this index does not hold. With several worker processes it runs
   * under a lock they share, after reading the store again: a manifest another worker just pulled
   * is not fetched twice.
   */
  #firstPull(repo: readonly string[], ref: Reference, reference: string, want: { digest?: string; tag?: string }): Promise<Resolved> {
    const locks = this.#ctx.fetches?.locks;
    if (!locks) return this.#pullOrFail(repo, reference, want);
    return locks.run(`oci-pull:${this.index.name}:${repo.join('/')}:${reference}`, async () => {
      const pulled = await this.stored.resolve(repo, ref);
      return pulled ? { found: pulled, stale: false } : this.#pullOrFail(repo, reference, want);
    });
  }

  async #revalidate(repo: readonly string[], tag: string, mapped: FoundManifest | null): Promise<Resolved> {
    const name = repo.join('/');
    if (!mapped) return this.#firstPull(repo, { kind: 'tag', tag }, tag, { tag });
    try {
      const res = await this.upstream.fetch({ method: 'HEAD', repository: this.upstream.upstreamName(repo), path: `manifests/${tag}`, headers: { accept: MANIFEST_ACCEPT } });
      discard(res);
      if (res.status === 200 && header(res.headers, 'docker-content-digest') === `sha256:${mapped.hex}`) {
        this.health.up();
        this.counters.add('refreshes', 1, name);
        this.#confirm(repo, tag, res);
        return { found: mapped, stale: false };
      }
      if (res.status !== 200 && res.status !== 404) throw new UpstreamFailure(`answered ${res.status} to a HEAD of the tag`);
      // Gone, another digest, or none named: ask for the manifest itself.
      const pulled = await this.#pull(repo, tag, { tag });
      this.counters.add('refreshes', 1, name);
      if (pulled.found?.hex !== mapped.hex) this.counters.add('changed', 1, name);
      return pulled;
    } catch (err) {
      const failure = upstreamFailureOf(err);
      if (!failure) throw err;
      this.health.down(failure, Date.now());
      return { found: mapped, stale: true };
    }
  }

  /** `#pull`, with a failure answered 502 UNKNOWN (nothing stored to fall back on). */
  async #pullOrFail(repo: readonly string[], reference: string, want: { digest?: string; tag?: string }): Promise<Resolved> {
    try {
      return await this.#pull(repo, reference, want);
    } catch (err) {
      const failure = upstreamFailureOf(err);
      if (!failure) throw err;
      throw this.unavailable(failure, repo);
    }
  }

  /**
   * GET of one manifest: verified (against the requested digest, or the upstream's
   * `Docker-Content-Digest`), capped, stored byte for byte with its media type, the tag pointed at
   * it. Null when the upstream does not know it. Throws `UpstreamFailure` (or what
   * `upstreamFailureOf` reads as one) when the upstream gave no answer.
   */
  async #pull(repo: readonly string[], reference: string, want: { digest?: string; tag?: string }): Promise<Resolved> {
    const name = repo.join('/');
    const res = await this.upstream.fetch({ repository: this.upstream.upstreamName(repo), path: `manifests/${reference}`, headers: { accept: MANIFEST_ACCEPT } });
    if (res.status === 404) {
      discard(res);
      this.health.up();
      if (want.tag !== undefined) {
        await this.stored.deleteTag(repo, want.tag);
        this.#freshUntil.delete(`${name}:${want.tag}`);
      }
      return { found: null, stale: false };
    }
    if (res.status !== 200) {
      discard(res);
      throw new UpstreamFailure(`answered ${res.status} to the manifest GET`);
    }
    const body = await readCapped(res);
    this.health.up();
    const hex = createHash('sha256').update(body).digest('hex');
    const announced = header(res.headers, 'docker-content-digest');
    const expected = want.digest ?? (announced?.startsWith('sha256:') ? announced.slice('sha256:'.length) : undefined);
    if (expected !== undefined && expected !== hex) {
      this.counters.add('rejected', 1, name);
      throw new OciError('MANIFEST_INVALID', `the upstream's manifest for "${reference}" has digest sha256:${hex}, not sha256:${expected}; it was not stored`);
    }
    let checked;
    try {
      checked = checkManifest(body, header(res.headers, 'content-type'));
    } catch (err) {
      this.counters.add('rejected', 1, name);
      throw new OciError('MANIFEST_INVALID', `the upstream's manifest for "${reference}" cannot be served: ${err instanceof Error ? err.message : String(err)}`);
    }
    const record: ManifestRecord = {
      mediaType: checked.mediaType,
      size: body.length,
      descriptor: describe(checked.doc, checked.mediaType, hex, body.length),
      pushedAt: new Date().toISOString(),
    };
    if (checked.subject) record.subject = checked.subject.hex;
    // The hold, then the bytes, then the documents that point at them.
    await this.#holder.hold(hex);
    await this.#ctx.stores.blobs.put(Readable.from([body]), hex);
    await this.stored.putManifest(repo, hex, record, want.tag);
    if (want.tag !== undefined) this.#confirm(repo, want.tag, res);
    const stored = await this.stored.manifest(repo, hex);
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
