/**
 * Runs collections (`collect.ts`) one at a time across every process and replica sharing the
 * store: a real run takes the `gc` lease (`lease.ts`) and renews it every third of its time while
 * it runs; a run that finds the lease held gives up with `CollectionBusyError`. A dry run only
 * reads, so it takes no lease. A run whose renewal fails (the lease expired during a stall and
 * another process took it) stops before its next change: safety never rests on the lease (every
 * change of a collection is conditional on what it read), it only saves running twice.
 */
import type { MetaStore } from '../storage/types.js';
import { collect, type CollectionReport, type CollectionStores } from './collect.js';
import { Lease, type LeaseDoc } from './lease.js';
import type { HoldsMarker } from './marks.js';
import type { LastCollection, UsageLedger } from './usage/ledger.js';
import { CountReads } from './usage/count.js';

export interface CollectorOptions {
  stores: CollectionStores & { meta: MetaStore };
  markers: readonly HoldsMarker[];
  graceMs: number;
  /** How long the lease lasts without renewal: how long a killed run blocks the next one. */
  leaseMs: number;
  /** This process, as the lease names its holder. */
  owner: string;
  now?: () => number;
  /** Awaited after each deletion of bytes (`collect`'s test hook), and how many documents are judged at once. */
  afterDelete?: (deleted: number) => Promise<void>;
  atOnce?: number;
  /** The share of one core a run may use (pace.ts); absent: as fast as it can. */
  cpuShare?: number;
  /** Where a real run's exact count and its outcome are recorded (lifecycle/usage/). */
  usage?: Pick<UsageLedger, 'beginCount' | 'recount' | 'recordCollection'>;
}

/** Another process holds the lease: a collection is running there. */
export class CollectionBusyError extends Error {
  constructor(readonly lease: LeaseDoc) {
    super(`another collection is running (${lease.owner}, its lease runs until ${new Date(lease.expiresAt).toISOString()})`);
    this.name = 'CollectionBusyError';
  }
}

/** This run's lease expired and was taken over: it stopped. */
export class LeaseLostError extends Error {
  constructor() {
    super('the collection lost its lease (it stalled longer than the lease time) and stopped; the next run goes on');
    this.name = 'LeaseLostError';
  }
}

export class GarbageCollector {
  constructor(private readonly opts: CollectorOptions) {}

  get graceMs(): number {
    return this.opts.graceMs;
  }

  async run({ dryRun = false }: { dryRun?: boolean } = {}): Promise<CollectionReport> {
    const { stores, markers, graceMs, now } = this.opts;
    if (dryRun) return collect(stores, markers, { graceMs, ...(now ? { now } : {}), ...this.#pace(), dryRun: true });
    const usage = this.opts.usage;
    const ended = (): string => new Date((now ?? Date.now)()).toISOString();
    const reads = new CountReads();
    let report: CollectionReport;
    try {
      report = await this.#leased(false, reads);
    } catch (err) {
      if (!(err instanceof CollectionBusyError)) {
        const error = err instanceof Error ? err.message : String(err);
        await usage?.recordCollection({ endedAt: ended(), result: 'failed', blobsDeleted: 0, bytesDeleted: 0, error }).catch(() => undefined);
      }
      throw err;
    }
    const last: LastCollection = { endedAt: ended(), result: 'ok', blobsDeleted: report.blobsDeleted, bytesDeleted: report.bytesDeleted };
    // Not recorded (the store away): the figures stay as the writes keep them until the next count.
    await usage?.recount(report.stored, reads, last).catch(() => undefined);
    return report;
  }

  /**
   * Counts what each index holds without changing anything (a dry run under the lease, so it does
   * not run beside a collection) and records the figures: for a store no collection counted yet.
   */
  async count(): Promise<CollectionReport> {
    // A grace period no hold or blob is older than: the figures are what is held now, not what a
    // collection would leave.
    const reads = new CountReads();
    const report = await this.#leased(true, reads, Number.MAX_SAFE_INTEGER);
    await this.opts.usage?.recount(report.stored, reads);
    return report;
  }

  #pace(): { cpuShare?: number } {
    return this.opts.cpuShare !== undefined ? { cpuShare: this.opts.cpuShare } : {};
  }

  /** A run under the lease; its count's changes meanwhile are journalled from its start (usage/ledger.ts). */
  async #leased(dryRun: boolean, reads: CountReads, graceMs = this.opts.graceMs): Promise<CollectionReport> {
    const { stores, markers, now } = this.opts;
    const base = { graceMs, ...(now ? { now } : {}), ...this.#pace() };
    const lease = new Lease(stores.meta, 'gc', this.opts.owner, this.opts.leaseMs, now);
    const other = await lease.acquire();
    if (other) throw new CollectionBusyError(other);
    let lost = false;
    const renewal = setInterval(() => {
      lease.renew().then(
        (ok) => (lost ||= !ok),
        // A store that did not answer: tried again at the next turn, the lease still runs.
        () => undefined,
      );
    }, Math.max(50, this.opts.leaseMs / 3));
    renewal.unref();
    try {
      await this.opts.usage?.beginCount();
      return await collect(stores, markers, {
        ...base,
        dryRun,
        reads,
        check: () => {
          if (lost) throw new LeaseLostError();
        },
        ...(this.opts.afterDelete ? { afterDelete: this.opts.afterDelete } : {}),
        ...(this.opts.atOnce ? { atOnce: this.opts.atOnce } : {}),
      });
    } finally {
      clearInterval(renewal);
      await lease.release().catch(() => undefined);
    }
  }
}
