/**
 * Serialises the writers of one key, so that a compare-and-swap (read the version, compare, write)
 * is exact. The fs MetaStore takes one: `ProcessKeyLocks` when it is the only process on its
 * store, or a lock that reaches across the worker processes of one server (`workers/`), which
 * every worker's store shares through its primary.
 */
import { RecentEnds } from './recent-ends.js';

/** What a holder learns as it takes a key's lock. */
export interface LockGrant {
  /**
   * A holder of the key's lock let go of it at or after the `since` given to `run` (always true
   * without one): what the lock guards may have changed since the caller last looked, so the
   * caller reads it again. Otherwise nobody under the lock changed it meanwhile.
   */
  releasedSince: boolean;
}

export interface KeyLocks {
  /**
   * Runs `fn` while no other holder of `key`'s lock runs; waiters go in arrival order. `since`
   * (`Date.now()`): when the caller last looked at what the lock guards (`LockGrant`).
   */
  run<R>(key: string, fn: (grant: LockGrant) => Promise<R>, since?: number): Promise<R>;
}

/** A lock per key inside this process: a promise chain per key, dropped when its tail finishes. */
export class ProcessKeyLocks implements KeyLocks {
  readonly #tails = new Map<string, Promise<unknown>>();
  /** When each key's lock was last let go (bounded: recent-ends.ts). */
  readonly #released = new RecentEnds();

  async run<R>(key: string, fn: (grant: LockGrant) => Promise<R>, since?: number): Promise<R> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const held = async (): Promise<R> => {
      try {
        return await fn({ releasedSince: since === undefined || this.#released.endedSince(key, since) });
      } finally {
        this.#released.ended(key);
      }
    };
    const run = previous.then(held, held);
    const tail = run.catch(() => undefined);
    this.#tails.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}
