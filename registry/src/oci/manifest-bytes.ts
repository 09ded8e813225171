/**
 * Manifest bytes by digest, kept in memory. A manifest is at most 4 MiB and immutable under its
 * digest, so caching it is safe on any replica; which manifest a tag or repository names is still
 * read from the store on every request, so a deleted manifest stops being served at once.
 */
import { buffer } from 'node:stream/consumers';
import type { BlobStore } from '../storage/types.js';

/** Total bytes kept; the least recently used manifests go first. */
const MAX_TOTAL_BYTES = 64 * 1024 * 1024;

export class ManifestBytes {
  readonly #entries = new Map<string, Buffer>();
  #total = 0;

  constructor(private readonly blobs: BlobStore) {}

  /** Drops a manifest whose bytes were deleted. */
  forget(hex: string): void {
    const bytes = this.#entries.get(hex);
    if (!bytes) return;
    this.#entries.delete(hex);
    this.#total -= bytes.length;
  }

  /** The bytes of manifest `hex`, or null when the store has none. */
  async get(hex: string): Promise<Buffer | null> {
    const hit = this.#entries.get(hex);
    if (hit) {
      this.#entries.delete(hex);
      this.#entries.set(hex, hit);
      return hit;
    }
    const stream = await this.blobs.get(hex);
    if (!stream) return null;
    const bytes = await buffer(stream);
    this.#entries.set(hex, bytes);
    this.#total += bytes.length;
    for (const [key, value] of this.#entries) {
      if (this.#total <= MAX_TOTAL_BYTES) break;
      this.#entries.delete(key);
      this.#total -= value.length;
    }
    return bytes;
  }
}
