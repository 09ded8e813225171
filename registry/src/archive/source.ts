/**
 * Where archive bytes come from: anything that can stream a byte range. Zip reading needs random
 * access (its index is at the end), tar reading needs one pass; both work from this.
 */
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { BlobStore, Sha256Hex } from '../storage/types.js';
import { ArchiveError } from './errors.js';

export interface ArchiveSource {
  readonly size: number;
  /** The bytes `start..end` (both inclusive), or all of them without a range. */
  open(range?: { start: number; end: number }): Promise<Readable>;
}

/** A blob of the store, read through ranged `get`s: nothing is loaded whole. Null when absent. */
export async function blobSource(store: BlobStore, digest: Sha256Hex): Promise<ArchiveSource | null> {
  const info = await store.stat(digest);
  if (!info) return null;
  return {
    size: info.size,
    async open(range) {
      const stream = await store.get(digest, range);
      if (!stream) throw new ArchiveError('not-found', `blob sha256:${digest} is no longer stored`);
      return stream;
    },
  };
}

export function fileSource(path: string, size: number): ArchiveSource {
  return {
    size,
    async open(range) {
      return createReadStream(path, range ? { start: range.start, end: range.end } : {});
    },
  };
}

export function bufferSource(bytes: Buffer): ArchiveSource {
  return {
    size: bytes.length,
    async open(range) {
      const part = range ? bytes.subarray(range.start, range.end + 1) : bytes;
      return Readable.from([part]);
    },
  };
}
