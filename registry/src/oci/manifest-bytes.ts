/**
 * Manifest bytes by digest, kept in memory. A manifest is at most 4 MiB and immutable under its
 * digest, so caching it is safe on any replica; which manifest a tag or repository names is still
 * read from the store on every request, so a deleted manifest stops being served at once.
 */
import { buffer } from 'node:stream/consumers';
import { ByteLru } from '../storage/byte-lru.js';
import type { BlobStore } from '../storage/types.js';

/** Total bytes kept; the least recently used manifests go first. */
const MAX_TOTAL_BYTES = 64 * 1024 * 1024;

export class ManifestBytes {
  readonly #cache = new ByteLru<Buffer>(MAX_TOTAL_BYTES, (bytes) => bytes.length);

  constructor(private readonly blobs: BlobStore) {}

  /** Drops a manifest whose bytes were deleted. */
  forget(hex: string): void {
    this.#cache.delete(hex);
  }

  /** The bytes of manifest `hex`, or null when the store has none. */
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
