/**
 * The fs store's per-key locks across the workers of one server: first this worker's own queue
 * (so it asks the primary once per key at a time), then the primary's lock for the key. The grant
 * says the lock was let go since the caller looked (`LockGrant`) when a holder in this worker, or
 * in another, let go of it since.
 */
import { ProcessKeyLocks, type KeyLocks, type LockGrant } from '../storage/key-locks.js';
import type { WorkerLink } from './link.js';

export class WorkerKeyLocks implements KeyLocks {
  readonly #local = new ProcessKeyLocks();

  constructor(private readonly link: WorkerLink) {}

  run<R>(key: string, fn: (grant: LockGrant) => Promise<R>, since?: number): Promise<R> {
    return this.#local.run(
      key,
      async (local) => {
        const held = await this.link.lock(key, since);
        try {
          return await fn({ releasedSince: local.releasedSince || held.releasedSince });
        } finally {
          held.release();
        }
      },
      since,
    );
  }
}
