/**
 * `[storage] peer_cache`: the processes that share an s3 store keep the documents their requests
 * read (tag maps, manifest records, pages, holds) in memory with no time bound, and each write
 * drops the copies of every process before it is acknowledged. A warm read then asks the store
 * nothing, and a write acknowledged by one process is still what any other serves on its next
 * request: the rule `read_cache_ms` gives up.
 *
 * - A read with `recent` is answered from a copy while this process may serve copies
 *   (`members.ts`: a member, past its join delay, within its lease, in the copy's epoch). Any other
 *   read goes to the store; the answer is kept only if no drop of any key came while it was read.
 * - A write (`put`, `delete`) goes to the store, then to every member's listener
 *   (`invalidation.ts`), and returns once each acknowledged. A member that does not answer within
 *   the timeout is removed from the members document, and the write returns a lease later, when
 *   that member can no longer serve a copy. So a write waits on a dead process once.
 * - Reads that decide a write never use a copy (updateDoc reads without `recent`), so
 *   compare-and-swap is exact as without the setting.
 *
 * Every process that writes to the store must run with the setting (a process without it drops
 * nobody's copies). The members document itself is read and written on the store directly.
 */
import type { MetaStore, ReadOptions, Versioned } from '../types.js';
import { ConflictError } from '../types.js';
import { InvalidationSender, listenForInvalidations, sharedPeerKey, type InvalidationListener } from './invalidation.js';
import { Membership, PEER_TIMING, type PeerTiming } from './members.js';

/** Documents kept at once. */
const MAX_COPIES = 4096;

/**
 * A copy older than this is read again, though no write dropped it. Not needed when every process
 * that writes runs with the setting; a safety net when one does not (a pod of the previous release
 * during a roll, a command run without it), whose writes drop nobody's copies: they are then
 * served at most this long.
 */
export const MAX_COPY_AGE_MS = 60_000;

interface Copy {
  found: Versioned<unknown> | null;
  epoch: number;
  readAt: number;
}

export interface PeerCacheOptions {
  /** The address other processes reach this one's listener at; null for a process that only writes. */
  host: string | null;
  /** The key requests are signed with; by default the store's own (`sharedPeerKey`). */
  signingKey?: Buffer;
  timing?: PeerTiming;
  /** A failed background read of the members document (the next one tries again). */
  onError?: (err: unknown) => void;
  /** This process was removed by a writer that could not reach it, and joined again. */
  onRemoved?: (url: string) => void;
  /** The monotonic clock, in ms (tests move it). */
  now?: () => number;
}

export class PeerCache implements MetaStore {
  readonly #copies = new Map<string, Copy>();
  /** Bumped by every drop: a read during which any key was dropped keeps no copy. */
  #drops = 0;
  readonly #sender: InvalidationSender;

  private constructor(
    private readonly inner: MetaStore,
    readonly membership: Membership,
    signingKey: Buffer,
    private readonly listener: InvalidationListener | null,
    private readonly now: () => number,
    private readonly onError: (err: unknown) => void,
  ) {
    this.#sender = new InvalidationSender(signingKey, membership.timing.invalidateTimeoutMs);
  }

  /** Starts the listener (a serving process), joins the members and begins reading the document. */
  static async open(inner: MetaStore, o: PeerCacheOptions): Promise<PeerCache> {
    const timing = o.timing ?? PEER_TIMING;
    const signingKey = o.signingKey ?? (await sharedPeerKey(inner));
    let cache: PeerCache | null = null;
    const listener = o.host === null ? null : await listenForInvalidations(o.host, signingKey, (keys) => cache?.drop(keys));
    const membership = new Membership(inner, listener?.url ?? null, { timing, ...(o.now ? { now: o.now } : {}), ...(o.onError ? { onError: o.onError } : {}), ...(o.onRemoved ? { onRemoved: o.onRemoved } : {}) });
    cache = new PeerCache(inner, membership, signingKey, listener, o.now ?? (() => performance.now()), o.onError ?? (() => undefined));
    try {
      await membership.start();
    } catch (err) {
      await listener?.close();
      throw err;
    }
    return cache;
  }

  async get<T>(key: string, opts?: ReadOptions): Promise<Versioned<T> | null> {
    const serving = this.membership.canServe();
    if (!serving && this.#copies.size > 0) this.#copies.clear();
    const epoch = this.membership.epoch;
    if (serving && opts?.recent) {
      const copy = this.#copies.get(key);
      if (copy && copy.epoch === epoch && this.now() - copy.readAt < MAX_COPY_AGE_MS) return copy.found as Versioned<T> | null;
    }
    const dropsBefore = this.#drops;
    const readAt = this.now();
    const found = await this.inner.get<T>(key);
    if (serving && this.#drops === dropsBefore && this.membership.epoch === epoch) this.#keep(key, { found, epoch, readAt });
    return found;
  }

  async put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string> {
    return this.#writing(key, () => this.inner.put(key, doc, ifVersion));
  }

  async delete(key: string, ifVersion?: string): Promise<boolean> {
    return this.#writing(key, () => this.inner.delete(key, ifVersion));
  }

  list(prefix: string): AsyncIterable<string> {
    return this.inner.list(prefix);
  }

  seen(key: string): Versioned<unknown> | null | undefined {
    return this.inner.seen?.(key);
  }

  /** Drops this process's copies of `keys` (a write here, or a member's invalidation). */
  drop(keys: readonly string[]): void {
    for (const key of keys) this.#copies.delete(key);
    this.#drops++;
  }

  /** Leaves the members and closes the listener. */
  async close(): Promise<void> {
    // A store that is down now cannot stop the shutdown: writers then wait this process out once.
    await this.membership.close().catch(this.onError);
    await this.listener?.close();
    this.#sender.close();
  }

  async #writing<R>(key: string, write: () => Promise<R>): Promise<R> {
    this.drop([key]);
    let result: R;
    try {
      result = await write();
    } catch (err) {
      // A conflict changed nothing. Any other failure may have landed: the copies go anyway.
      if (!(err instanceof ConflictError)) await this.#broadcast(key).catch(() => undefined);
      throw err;
    } finally {
      this.drop([key]);
    }
    await this.#broadcast(key);
    return result;
  }

  /** Every other member has dropped `key`, or can no longer serve a copy of it. */
  async #broadcast(key: string): Promise<void> {
    const others = await this.membership.others();
    const failed: string[] = [];
    await Promise.all(
      others.map((peer) =>
        this.#sender.send(peer.url, [key]).catch(() => {
          failed.push(peer.id);
        }),
      ),
    );
    if (failed.length === 0) return;
    for (const peer of others.filter((p) => failed.includes(p.id))) {
      this.onError(new Error(`could not reach the listener of another process at ${peer.url}: removed it from the members; this write waits ${this.membership.leaseWaitMs} ms for its lease to end`));
    }
    await Promise.all(failed.map((id) => this.membership.remove(id)));
    await new Promise((resolve) => setTimeout(resolve, this.membership.leaseWaitMs));
  }

  #keep(key: string, copy: Copy): void {
    this.#copies.delete(key);
    this.#copies.set(key, copy);
    if (this.#copies.size > MAX_COPIES) this.#copies.delete(this.#copies.keys().next().value as string);
  }
}
