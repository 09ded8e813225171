/**
 * The cached role's one decision, whatever the document and wherever it lives: serve the stored
 * copy, ask the upstream, or fall back. A `CachedCopy` says where the copy lives and how to talk
 * to the upstream about it; the revalidator decides, single-flights and counts:
 *
 * 1. A fresh stored copy is served without asking (`fresh`).
 * 2. A stale one is served at once while the upstream rests after a failure, or, with several,
 *    while every one of them rests (`stale`, counted `stale_served`; upstream-health.ts,
 *    upstream-list.ts, whose walk over them is what `ask` runs).
 * 3. Otherwise one refresh per key runs at a time (with `locks`, one across the server's
 *    processes too), and every waiter shares its result. It reads the stored copy again first
 *    when another refresh of the key, in this process or another worker, ended since the copy
 *    was read (it is then most likely fresh: storage/recent-ends.ts), then `ask`s the upstream and
 *    has the copy `keep` the answer:
 *    - nothing was stored: `fetched`, no counter;
 *    - the same content (a 304, the same bytes or digest): `revalidated`, counted `refreshes`;
 *    - other content: `changed`, counted `refreshes` and `changed`;
 *    - gone upstream (`gone` says so; `keep` then answers null): with `upstream_deletions =
 *      "follow"` null, counted `refreshes` and `changed` when a copy was stored. With `"keep"` a
 *      stored copy is `retain`ed instead: marked as kept after the upstream's delete and
 *      trusted for another TTL (`kept`, counted `refreshes`, and `kept_after_upstream_delete`
 *      once per copy: the mark lives in the stored copy, so only the refresh that sets it
 *      counts, on any process). It is asked again when that TTL ends: once the upstream has it
 *      again, `keep` stores the upstream's copy, which carries no mark.
 * 4. When `ask` fails, the upstream rests (upstream-health.ts) and the stored copy is served
 *    (`stale`, counted `stale_served` once per request answered with it); with nothing stored,
 *    the failure is counted `upstream_errors` once and thrown as an `UpstreamError` of the
 *    cause's kind, its message saying nothing is cached. Our own upstream cap saying no
 *    (`SlotsBusyError`) is not the upstream's failure: a stored copy is still served, and with
 *    none the 429 is thrown as it is. What `keep` throws (a store failure, content refused) is
 *    not the upstream's either and goes to the caller untouched.
 *
 * Where "when confirmed" lives is the copy's business (`isFresh`), so the rule of design §4 holds
 * for either store of it:
 * - Python pages and lists (read-through.ts, `DocCache`): the record (validators, fetched-at,
 *   TTL) in the MetaStore beside the bytes' digest, so every replica sees each confirmation.
 * - OCI tags (oci/read/cached/repos.ts): the stored tag mapping, with the time until which the
 *   upstream's last answer holds in the same document; `ask` a HEAD of the tag, and
 *   the manifest's GET when none is stored or the digest moved; counted per repository.
 */
import type { UpstreamDeletions } from '../config/types.js';
import { SlotsBusyError } from '../limits/slots.js';
import { NO_COUNTERS, type CounterSink, type UsageCounter } from '../observe/counters.js';
import type { KeyLocks } from '../storage/key-locks.js';
import { RecentEnds } from '../storage/recent-ends.js';
import { PromiseFlights } from './promise-flights.js';
import { restated } from './upstream-error.js';
import { UpstreamHealth, type UpstreamState } from './upstream-health.js';

/** How a read was answered. */
export type Served = 'fresh' | 'fetched' | 'revalidated' | 'changed' | 'stale' | 'kept';

/** What `keep` did with the upstream's content. */
export interface Kept<D> {
  doc: D;
  /** The upstream's content is the stored copy's (a 304, the same bytes, the same digest). */
  same: boolean;
}

/** One cached document as the revalidator sees it: `D` the stored copy, `A` the upstream's answer. */
export interface CachedCopy<D, A> {
  /** The stored copy, or null. */
  stored(): Promise<D | null>;
  /** True while the stored copy may be served without asking the upstream. */
  isFresh(doc: D, now: number): boolean;
  /** Asks the upstream about it (conditionally on `current`). Throws when it gave no usable answer. */
  ask(current: D | null): Promise<A>;
  /** Stores what the upstream answered; null when it says the document is gone (the stored copy is dropped). */
  keep(answer: A, current: D | null): Promise<Kept<D> | null>;
  /** Whether the answer says the upstream no longer has the document. */
  gone(answer: A): boolean;
  /**
   * `upstream_deletions = "keep"`: the stored copy, marked as kept after the upstream's delete
   * (the mark stays until the upstream's copy replaces it) and trusted for another TTL.
   */
  retain(current: D): Promise<Retained<D>>;
}

/** What `retain` did. */
export interface Retained<D> {
  doc: D;
  /** This call set the mark (it was not kept before): counted, and told once. */
  marked: boolean;
}

export interface Read<D> {
  doc: D;
  served: Served;
}

