/**
 * Counts what a request costs the store: wraps the `Stores` of a server so that every MetaStore
 * and BlobStore call is tallied, and so are the round trips, the calls a request waits for one
 * after another. A call is one round trip later than the latest call that had finished when it
 * started (it may have waited for that one); calls started before any of them finished (issued
 * together, as a `Promise.all` issues them) share a round trip. `rounds` is the longest such
 * chain since the last reset: exact for one request at a time, an upper bound otherwise. For the
 * suites that assert how many store calls a warm request makes, and for the bench ("filesystem
 * calls per warm request"); the server itself never wraps its stores.
 *
 * A blob read counts its open (the `get` promise), not the bytes streamed after it.
 */
import { BlobHolds } from './holds.js';
import type { Stores } from './index.js';
import type { BlobStore, MetaStore } from './types.js';

export interface StoreCalls {
  /** Calls by name (`meta.get`, `blobs.stat`, ...). */
  readonly calls: Record<string, number>;
  /** Every call. */
  readonly total: number;
  /** Round trips: the longest chain of calls each started after the one before had finished. */
  readonly rounds: number;
}

export class StoreCallCounter {
  #calls: Record<string, number> = {};
  #total = 0;
  #rounds = 0;
  /** The round trip of the latest-numbered call that has finished. */
  #finished = 0;
  /** Bumped by `reset`: a call that began before it (a write still finishing) counts for nothing after. */
  #generation = 0;

  /** What was counted since the last `reset`. */
  snapshot(): StoreCalls {
    return { calls: { ...this.#calls }, total: this.#total, rounds: this.#rounds };
  }

  reset(): void {
    this.#calls = {};
    this.#total = 0;
    this.#rounds = 0;
    this.#finished = 0;
    this.#generation += 1;
  }

  /** Counts one call of `name` from now until `call` settles. */
  track<R>(name: string, call: () => Promise<R>): Promise<R> {
    this.#calls[name] = (this.#calls[name] ?? 0) + 1;
    this.#total += 1;
    const generation = this.#generation;
    const round = this.#finished + 1;
    this.#rounds = Math.max(this.#rounds, round);
    let run: Promise<R>;
    try {
      run = call();
    } catch (err) {
      run = Promise.reject(err as Error);
    }
    return run.finally(() => {
      if (generation === this.#generation) this.#finished = Math.max(this.#finished, round);
    });
  }
}

/** `stores` with every MetaStore and BlobStore call counted by `counter`. */
export function countedStores(stores: Stores, counter: StoreCallCounter): Stores {
  const meta = countedMeta(stores.meta, counter);
  const blobs = countedBlobs(stores.blobs, counter);
  // Holds read and write through the counted stores too (staged uploads keep the raw ones).
  return { ...stores, meta, blobs, holds: new BlobHolds(meta, blobs) };
}

function countedMeta(meta: MetaStore, counter: StoreCallCounter): MetaStore {
  return {
    get: (key, opts) => counter.track('meta.get', () => meta.get(key, opts)),
    put: (key, doc, ifVersion) => counter.track('meta.put', () => meta.put(key, doc, ifVersion)),
    delete: (key, ifVersion) => counter.track('meta.delete', () => meta.delete(key, ifVersion)),
    list: (prefix) => {
      // A listing is one call however many pages it takes; counted when it is started.
      void counter.track('meta.list', () => Promise.resolve());
      return meta.list(prefix);
    },
    // Asks the store nothing: not a call.
    seen: (key) => meta.seen?.(key),
  };
}

function countedBlobs(blobs: BlobStore, counter: StoreCallCounter): BlobStore {
  return {
    put: (source, expected) => counter.track('blobs.put', () => blobs.put(source, expected)),
    stage: (opts) => counter.track('blobs.stage', () => blobs.stage(opts)),
    get: (digest, range) => counter.track('blobs.get', () => blobs.get(digest, range)),
    stat: (digest) => counter.track('blobs.stat', () => blobs.stat(digest)),
    delete: (digest) => counter.track('blobs.delete', () => blobs.delete(digest)),
    list: () => {
      // As a MetaStore listing: one call however many pages it takes.
      void counter.track('blobs.list', () => Promise.resolve());
      return blobs.list();
    },
  };
}
