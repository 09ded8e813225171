/**
 * The durable outbox: one MetaStore document per pending delivery under `events/outbox/<id>`,
 * and the deliveries that were given up under `events/dead/<id>` (kept for inspection).
 *
 * Every process on a shared store sees every pending delivery, so a delivery is sent only by the
 * process that claims it: `claim` writes a lease (owner, until) into the document with
 * compare-and-swap against the version it read, and exactly one of several concurrent claimers
 * succeeds. The claimer then finishes with writes conditional on the version its claim wrote:
 * `finish` (delivered: the document goes), `release` (failed: the retry time is stored and the
 * lease dropped), `bury` (given up). A process that dies mid-delivery leaves its lease to expire
 * (`LEASE_MS`), and the next claimer after that sends it again.
 *
 * Remaining window: a claimer that outlives its lease (a store write stalled for longer than the
 * spare time) may deliver while another process has taken over, so the receiver gets the event
 * twice; its own final write then conflicts and is logged. Receivers dedupe by
 * `X-Velodex-Delivery` (the id stays the same across attempts).
 */
import { ConflictError, type MetaStore } from '../storage/types.js';
import type { StoredDelivery } from './types.js';

const OUTBOX = 'events/outbox';
const DEAD = 'events/dead';

/** A delivery this process holds the lease of: `version` is what its claim wrote. */
export interface Claimed {
  delivery: StoredDelivery;
  version: string;
}

export type ClaimResult =
  | { kind: 'claimed'; claimed: Claimed }
  /** Not due yet, or leased by another process: look again at `at` (epoch ms). */
  | { kind: 'later'; at: number }
  /** Delivered or given up (by any process). */
  | { kind: 'gone' };

/** After a lost claim race, the winner's lease is read back this soon. */
const RECHECK_AFTER_CONFLICT_MS = 1_000;

export class Outbox {
  constructor(private readonly meta: MetaStore) {}

  async add(d: StoredDelivery): Promise<void> {
    await this.meta.put(key(d.id), d, null);
  }

  /**
   * Claims a due delivery for `owner` until `now + leaseMs`, unless another live lease holds it.
   * `othersLeases: 'ignore'` is for a store no other process shares: a lease of another owner can
   * only be left by an earlier run of this one, killed mid-delivery, and is not waited for.
   */
  async claim(id: string, owner: string, now: number, leaseMs: number, othersLeases: 'honour' | 'ignore' = 'honour'): Promise<ClaimResult> {
    const found = await this.meta.get<StoredDelivery>(key(id));
    if (!found) return { kind: 'gone' };
    const d = found.doc;
    if (d.nextAttemptAt > now) return { kind: 'later', at: d.nextAttemptAt };
    if (othersLeases === 'honour' && d.lease && d.lease.owner !== owner && d.lease.until > now) return { kind: 'later', at: d.lease.until };
    const leased: StoredDelivery = { ...d, lease: { owner, until: now + leaseMs } };
    try {
      return { kind: 'claimed', claimed: { delivery: leased, version: await this.meta.put(key(id), leased, found.version) } };
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      return { kind: 'later', at: now + RECHECK_AFTER_CONFLICT_MS };
    }
  }

  /** Delivered: removes the document. False when the lease had been taken over meanwhile. */
  async finish(c: Claimed): Promise<boolean> {
    if (!(await this.#deleteIfStill(c))) return false;
    // On S3 the conditional delete leaves an empty tombstone; ids are never reused, so nothing
    // can have been written there since and the tombstone can go unconditionally.
    await this.meta.delete(key(c.delivery.id));
    return true;
  }

  /** Failed: stores `next` (the retry time, the error) without a lease. False when taken over. */
  async release(c: Claimed, next: StoredDelivery): Promise<boolean> {
    const { lease: _dropped, ...unleased } = next;
    try {
      await this.meta.put(key(c.delivery.id), unleased, c.version);
      return true;
    } catch (err) {
      if (err instanceof ConflictError) return false;
      throw err;
    }
  }

  /**
   * Moves a delivery to the dead letters: written there first, so a crash never loses it. False
   * when the lease had been taken over (the dead letter stays, the other claimer carries on).
   */
  async bury(c: Claimed, d: StoredDelivery): Promise<boolean> {
    const { lease: _dropped, ...dead } = d;
    await this.meta.put(`${DEAD}/${d.id}`, dead);
    return this.finish(c);
  }

  /** Ids of every pending delivery (one listing; the dispatcher's start and rescans). */
  async *pendingIds(): AsyncIterable<string> {
    for await (const k of this.meta.list(OUTBOX)) yield k.slice(OUTBOX.length + 1);
  }

  /** Deletes the document if it is still what the claim wrote; false when changed or gone. */
  async #deleteIfStill(c: Claimed): Promise<boolean> {
    try {
      return await this.meta.delete(key(c.delivery.id), c.version);
    } catch (err) {
      if (err instanceof ConflictError) return false;
      throw err;
    }
  }
}

function key(id: string): string {
  return `${OUTBOX}/${id}`;
}
