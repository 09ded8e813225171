/**
 * Read-through caching of small upstream documents (pages, tag lists, manifests by tag). The
 * record (`CachedDoc`: validators, fetched-at, TTL) lives in the MetaStore under the caller's key;
 * the bytes live in the BlobStore under their digest (held by the caller's `holder`, when given,
 * before they are stored). A fresh record is served without asking the
 * upstream; otherwise one revalidation per key runs at a time (single-flight) and every waiter
 * shares its result:
 *
 * - 304: the record is confirmed (`refreshes`); 200 with the same bytes: likewise.
 * - 200 with other bytes: the record is replaced (`refreshes` and `changed`).
 * - 404/410: the document is gone upstream; the record is dropped and the caller gets null.
 * - failure (connect error, timeout, 5xx, any other status): the cached copy is served
 *   (`stale_served`, per request served), or, with nothing cached, an `UpstreamError` of the
 *   cause's kind saying so (502; `upstream_errors`).
 *
 * `stale_served` counts every request answered stale; `refreshes`, `changed` and
 * `upstream_errors` count once per upstream exchange. With `locks` (held across the processes of
 * a server), a refresh waits for another process's refresh of the same key and then finds its
 * result in the store, instead of asking the upstream again.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { SlotsBusyError } from '../limits/slots.js';
import { CachedBytesLostError } from './errors.js';
import { NO_COUNTERS, type CounterSink } from '../observe/counters.js';
import type { Holder } from '../storage/holds.js';
import type { KeyLocks } from '../storage/key-locks.js';
import type { BlobInfo, BlobStore, MetaStore, Versioned } from '../storage/types.js';
import { updateDoc } from '../storage/update.js';
import type { Conditional, FetchedDoc } from './fetch-doc.js';
import { confirmed, DEFAULT_CACHE_TTL_SECS, fetched, freshness, type CachedDoc } from './freshness.js';
import { PromiseFlights } from './promise-flights.js';
import { UpstreamHealth } from './upstream-health.js';
import { restated } from './upstream-error.js';

/** How the document was answered. */
export type DocSource = 'fresh' | 'fetched' | 'revalidated' | 'changed' | 'stale';

export interface DocResult {
  record: CachedDoc;
  source: DocSource;
  /** The bytes (read from the store unless just fetched). Cache parsed forms by `record.digest`. */
  body(): Promise<Buffer>;
}

/** Asks the upstream for the document, conditionally. See `fetchDoc` for the usual one. */
export type DocFetcher = (cond: Conditional) => Promise<FetchedDoc>;

export interface DocCacheOptions {
  meta: MetaStore;
  blobs: BlobStore;
  /** Holds the stored bodies, so no other ecosystem's DELETE takes them. */
  holder?: Holder;
  /** The index's `cache_ttl_secs`. */
  ttlSecs?: number;
  counters?: CounterSink;
  health?: UpstreamHealth;
  now?: () => number;
  /** Serialises the refreshes of one key across the server's processes. */
  locks?: KeyLocks;
}

type Shared = { kind: 'doc'; record: CachedDoc; source: DocSource; bytes?: Buffer } | { kind: 'absent' };

export class DocCache {
  readonly health: UpstreamHealth;
  readonly #meta: MetaStore;
  readonly #blobs: BlobStore;
  readonly #holder: Holder | undefined;
  readonly #ttl: number;
  readonly #counters: CounterSink;
  readonly #now: () => number;
  readonly #flights = new PromiseFlights<Shared>();
  readonly #locks: KeyLocks | undefined;

  constructor(opts: DocCacheOptions) {
    this.#meta = opts.meta;
    this.#blobs = opts.blobs;
    this.#holder = opts.holder;
    this.#ttl = opts.ttlSecs ?? DEFAULT_CACHE_TTL_SECS;
    this.#counters = opts.counters ?? NO_COUNTERS;
    this.health = opts.health ?? new UpstreamHealth();
    this.#now = opts.now ?? Date.now;
    this.#locks = opts.locks;
  }

