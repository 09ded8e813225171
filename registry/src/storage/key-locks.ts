/**
 * Serialises the writers of one key, so that a compare-and-swap (read the version, compare, write)
 * is exact. The fs MetaStore takes one: `ProcessKeyLocks` when it is the only process on its
 * store, or a lock that reaches across the worker processes of one server (`workers/`), which
 * every worker's store shares through its primary.
 */
export interface KeyLocks {
  /** Runs `fn` while no other holder of `key`'s lock runs; waiters go in arrival order. */
  run<R>(key: string, fn: () => Promise<R>): Promise<R>;
}

/** A lock per key inside this process: a promise chain per key, dropped when its tail finishes. */
export class ProcessKeyLocks implements KeyLocks {
  readonly #tails = new Map<string, Promise<unknown>>();

  async run<R>(key: string, fn: () => Promise<R>): Promise<R> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.#tails.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}
