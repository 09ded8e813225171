/**
 * Who keeps copies of documents under `[storage] peer_cache` (`peer-cache.ts`): one document of
 * the shared store, `peers/members`, names each serving process and the URL of its invalidation
 * listener. Every process reads it once a `refreshMs`; a writer sends its invalidations to every
 * process it names.
 *
 * The rules that make an acknowledged write visible on every process's next request, with
 * durations on each process's own monotonic clock (no two clocks are compared):
 *
 * - **A lease.** A member may answer from its copies only until `leaseMs` after it *sent* the
 *   last read of this document that still named it. A writer that cannot reach a member removes
 *   it from the document and then waits `leaseMs` (and a margin) before it acknowledges: any read
 *   that still named the member was sent before the removal, so by then the member has stopped.
 *   A removed member notices on its next read, drops every copy and joins again under a new id.
 * - **Joining.** A writer broadcasts to the members of a read it sent at most `listMaxAgeMs`
 *   before (it reads again first when its last one is older). A new member keeps no copy until
 *   `listMaxAgeMs` (and a margin) after its join was stored: every broadcast from then on comes
 *   from a read that names it.
 * - **Epochs.** Each join starts a new epoch; a copy kept in an earlier one is never served.
 *
 * A process that only writes (`velodex gc`, `velodex retention`) reads the document and never joins.
 */
import { randomUUID } from 'node:crypto';
import { updateDoc } from '../update.js';
import type { MetaStore } from '../types.js';

export const MEMBERS_KEY = 'peers/members';

export interface MemberEntry {
  /** Where its invalidation listener is: `http://<host>:<port>`. */
  url: string;
  /** When it joined (wall clock, ISO 8601): for people reading the document. */
  joined: string;
}

export interface MembersDoc {
  members: Record<string, MemberEntry>;
}

export interface PeerTiming {
  /** How often every process reads the members document. */
  refreshMs: number;
  /** How long after a read that named it a member may answer from its copies. */
  leaseMs: number;
  /** The oldest read of the document a writer broadcasts from. */
  listMaxAgeMs: number;
  /** How long a writer waits for a member's acknowledgement before it removes the member. */
  invalidateTimeoutMs: number;
}

export const PEER_TIMING: PeerTiming = Object.freeze({ refreshMs: 1_000, leaseMs: 4_000, listMaxAgeMs: 2_500, invalidateTimeoutMs: 1_000 });

/** Added to every wait of these rules: clocks of two machines may run at slightly different rates. */
export function safetyMarginMs(durationMs: number): number {
  return Math.ceil(durationMs * 0.1) + 100;
}

export interface Peer {
  id: string;
  url: string;
}

export interface MembershipOptions {
  timing?: PeerTiming;
  /** The monotonic clock, in ms. */
  now?: () => number;
  /** A failed background read of the document (the next one tries again). */
  onError?: (err: unknown) => void;
  /** This process was removed by a writer that could not reach it (it joins again). */
  onRemoved?: (url: string) => void;
}

interface Snapshot {
  sentAt: number;
  peers: Peer[];
}

export class Membership {
  #id: string | null = null;
  #epoch = 0;
  #validUntil = Number.NEGATIVE_INFINITY;
  #cachingFrom = Number.POSITIVE_INFINITY;
  #snapshot: Snapshot | null = null;
  #refreshing: Promise<Snapshot> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  #removed = 0;
  readonly timing: PeerTiming;
  private readonly now: () => number;
  private readonly onError: (err: unknown) => void;
  private readonly onRemoved: (url: string) => void;

  /**
   * `meta`: the shared store itself (never a caching wrapper). `url`: this process's listener, or
   * null for a process that only writes.
   */
  constructor(
    private readonly meta: MetaStore,
    private readonly url: string | null,
    o: MembershipOptions = {},
  ) {
    this.timing = o.timing ?? PEER_TIMING;
    this.now = o.now ?? (() => performance.now());
    this.onError = o.onError ?? (() => undefined);
    this.onRemoved = o.onRemoved ?? (() => undefined);
  }

