/**
 * `BlobStore.put` for any backend: a one-shot staged write. Every backend stages the same way
 * (stream in while hashing, commit under the verified digest), so `put` is the stage's own steps.
 */
import type { Readable } from 'node:stream';
import type { BlobInfo, BlobStage, Sha256Hex, StageOptions } from './types.js';

export async function putByStage(store: { stage(opts?: StageOptions): Promise<BlobStage> }, source: Readable, expected?: Sha256Hex): Promise<BlobInfo> {
  // A known digest lets a backend write straight to the blob's place (StageOptions.expected).
  const stage = await store.stage({ expected });
  try {
    await stage.append(source);
    return await stage.commit(expected);
  } finally {
    // Harmless after a commit; discards the bytes of a failed one.
    await stage.abort();
  }
}
