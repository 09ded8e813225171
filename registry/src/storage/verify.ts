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
 * under an unchanged mtime) is found by the next process that reads it. The fs store also counts
 * a file it just published from a stage as verified: the stage hashed those bytes on their way in.
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
  readonly #check: RunningDigest;
  #held: Buffer | undefined;

  constructor(
    expected: Sha256Hex,
    private readonly onVerified: (() => void) | undefined,
  ) {
    super();
    this.#check = new RunningDigest(expected);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#check.update(chunk);
    const out = this.#held;
    this.#held = chunk;
    done(null, out);
  }

  override _flush(done: TransformCallback): void {
    const mismatch = this.#check.mismatch();
    if (mismatch) {
      done(mismatch);
      return;
    }
    this.onVerified?.();
    done(null, this.#held);
  }
}

/**
 * The sha256 of bytes as they pass, compared with `expected` once they have all passed. For
 * readers that know where the end is (a file of known size) and so need not hold a chunk back.
 */
export class RunningDigest {
  readonly #hash = createHash('sha256');

  constructor(readonly expected: Sha256Hex) {}

  update(chunk: Buffer): void {
    this.#hash.update(chunk);
  }

  /** After the last byte: the mismatch, or undefined when the bytes hash to `expected`. Once only. */
  mismatch(): DigestMismatchError | undefined {
    const actual = this.#hash.digest('hex');
    return actual === this.expected ? undefined : new DigestMismatchError(this.expected, actual);
  }
}

/** What a whole read must check: the digest its bytes must have, and who to tell once they had it. */
export interface Verification {
  expected: Sha256Hex;
  onVerified: () => void;
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

  /** What a whole read of `digest` as stored in `version` must check; nothing when that version was verified. */
  verification(digest: Sha256Hex, version: string): Verification | undefined {
    if (this.has(digest, version)) return undefined;
    return { expected: digest, onVerified: () => this.add(digest, version) };
  }

  /** Reads `source` (a whole read of `digest` as stored in `version`), verified unless that version already was. */
  read(source: Readable, digest: Sha256Hex, version: string | undefined): Readable {
    if (version === undefined) return verifying(source, digest);
    const check = this.verification(digest, version);
    return check ? verifying(source, check.expected, check.onVerified) : source;
  }
}