export interface RevalidatorOptions {
  counters?: CounterSink;
  health?: UpstreamState;
  now?: () => number;
  /** Serialises the refreshes of one key across the server's processes. */
  locks?: KeyLocks;
  /** The message of the failure when nothing is stored; `why` is the cause's message. */
  nothingCached?: (why: string) => string;
  /** What a stored copy the upstream deleted becomes (`upstream_deletions`); default `follow`. */
  deletions?: UpstreamDeletions;
}

export interface ReadOptions<D> {
  /** The stored copy as this request already read it (the read starts with it instead). */
  stored?: Promise<D | null>;
  /**
   * With `stored`: when (`Date.now()`) its read began. Without it the refresh reads the copy again
   * whatever happened since.
   */
  storedAt?: number;
  /** The project the counters count under, when the caller counts per project. */
  project?: string;
}

const NOTHING_CACHED = (why: string): string => `the upstream could not be reached and nothing is cached: ${why}`;

export class Revalidator<D> {
  readonly health: UpstreamState;
  readonly #counters: CounterSink;
  readonly #now: () => number;
  readonly #locks: KeyLocks | undefined;
  readonly #nothingCached: (why: string) => string;
  readonly #deletions: UpstreamDeletions;
  readonly #flights = new PromiseFlights<Read<D> | null>();
  /** Without `locks`: when this process's last refresh of each key ended. */
  readonly #refreshed = new RecentEnds();

  constructor(opts: RevalidatorOptions = {}) {
    this.health = opts.health ?? new UpstreamHealth();
    this.#counters = opts.counters ?? NO_COUNTERS;
    this.#now = opts.now ?? Date.now;
    this.#locks = opts.locks;
    this.#nothingCached = opts.nothingCached ?? NOTHING_CACHED;
    this.#deletions = opts.deletions ?? 'follow';
  }

  /** The document under `key`, stored or refreshed; null when the upstream says it is gone. */
  async read<A>(key: string, copy: CachedCopy<D, A>, opts: ReadOptions<D> = {}): Promise<Read<D> | null> {
    const { project } = opts;
    const lookedAt = opts.stored ? opts.storedAt : Date.now();
    const cached = await (opts.stored ?? copy.stored());
    const now = this.#now();
    if (cached && copy.isFresh(cached, now)) return { doc: cached, served: 'fresh' };
    if (cached && this.health.resting(now)) {
      this.#count('stale_served', project);
      return { doc: cached, served: 'stale' };
    }
    // The copy as read above, unless another refresh of the key ended since (then read again).
    const refresh = (readAgain: boolean) => this.#refresh(copy, project, readAgain ? undefined : { copy: cached });
    const locks = this.#locks;
    const read = await this.#flights.run(key, async () => {
      if (locks) return locks.run(`revalidate:${key}`, (grant) => refresh(grant.releasedSince), lookedAt);
      try {
        return await refresh(lookedAt === undefined || this.#refreshed.endedSince(key, lookedAt));
      } finally {
        this.#refreshed.ended(key);
      }
    });
    if (read?.served === 'stale') this.#count('stale_served', project);
    return read;
  }

  /** `known`: the stored copy as the caller read it, when no refresh of the key ended since. */
  async #refresh<A>(copy: CachedCopy<D, A>, project: string | undefined, known?: { copy: D | null }): Promise<Read<D> | null> {
    const current = known ? known.copy : await copy.stored();
    if (current && copy.isFresh(current, this.#now())) return { doc: current, served: 'fresh' };
    let answer: A;
    try {
      answer = await copy.ask(current);
    } catch (err) {
      return this.#failed(current, err, project);
    }
    this.health.up();
    if (current && this.#deletions === 'keep' && copy.gone(answer)) {
      const retained = await copy.retain(current);
      this.#count('refreshes', project);
      if (retained.marked) this.#count('kept_after_upstream_delete', project);
      return { doc: retained.doc, served: 'kept' };
    }
    const kept = await copy.keep(answer, current);
    if (!current) return kept && { doc: kept.doc, served: 'fetched' };
    this.#count('refreshes', project);
    if (kept?.same) return { doc: kept.doc, served: 'revalidated' };
    this.#count('changed', project);
    return kept && { doc: kept.doc, served: 'changed' };
  }

  #failed(current: D | null, err: unknown, project: string | undefined): Read<D> {
    // Our own concurrency cap said no: not an upstream failure, and the caller owes a 429.
    const slotDenied = err instanceof SlotsBusyError;
    if (!slotDenied) this.health.down(err, this.#now());
    if (current) return { doc: current, served: 'stale' };
    if (slotDenied) throw err;
    this.#count('upstream_errors', project);
    throw restated(err, this.#nothingCached(err instanceof Error ? err.message : String(err)));
  }

  #count(name: UsageCounter, project: string | undefined): void {
    if (project === undefined) this.#counters.add(name);
    else this.#counters.add(name, 1, project);
  }
}
