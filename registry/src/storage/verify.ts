/**
 * Bytes checked against their digest while they pass through: `verifying(source, expected)`
 * hashes each chunk on its way and holds the last one back until the end. When the source ends
 * and the digest matches, the held chunk goes out and the stream ends; when it does not, the
 * stream errors with `DigestMismatchError` instead, so a consumer that knows the length (an HTTP
 * client given Content-Length) sees a broken transfer, never a complete-looking wrong body.
 *
 * Only whole reads can be verified: a range of a blob has no digest of its own, so ranged reads
 * pass through unchecked (the stores say so where they serve them).
 *
 * The cost is one sha256 pass over the bytes, about 1 ms per MiB on one core: as much as serving
 * the bytes from a file costs. So a store remembers, per process, which stored versions it has
 * verified whole (`VerifiedVersions`: the fs backend's file identity and mtime, the s3 backend's
 * ETag) and streams those unhashed: every blob is verified on its first whole read, and again
 * whenever what is stored under its digest changed; a change that keeps the version (bits rotting
 * under an unchanged mtime) is found by the next process that reads it.
 */
import { createHash } from 'node:crypto';
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { DigestMismatchError, type Sha256Hex } from './types.js';

/** `source`, verified against `expected` on its way through; `onVerified` runs once it matched. */
export function verifying(source: Readable, expected: Sha256Hex, onVerified?: () => void): Readable {
  const check = new DigestCheck(expected, onVerified);
  // pipeline: a source failure errors the check, and a consumer that gives up destroys the source.
  return pipeline(source, check, () => undefined);
}

class DigestCheck extends Transform {
  readonly #hash = createHash('sha256');
  #held: Buffer | undefined;

  constructor(
    private readonly expected: Sha256Hex,
    private readonly onVerified: (() => void) | undefined,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#hash.update(chunk);
    const out = this.#held;
    this.#held = chunk;
    done(null, out);
  }

  override _flush(done: TransformCallback): void {
    const actual = this.#hash.digest('hex');
    if (actual !== this.expected) {
      done(new DigestMismatchError(this.expected, actual));
      return;
    }
    this.onVerified?.();
    done(null, this.#held);
  }
}

/** Entries kept; the oldest go first. A forgotten blob is only hashed once more. */
const MAX_REMEMBERED = 100_000;

/** Which stored version of each blob this process has read whole and found matching its digest. */
export class VerifiedVersions {
  readonly #versions = new Map<Sha256Hex, string>();

  constructor(private readonly max = MAX_REMEMBERED) {}

  has(digest: Sha256Hex, version: string): boolean {
    return this.#versions.get(digest) === version;
  }

  add(digest: Sha256Hex, version: string): void {
    this.#versions.delete(digest);
    this.#versions.set(digest, version);
    if (this.#versions.size > this.max) {
      const oldest = this.#versions.keys().next().value;
      if (oldest !== undefined) this.#versions.delete(oldest);
    }
  }

  /** Reads `source` (a whole read of `digest` as stored in `version`), verified unless that version already was. */
  read(source: Readable, digest: Sha256Hex, version: string | undefined): Readable {
    if (version === undefined) return verifying(source, digest);
    if (this.has(digest, version)) return source;
    return verifying(source, digest, () => this.add(digest, version));
  }
}
