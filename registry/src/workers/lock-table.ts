/**
 * The primary's per-key locks for its workers: a queue per key whose head holds the lock. A worker
 * that exits lets go of what it held and leaves the queues it waited in, so a killed worker never
 * keeps a key locked.
 */
import { RecentEnds } from '../storage/recent-ends.js';

export interface Holder {
  worker: number;
  /** The worker's request id, which its `unlock` names. */
  id: number;
  /** When the worker last looked at what the lock guards (`LockGrant`). */
  since?: number;
}

export class LockTable {
  readonly #queues = new Map<string, Holder[]>();
  /** When each key's lock was last let go by its holder (bounded: recent-ends.ts). */
  readonly #released = new RecentEnds();
  /** Which key each (worker, id) asked for, to find it again on `unlock`. */
  readonly #keyOf = new Map<string, string>();

  /** Queues `holder` for `key`; true when it holds the lock at once. */
  request(key: string, holder: Holder): boolean {
    const queue = this.#queues.get(key);
    this.#keyOf.set(tag(holder), key);
    if (!queue) {
      this.#queues.set(key, [holder]);
      return true;
    }
    queue.push(holder);
    return false;
  }

  /** Lets go of `holder`'s lock (or its place in the queue); returns who holds the key now, if newly. */
  release(holder: Holder): Holder | undefined {
    const key = this.#keyOf.get(tag(holder));
    if (key === undefined) return undefined;
    this.#keyOf.delete(tag(holder));
    const queue = this.#queues.get(key)!;
    const wasHead = queue[0]?.worker === holder.worker && queue[0].id === holder.id;
    if (wasHead) this.#released.ended(key);
    const at = queue.findIndex((h) => h.worker === holder.worker && h.id === holder.id);
    queue.splice(at, 1);
    if (queue.length === 0) {
      this.#queues.delete(key);
      return undefined;
    }
    return wasHead ? queue[0] : undefined;
  }

  /** Whether a holder let go of `holder`'s key at or after its `since` (always true without one). */
  releasedSince(holder: Holder): boolean {
    const key = this.#keyOf.get(tag(holder));
    return holder.since === undefined || key === undefined || this.#released.endedSince(key, holder.since);
  }

  /** Everything `worker` held or waited for goes; returns the holders granted in its place. */
  dropWorker(worker: number): Holder[] {
    const granted: Holder[] = [];
    for (const t of [...this.#keyOf.keys()]) {
      const [w, id] = t.split(':').map(Number) as [number, number];
      if (w !== worker) continue;
      const next = this.release({ worker: w, id });
      if (next) granted.push(next);
    }
    // A holder granted here may itself belong to the dropped worker's queue entries already removed.
    return granted.filter((h) => h.worker !== worker);
  }

  /** Keys locked or waited for (for tests and the status of a stuck lock). */
  get size(): number {
    return this.#queues.size;
  }
}

function tag(h: Holder): string {
  return `${h.worker}:${h.id}`;
}
