/**
 * Bounds on what validation will read out of an uploaded archive, so that a small hostile file
 * (a zip or gzip bomb, millions of members) costs bounded memory and time.
 */
import { Transform, type TransformCallback } from 'node:stream';

/** Members of one archive. */
export const MAX_MEMBERS = 100_000;
/** A metadata file read into memory: METADATA, PKG-INFO, WHEEL, pyproject.toml. */
export const MAX_METADATA_BYTES = 16 * 1024 * 1024;
/** RECORD is read into memory too; it grows with the member count. */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;

const MIN_EXPANDED = 256 * 1024 * 1024;
const MAX_EXPANDED = 16 * 1024 * 1024 * 1024;
/** Expansion ratio beyond which an archive is treated as a bomb (ordinary code compresses ~5x). */
const MAX_RATIO = 200;

/** The most decompressed bytes an archive of `archiveSize` bytes may expand to. */
export function maxExpandedBytes(archiveSize: number): number {
  return Math.min(MAX_EXPANDED, Math.max(MIN_EXPANDED, archiveSize * MAX_RATIO));
}

/** Passes bytes through and fails with `tooMany()` as soon as more than `max` have passed. */
export class ByteLimit extends Transform {
  #seen = 0;
  constructor(
    private readonly max: number,
    private readonly tooMany: () => Error,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#seen += chunk.length;
    if (this.#seen > this.max) return done(this.tooMany());
    done(null, chunk);
  }
}
