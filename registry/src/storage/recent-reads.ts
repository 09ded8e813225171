/**
 * `[storage] read_cache_ms`: the opt-in bounded staleness of request reads. Wraps a MetaStore so
 * that a `get(key, { recent: true })` is answered from this process's memory when the document
 * was read from the store (or written through this process) less than `boundMs` ago; any other
 * read goes to the store and refreshes the copy.
 *
 * What a client may see, and what it never sees:
 * - a change made through another process (a moved tag, a new upload, a deletion) is served by
 *   this one at most `boundMs` after it was acknowledged there; a change made through this one is
 *   seen by it at once (a write drops the copy, the next read goes to the store);
 * - a document is always one whole version the store held (documents are replaced whole), never
 *   a mix; reads that decide a write never use a copy (updateDoc reads without `recent`), so
 *   compare-and-swap and everything built on it are exact as without the setting.
 *
 * Copies are the store's own frozen documents, bounded in number (least recently used go first).
 */
import type { MetaStore, ReadOptions, Versioned } from './types.js';

/** Documents kept at once. */
const MAX_COPIES = 4096;

interface Copy {
  found: Versioned<unknown> | null;
  readAt: number;
}

export class RecentReads implements MetaStore {
  readonly #copies = new Map<string, Copy>();
  /**
   * Bumped by every write through this process: a read during which any write began keeps no copy,
   * so it cannot store an answer older than that write (writes are rare beside reads).
   */
  #writes = 0;

  constructor(
    private readonly inner: MetaStore,
    readonly boundMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  async get<T>(key: string, opts?: ReadOptions): Promise<Versioned<T> | null> {
    if (opts?.recent) {
      const copy = this.#copies.get(key);
      if (copy && this.now() - copy.readAt < this.boundMs) return copy.found as Versioned<T> | null;
    }
    const writesBefore = this.#writes;
    // The copy's age counts from before the read: the store's answer is at least that fresh.
    const readAt = this.now();
    const found = await this.inner.get<T>(key);
    if (this.#writes === writesBefore) this.#keep(key, { found, readAt });
    return found;
  }

  async put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string> {
    this.#forget(key);
    try {
      return await this.inner.put(key, doc, ifVersion);
    } finally {
      this.#forget(key);
    }
  }

  async delete(key: string, ifVersion?: string): Promise<boolean> {
    this.#forget(key);
    try {
      return await this.inner.delete(key, ifVersion);
    } finally {
      this.#forget(key);
    }
  }
  seen(key: string): Versioned<unknown> | null | undefined {
    return this.inner.seen?.(key);
  }


  list(prefix: string): AsyncIterable<string> {
    return this.inner.list(prefix);
  }

  #keep(key: string, copy: Copy): void {
    this.#copies.delete(key);
    this.#copies.set(key, copy);
    if (this.#copies.size > MAX_COPIES) this.#copies.delete(this.#copies.keys().next().value as string);
  }

  #forget(key: string): void {
    this.#copies.delete(key);
    this.#writes++;
  }
}
