/**
 * One runner at a time across every process and replica that shares the store, for background
 * work that must not run twice at once (a retention run): `runExclusive(name, fn)` runs `fn`
 * under a lease named `name`, or answers 'busy' when another live runner holds it.
 *
 * The protocol (MetaStore compare-and-swap, as the webhook outbox's claims):
 * 1. Read `lifecycle/exclusive/<name>`. A lease of another runner whose `until` is still ahead
 *    means busy. Otherwise (none, released, expired: its runner died or stalled) write this
 *    runner's lease against the version read; of several runners racing, exactly one write
 *    succeeds and the others get a conflict, which is busy too.
 * 2. While `fn` runs, renew the lease every third of its length, each write against the version
 *    the previous one wrote. A renewal that conflicts means another runner took the lease over
 *    (this one stalled past `until`): it is logged; `fn` is not stopped.
 * 3. When `fn` settles, write the lease released (`until` 0) against the last version; a
 *    conflict there means it was taken over and is left alone.
 *
 * The window that remains: a runner stalled for longer than the lease (a store that stopped
 * answering for a minute) may still be working when another takes over. The work run under it
 * must therefore stay correct when it overlaps (retention's deletes re-check before each change);
 * the lease only keeps runs from routinely doubling up. `until` is by the holder's clock: replica
 * clocks must agree to well within the lease length.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { ConflictError, type MetaStore } from '../storage/types.js';

export interface Exclusive {
  runExclusive<T>(name: string, fn: () => Promise<T>): Promise<T | 'busy'>;
}

interface LeaseDoc {
  /** `<host>:<pid>:<random>`, one per acquisition: opaque, for logs. */
  owner: string;
  /** Epoch ms; 0 once released. */
  until: number;
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
    const key = `lifecycle/exclusive/${name}`;
    const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    let version = await this.#acquire(key, owner);
    if (version === null) return 'busy';
    let lost = false;
    // Renewals run one after another: each writes against the version the previous one wrote.
    let renewing: Promise<void> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renewing.then(async () => {
        if (lost || version === null) return;
        try {
          version = await this.meta.put<LeaseDoc>(key, { owner, until: Date.now() + this.#leaseMs }, version);
        } catch (err) {
          if (!(err instanceof ConflictError)) return; // the store is not answering: the next renewal tries again
          lost = true;
          this.opts.onLost?.(name);
        }
      });
    }, Math.max(1, Math.floor(this.#leaseMs / 3)));
    timer.unref();
    try {
      return await fn();
    } finally {
      clearInterval(timer);
      await renewing;
      if (!lost && version !== null) {
        await this.meta.put<LeaseDoc>(key, { owner, until: 0 }, version).catch(() => undefined);
      }
    }
  }

  /** Writes this runner's lease; its version, or null when another live runner holds it. */
  async #acquire(key: string, owner: string): Promise<string | null> {
    const found = await this.meta.get<LeaseDoc>(key);
    if (found && found.doc.until > Date.now()) return null;
    try {
      return await this.meta.put<LeaseDoc>(key, { owner, until: Date.now() + this.#leaseMs }, found ? found.version : null);
    } catch (err) {
      if (err instanceof ConflictError) return null;
      throw err;
    }
  }
}
