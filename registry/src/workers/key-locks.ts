/**
 * The fs store's per-key locks across the workers of one server: first this worker's own queue
 * (so it asks the primary once per key at a time), then the primary's lock for the key.
 */
import { ProcessKeyLocks, type KeyLocks } from '../storage/key-locks.js';
import type { WorkerLink } from './link.js';

export class WorkerKeyLocks implements KeyLocks {
  readonly #local = new ProcessKeyLocks();

  constructor(private readonly link: WorkerLink) {}

  run<R>(key: string, fn: () => Promise<R>): Promise<R> {
    return this.#local.run(key, async () => {
      const release = await this.link.lock(key);
      try {
        return await fn();
      } finally {
        release();
      }
    });
  }
}
