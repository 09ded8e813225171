/** A pass-through stream that hashes and counts what flows through it. */
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

export class HashingStream extends Transform {
  readonly #hash: Hash = createHash('sha256');
  size = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#hash.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }

  /** Hex digest; call once, after the stream has ended. */
  digest(): string {
    return this.#hash.digest('hex');
  }
}
