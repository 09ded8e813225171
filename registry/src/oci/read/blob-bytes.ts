/**
 * The bytes of manifests and of small blobs (config blobs, signatures, small layers) by digest,
 * kept in memory, so a warm GET of one reads no file. A manifest is at most 4 MiB, a small blob at
 * most `SMALL_BLOB_BYTES`, and both are immutable under their digest, so caching them is safe on
 * any replica; whether the index still holds the digest (and which manifest a tag names) is read
 * from the store on every request, so deleted content stops being served at once.
 */
import { buffer } from 'node:stream/consumers';
import { ByteLru } from '../../storage/byte-lru.js';
import type { BlobStore } from '../../storage/types.js';

/** Total bytes kept; the least recently used go first. */
const MAX_TOTAL_BYTES = 64 * 1024 * 1024;

/** Blobs up to this size are kept whole in memory once read (larger ones always stream). */
export const SMALL_BLOB_BYTES = 64 * 1024;

export class BlobBytes {
  readonly #cache = new ByteLru<Buffer>(MAX_TOTAL_BYTES, (bytes) => bytes.length);

  constructor(private readonly blobs: BlobStore) {}

  /** Drops content whose bytes were deleted. */
  forget(hex: string): void {
    this.#cache.delete(hex);
  }

  /**
   * The bytes of `hex`, or null when the store has none. Read whole (verified on the way, as
   * every whole read of the store is): callers ask only for manifests and small blobs.
   */
  async get(hex: string): Promise<Buffer | null> {
    const hit = this.#cache.get(hex);
    if (hit) return hit;
    const stream = await this.blobs.get(hex);
    if (!stream) return null;
    const bytes = await buffer(stream);
    this.#cache.set(hex, bytes);
    return bytes;
  }
}
