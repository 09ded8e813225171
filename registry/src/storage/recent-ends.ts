/**
 * When the last flight of each key ended, for a while: what lets a new flight skip its `recheck`
 * of the store (roles/single-flight.ts). A caller that found nothing stored and then opens a
 * flight can have missed only bytes a flight published between its lookup and the open; when no
 * flight of the key ended since the lookup began, nothing was published meanwhile by this process
 * (or, in the primary's table, by the server's workers), and the recheck would only cost a store
 * round trip. Bytes another replica stores meanwhile were never caught by the recheck either (it
 * runs before the fetch, not during it): they are published again, identical, under the same key.
 *
 * Bounded: past `MAX_KEYS` the oldest end is forgotten, and any lookup that began before the
 * newest forgotten end is answered "maybe" (recheck). Ends are wall-clock times so that the
 * server's processes can compare them; `MARGIN_MS` absorbs a clock step.
 */

const MAX_KEYS = 4096;
const MARGIN_MS = 1000;

export class RecentEnds {
  readonly #endedAt = new Map<string, number>();
  #forgottenUpTo = -Infinity;

  constructor(private readonly maxKeys = MAX_KEYS) {}

  /** A flight of `key` ended now. */
  ended(key: string, at = Date.now()): void {
    this.#endedAt.delete(key);
    this.#endedAt.set(key, at);
    if (this.#endedAt.size <= this.maxKeys) return;
    const [oldest, when] = this.#endedAt.entries().next().value as [string, number];
    this.#endedAt.delete(oldest);
    this.#forgottenUpTo = Math.max(this.#forgottenUpTo, when);
  }

  /** Whether a flight of `key` may have ended at or after `since` (a lookup's start). */
  endedSince(key: string, since: number): boolean {
    const from = since - MARGIN_MS;
    return (this.#endedAt.get(key) ?? -Infinity) >= from || this.#forgottenUpTo >= from;
  }
}
