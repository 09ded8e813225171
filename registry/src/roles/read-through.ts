/**
 * Read-through caching of small upstream documents (Python's Simple pages and project list). The
 * record (`CachedDoc`: validators, fetched-at, TTL) lives in the MetaStore under the caller's key;
 * the bytes live in the BlobStore under their digest (held by the caller's `holder`, when given,
 * before they are stored). When to ask the upstream, single-flight, stale serving and the
 * counters are the revalidator's (revalidator.ts); this file is where such a document lives:
 *
 * - fresh: within the record's TTL (freshness.ts), so a confirmation is seen by every replica;
 * - asked: a conditional fetch with the record's validators (`fetchDoc`, fetch-doc.ts);
 * - kept: 304 confirms the record, 200 stores the bytes and replaces the record (the same digest
 *   counts as confirmed), 404/410 drops the record; with `upstream_deletions = "keep"` a 404/410
 *   `retain`s it instead: `keptSince` set once in the record (a compare-and-swap, so one refresh
 *   on one process sets it and `onKept` hears of it once) and the TTL restarted. A 304 or 200
 *   later writes a record without the mark, and `onKept` hears that it went.
 *
 * With nothing cached, a failure is an `UpstreamError` saying so (502 in the default table).
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { CachedBytesLostError } from './errors.js';
import type { CounterSink } from '../observe/counters.js';
import type { Holder } from '../storage/holds.js';
import type { KeyLocks } from '../storage/key-locks.js';
import type { BlobInfo, BlobStore, MetaStore, ReadOptions, Versioned } from '../storage/types.js';
import { updateDoc } from '../storage/update.js';
import type { Conditional, FetchedDoc } from './fetch-doc.js';
import { confirmed, DEFAULT_CACHE_TTL_SECS, fetched, freshness, type CachedDoc } from './freshness.js';
import type { UpstreamDeletions } from '../config/types.js';
import { Revalidator, type CachedCopy, type Kept, type Retained, type Served } from './revalidator.js';
import { UpstreamError } from './upstream-error.js';
import type { UpstreamState } from './upstream-health.js';

/** How the document was answered. */
export type DocSource = Served;

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
  health?: UpstreamState;
  now?: () => number;
  /** Serialises the refreshes of one key across the server's processes. */
  locks?: KeyLocks;
  /** Told (not awaited) when a key's stored content changed: a new or different body, or gone. */
  onChanged?: (key: string) => void;
  /** What a stored document the upstream deleted becomes (`upstream_deletions`); default `follow`. */
  deletions?: UpstreamDeletions;
  /**
   * Told (not awaited) when a key's copy is marked as kept after the upstream's delete (`since`,
   * once per mark), and when the mark goes (null: the upstream has it again, or it was dropped).
   */
  onKept?: (key: string, since: number | null) => void;
}

/** A stored document as the revalidator handles it: its record, and its bytes when just fetched. */
interface Held {
  record: CachedDoc;
  bytes?: Buffer;
}

export class DocCache {
  readonly #meta: MetaStore;
  readonly #blobs: BlobStore;
  readonly #holder: Holder | undefined;
  readonly #ttl: number;
  readonly #now: () => number;
  readonly #revalidator: Revalidator<Held>;
  readonly #onChanged: ((key: string) => void) | undefined;
  readonly #onKept: ((key: string, since: number | null) => void) | undefined;

