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
 * The cost is one sha256 pass over the bytes (about 1 ms per MiB on one core) and one chunk
 * held back; nothing else is buffered, and backpressure passes through unchanged.
 */
import { createHash } from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream';
import { DigestMismatchError, type Sha256Hex } from './types.js';

/** `source`, verified against `expected` on its way through (see the module comment). */
export function verifying(source: Readable, expected: Sha256Hex): Readable {
  const check = new DigestCheck(expected);
  // pipeline: a source failure errors the check, and a consumer that gives up destroys the source.
  return pipeline(source, check, () => undefined);
}

class DigestCheck extends Transform {
  readonly #hash = createHash('sha256');
  #held: Buffer | undefined;

  constructor(private readonly expected: Sha256Hex) {
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
    done(null, this.#held);
  }
}
