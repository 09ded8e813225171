/**
 * The sizes of blobs this process has seen, by digest. A digest's bytes never change, so neither
 * does its size: with it known, a warm blob GET can ask the store for its hold and its bytes at
 * once (one round trip) instead of stat first. Whether the blob still exists and is still held is
 * never answered from here. Bounded: the oldest entries go first.
 */
const MAX_ENTRIES = 50_000;

export class BlobSizes {
  readonly #sizes = new Map<string, number>();

  get(hex: string): number | undefined {
    return this.#sizes.get(hex);
  }

  set(hex: string, size: number): void {
    if (this.#sizes.has(hex)) return;
    if (this.#sizes.size >= MAX_ENTRIES) {
      const oldest = this.#sizes.keys().next().value;
      if (oldest !== undefined) this.#sizes.delete(oldest);
    }
    this.#sizes.set(hex, size);
  }
}