  /**
   * The document under `key`, from cache or upstream; null when the upstream says it is gone.
   * `stored`: the record as a `peek` in this request already read it.
   */
  async read(key: string, fetcher: DocFetcher, stored?: Promise<Versioned<CachedDoc> | null>): Promise<DocResult | null> {
    const cached = await (stored ?? this.peek(key));
    if (cached && freshness(cached.doc, this.#now()) === 'fresh') return this.#result(cached.doc, 'fresh');
    if (cached && this.health.resting(this.#now())) {
      this.#counters.add('stale_served');
      return this.#result(cached.doc, 'stale');
    }
    const refresh = () => this.#refresh(key, fetcher);
    const shared = await this.#flights.run(key, () => (this.#locks ? this.#locks.run(`read-through:${key}`, refresh) : refresh()));
    if (shared.kind === 'absent') return null;
    if (shared.source === 'stale') this.#counters.add('stale_served');
    return this.#result(shared.record, shared.source, shared.bytes);
  }

  /** The stored record under `key`, without asking the upstream (what `read` starts with). */
  peek(key: string): Promise<Versioned<CachedDoc> | null> {
    return this.#meta.get<CachedDoc>(key);
  }

  async #refresh(key: string, fetcher: DocFetcher): Promise<Shared> {
    // Read again: another waiter, worker or replica may have refreshed it since.
    const current = (await this.#meta.get<CachedDoc>(key))?.doc;
    if (current && freshness(current, this.#now()) === 'fresh') return { kind: 'doc', record: current, source: 'fresh' };
    let answer: FetchedDoc;
    try {
      const cond: Conditional = {};
      if (current?.etag !== undefined) cond.etag = current.etag;
      if (current?.lastModified !== undefined) cond.lastModified = current.lastModified;
      answer = await fetcher(cond);
    } catch (err) {
      return this.#failed(current, err);
    }
    this.health.up();
    const now = this.#now();
    switch (answer.status) {
      case 'not_modified': {
        if (!current) return this.#failed(current, new Error('upstream answered 304 to an unconditional request'));
        const record = confirmed(current, answer.headers, this.#ttl, now);
        await this.#save(key, record);
        this.#counters.add('refreshes');
        return { kind: 'doc', record, source: 'revalidated' };
      }
      case 'ok': {
        const info = await this.#store(answer.body);
        const record = fetched(info, answer.headers, this.#ttl, now);
        await this.#save(key, record);
        if (!current) return { kind: 'doc', record, source: 'fetched', bytes: answer.body };
        this.#counters.add('refreshes');
        if (record.digest === current.digest) return { kind: 'doc', record, source: 'revalidated', bytes: answer.body };
        this.#counters.add('changed');
        return { kind: 'doc', record, source: 'changed', bytes: answer.body };
      }
      case 'absent': {
        if (current) {
          await this.#meta.delete(key);
          this.#counters.add('refreshes');
          this.#counters.add('changed');
        }
        return { kind: 'absent' };
      }
    }
  }

  #failed(current: CachedDoc | undefined, err: unknown): Shared {
    // Our own concurrency cap said no: not an upstream failure, and the caller owes a 429.
    const slotDenied = err instanceof SlotsBusyError;
    if (!slotDenied) this.health.down(err, this.#now());
    if (current) return { kind: 'doc', record: current, source: 'stale' };
    if (slotDenied) throw err;
    this.#counters.add('upstream_errors');
    const why = err instanceof Error ? err.message : String(err);
    throw restated(err, `the upstream could not be reached and nothing is cached: ${why}`);
  }

  /** Holds, then stores, the body (an existing hold costs one read). */
  async #store(body: Buffer): Promise<BlobInfo> {
    if (!this.#holder) return this.#blobs.put(Readable.from([body]));
    const digest = createHash('sha256').update(body).digest('hex');
    await this.#holder.hold(digest);
    return this.#blobs.put(Readable.from([body]), digest);
  }

  async #save(key: string, record: CachedDoc): Promise<void> {
    // Keep whichever confirmation is newer when replicas race.
    await updateDoc<CachedDoc>(this.#meta, key, (cur) => (cur && cur.fetchedAt > record.fetchedAt ? undefined : record));
  }

  #result(record: CachedDoc, source: DocSource, bytes?: Buffer): DocResult {
    return {
      record,
      source,
      body: async () => {
        if (bytes) return bytes;
        const stream = await this.#blobs.get(record.digest);
        if (!stream) throw new CachedBytesLostError();
        return buffer(stream);
      },
    };
  }
}

/** The generic read-through of one small document: `cache.read(key, fetcher)`. */
export function readThrough(key: string, fetcher: DocFetcher, cache: DocCache): Promise<DocResult | null> {
  return cache.read(key, fetcher);
}