  constructor(opts: DocCacheOptions) {
    this.#onChanged = opts.onChanged;
    this.#onKept = opts.onKept;
    this.#meta = opts.meta;
    this.#blobs = opts.blobs;
    this.#holder = opts.holder;
    this.#ttl = opts.ttlSecs ?? DEFAULT_CACHE_TTL_SECS;
    this.#now = opts.now ?? Date.now;
    this.#revalidator = new Revalidator<Held>({
      ...(opts.counters ? { counters: opts.counters } : {}),
      ...(opts.health ? { health: opts.health } : {}),
      now: this.#now,
      ...(opts.locks ? { locks: opts.locks } : {}),
      ...(opts.deletions ? { deletions: opts.deletions } : {}),
    });
  }

  /** Whether the upstream answered lately (`/+status`). */
  get health(): UpstreamState {
    return this.#revalidator.health;
  }

  /**
   * The document under `key`, from cache or upstream; null when the upstream says it is gone.
   * `stored`: the record as a `peek` in this request already read it, that read begun at `storedAt`
   * (`Date.now()`; see the revalidator's `ReadOptions`).
   */
  async read(key: string, fetcher: DocFetcher, stored?: Promise<Versioned<CachedDoc> | null>, storedAt?: number): Promise<DocResult | null> {
    const opts = stored ? { stored: stored.then((v) => v && { record: v.doc }), ...(storedAt !== undefined ? { storedAt } : {}) } : {};
    const read = await this.#revalidator.read(key, this.#copy(key, fetcher), opts);
    return read && this.#result(read.doc, read.served);
  }

  /** The stored record under `key`, without asking the upstream (what `read` starts with). */
  peek(key: string, opts?: ReadOptions): Promise<Versioned<CachedDoc> | null> {
    return this.#meta.get<CachedDoc>(key, opts);
  }

  /** The stored document under `key` as it is, never asking the upstream (null when none is stored). */
  async stored(key: string): Promise<DocResult | null> {
    const v = await this.peek(key);
    return v && this.#result({ record: v.doc }, 'stale');
  }

  #copy(key: string, fetcher: DocFetcher): CachedCopy<Held, FetchedDoc> {
    return {
      stored: async () => {
        const v = await this.peek(key);
        return v && { record: v.doc };
      },
      isFresh: (held, now) => freshness(held.record, now) === 'fresh',
      ask: async (current) => {
        const cond: Conditional = {};
        if (current?.record.etag !== undefined) cond.etag = current.record.etag;
        if (current?.record.lastModified !== undefined) cond.lastModified = current.record.lastModified;
        if (current?.record.upstream !== undefined) cond.upstream = current.record.upstream;
        const answer = await fetcher(cond);
        if (answer.status === 'not_modified' && !current) {
          throw new UpstreamError('status', null, 'upstream answered 304 to an unconditional request', { status: 304 });
        }
        return answer;
      },
      keep: (answer, current) => this.#keep(key, answer, current),
      gone: (answer) => answer.status === 'absent',
      retain: (current) => this.#retain(key, current),
    };
  }

  /** The stored record kept after the upstream's delete: marked once, trusted for another TTL. */
  async #retain(key: string, current: Held): Promise<Retained<Held>> {
    const now = this.#now();
    let marked = false;
    const { doc } = await updateDoc<CachedDoc>(this.#meta, key, (cur) => {
      marked = false;
      // Replaced or dropped meanwhile (another process, another upstream): leave it as it is.
      if (!cur || cur.digest !== current.record.digest) return undefined;
      marked = cur.keptSince === undefined;
      return { ...cur, fetchedAt: now, ttlSecs: this.#ttl, keptSince: cur.keptSince ?? now };
    });
    if (marked) this.#onKept?.(key, doc!.keptSince!);
    return { doc: { record: doc ?? current.record, ...(current.bytes ? { bytes: current.bytes } : {}) }, marked };
  }

  async #keep(key: string, answer: FetchedDoc, current: Held | null): Promise<Kept<Held> | null> {
    const now = this.#now();
    switch (answer.status) {
      case 'not_modified': {
        // `ask` refuses a 304 without a stored record.
        const record = confirmed(current!.record, answer.headers, this.#ttl, now);
        await this.#save(key, record);
        this.#unmarked(key, current);
        return { doc: { record }, same: true };
      }
      case 'ok': {
        const info = await this.#store(answer.body);
        const record = fetched(info, answer.headers, this.#ttl, now);
        if (answer.upstream !== undefined) record.upstream = answer.upstream;
        await this.#save(key, record);
        const same = record.digest === current?.record.digest;
        if (!same) this.#onChanged?.(key);
        this.#unmarked(key, current);
        return { doc: { record, bytes: answer.body }, same };
      }
      case 'absent': {
        if (current) {
          await this.#meta.delete(key);
          this.#onChanged?.(key);
          this.#unmarked(key, current);
        }
        return null;
      }
    }
  }

  /** The copy that was marked as kept is not any more (replaced, confirmed or dropped). */
  #unmarked(key: string, previous: Held | null): void {
    if (previous?.record.keptSince !== undefined) this.#onKept?.(key, null);
  }

  /** Holds, then stores, the body (an existing hold costs one read). */
  async #store(body: Buffer): Promise<BlobInfo> {
    if (!this.#holder) return this.#blobs.put(Readable.from([body]));
    const digest = createHash('sha256').update(body).digest('hex');
    await this.#holder.hold(digest, body.length);
    return this.#blobs.put(Readable.from([body]), digest);
  }

  async #save(key: string, record: CachedDoc): Promise<void> {
    // Keep whichever confirmation is newer when replicas race.
    await updateDoc<CachedDoc>(this.#meta, key, (cur) => (cur && cur.fetchedAt > record.fetchedAt ? undefined : record));
  }

  #result({ record, bytes }: Held, source: DocSource): DocResult {
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
