/**
 * A least-recently-used map bounded by the bytes of its values, for in-memory caches of immutable
 * content (bytes keyed by digest). A value larger than the whole budget is not kept.
 */
export class ByteLru<V> {
  /** Map iteration order is insertion order: a hit is re-inserted, so the first entry is the oldest. */
  readonly #entries = new Map<string, { value: V; bytes: number }>();
  #total = 0;

  constructor(
    readonly maxBytes: number,
    /** The bytes a value costs; Buffers cost their length. */
    private readonly sizeOf: (value: V) => number,
  ) {}

  /** Bytes held. */
  get bytes(): number {
    return this.#total;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The value for `key`, now the most recently used, or undefined. */
  get(key: string): V | undefined {
    const hit = this.#entries.get(key);
    if (!hit) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, hit);
    return hit.value;
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /** Keeps `value` as the most recently used, evicting the least recently used beyond the budget. */
  set(key: string, value: V): void {
    this.delete(key);
    const bytes = this.sizeOf(value);
    if (bytes > this.maxBytes) return;
    this.#entries.set(key, { value, bytes });
    this.#total += bytes;
    for (const [old, entry] of this.#entries) {
      if (this.#total <= this.maxBytes) break;
      this.#entries.delete(old);
      this.#total -= entry.bytes;
    }
  }

  delete(key: string): boolean {
    const entry = this.#entries.get(key);
    if (!entry) return false;
    this.#entries.delete(key);
    this.#total -= entry.bytes;
    return true;
  }
}
