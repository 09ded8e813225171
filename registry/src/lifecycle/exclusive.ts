/**
 * One runner at a time across every process and replica that shares the store, for background
 * work that must not run twice at once (a retention run): `runExclusive(name, fn)` runs `fn`
 * under the store's lease `name` (lease.ts, the collector's too), or answers 'busy' when another
 * live runner holds it. The lease is renewed every third of its length while `fn` runs and
 * released when `fn` settles.
 *
 * A renewal that finds the lease taken over (this runner stalled past its expiry) is told to
 * `onLost`; `fn` is not stopped. Work run under it must therefore stay correct when two runs
 * overlap (retention's deletes re-check before each change); the lease only keeps runs from
 * routinely doubling up. Expiry is by the holder's clock: replica clocks must agree to well
 * within the lease length.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { MetaStore } from '../storage/types.js';
import { Lease } from './lease.js';

export interface Exclusive {
  runExclusive<T>(name: string, fn: () => Promise<T>): Promise<T | 'busy'>;
}

/** A minute: a process killed mid-run holds the work up for at most this long. */
export const DEFAULT_LEASE_MS = 60_000;

export interface ExclusiveOptions {
  leaseMs?: number;
  /** Told when a renewal finds the lease taken over. */
  onLost?: (name: string) => void;
}

export class MetaStoreExclusive implements Exclusive {
  readonly #leaseMs: number;

  constructor(
    private readonly meta: MetaStore,
    private readonly opts: ExclusiveOptions = {},
  ) {
    this.#leaseMs = opts.leaseMs ?? DEFAULT_LEASE_MS;
  }

  async runExclusive<T>(name: string, fn: () => Promise<T>): Promise<T | 'busy'> {
    const lease = new Lease(this.meta, name, `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`, this.#leaseMs);
    if ((await lease.acquire()) !== null) return 'busy';
    // Renewals run one after another: each writes against the version the previous one wrote.
    let renewing: Promise<void> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renewing.then(async () => {
        if (!lease.held) return;
        try {
          if (!(await lease.renew())) this.opts.onLost?.(name);
        } catch {
          // The store is not answering: the next renewal tries again, the lease still runs.
        }
      });
    }, Math.max(1, Math.floor(this.#leaseMs / 3)));
    timer.unref();
    try {
      return await fn();
    } finally {
      clearInterval(timer);
      await renewing;
      await lease.release().catch(() => undefined);
    }
  }
}
