/**
 * The sizes of blobs this process has seen, by digest. A digest's bytes never change, so neither
 * does its size: with it known, a warm blob GET can ask the store for its hold and its bytes at
 * once (one round trip) instead of stat first. Whether the blob still exists and is still held is
 * never answered from here. Bounded, least recently used first out.
 */
import { ByteLru } from '../../storage/byte-lru.js';

const MAX_ENTRIES = 50_000;
/** What one entry costs, roughly (a 64-character key and a number): the budget counts entries. */
const ENTRY_BYTES = 128;

export type BlobSizes = ByteLru<number>;

export function blobSizes(): BlobSizes {
  return new ByteLru<number>(MAX_ENTRIES * ENTRY_BYTES, () => ENTRY_BYTES);
}