  /** Joins (a serving process) and starts reading the document every `refreshMs`. */
  async start(): Promise<void> {
    if (this.url !== null) await this.#join();
    else await this.refresh();
    this.#timer = setInterval(() => {
      this.refresh().catch(this.onError);
    }, this.timing.refreshMs);
    this.#timer.unref();
  }

  /** This process's id while it is a member. */
  get id(): string | null {
    return this.#id;
  }

  /** Bumped by every join: copies kept in an earlier epoch are never served. */
  get epoch(): number {
    return this.#epoch;
  }

  /** For `/+status`: what the last read of the document named, and how often this process was removed. */
  status(): { serving: boolean; members: number; removed: number } {
    return { serving: this.canServe(), members: this.#snapshot?.peers.length ?? 0, removed: this.#removed };
  }

  /** Whether this process may answer a read from its copies now. */
  canServe(): boolean {
    const now = this.now();
    return !this.#closed && this.#id !== null && now >= this.#cachingFrom && now < this.#validUntil;
  }

  /** The other members, from a read sent at most `listMaxAgeMs` ago (read again if needed). */
  async others(): Promise<Peer[]> {
    const snap = this.#snapshot;
    const fresh = snap !== null && this.now() - snap.sentAt <= this.timing.listMaxAgeMs ? snap : await this.refresh();
    return fresh.peers.filter((p) => p.id !== this.#id);
  }

  /** Reads the document: the list writers broadcast to, and (a member) its lease. */
  refresh(): Promise<Snapshot> {
    this.#refreshing ??= this.#read().finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #read(): Promise<Snapshot> {
    const sentAt = this.now();
    const found = await this.meta.get<MembersDoc>(MEMBERS_KEY);
    const members = found?.doc.members ?? {};
    const snap = { sentAt, peers: Object.entries(members).map(([id, m]) => ({ id, url: m.url })) };
    if (this.#snapshot === null || sentAt >= this.#snapshot.sentAt) this.#snapshot = snap;
    const id = this.#id;
    if (id !== null && !this.#closed) {
      if (members[id]) this.#validUntil = Math.max(this.#validUntil, sentAt + this.timing.leaseMs);
      else await this.#rejoin(id);
    }
    return snap;
  }

  /** Removed by a writer that could not reach it: no copy of the old epoch is served again. */
  async #rejoin(lost: string): Promise<void> {
    if (this.#id !== lost) return;
    this.#id = null;
    this.#validUntil = Number.NEGATIVE_INFINITY;
    this.#removed++;
    if (this.url !== null) this.onRemoved(this.url);
    await this.#join();
  }

  async #join(): Promise<void> {
    const id = randomUUID();
    const url = this.url;
    if (url === null) return;
    const sentAt = this.now();
    await updateDoc<MembersDoc>(this.meta, MEMBERS_KEY, (current) => ({
      members: { ...(current?.members ?? {}), [id]: { url, joined: new Date().toISOString() } },
    }));
    this.#epoch++;
    this.#id = id;
    this.#validUntil = sentAt + this.timing.leaseMs;
    this.#cachingFrom = this.now() + this.timing.listMaxAgeMs + safetyMarginMs(this.timing.listMaxAgeMs);
  }

  /**
   * Removes `id` (a member a writer could not reach). Resolves once no read of the document that
   * names it can be sent any more: the caller then waits the lease out (`leaseWaitMs`).
   */
  async remove(id: string): Promise<void> {
    await updateDoc<MembersDoc>(this.meta, MEMBERS_KEY, (current) => {
      if (!current?.members[id]) return undefined;
      const { [id]: _gone, ...rest } = current.members;
      return { members: rest };
    });
    if (this.#snapshot) this.#snapshot = { ...this.#snapshot, peers: this.#snapshot.peers.filter((p) => p.id !== id) };
  }

  /** How long a writer waits after removing a member before it may acknowledge. */
  get leaseWaitMs(): number {
    return this.timing.leaseMs + safetyMarginMs(this.timing.leaseMs);
  }

  /** Stops reading and leaves the document, so no writer waits on this process. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    const id = this.#id;
    this.#id = null;
    if (id !== null) await this.remove(id);
  }
}
