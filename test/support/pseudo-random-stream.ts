/**
 * Large reproducible bytes for the big-blob suites, made 1 MiB at a time so that a test moving
 * a gigabyte never holds more than a block: block `i` of stream `seed` is xorshift32 output, the
 * same on every run, so a test can re-create any block (the tail of a ranged read) on its own.
 */
import { createHash } from 'node:crypto';

export const MiB = 1024 * 1024;

/** Block `i` (1 MiB) of the pseudo-random stream `seed`. */
export function block(seed: number, i: number): Buffer {
  const words = new Uint32Array(MiB / 4);
  let x = (seed * 0x9e3779b1 + i * 0x85ebca6b + 1) >>> 0 || 1;
  for (let k = 0; k < words.length; k++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    words[k] = x;
  }
  return Buffer.from(words.buffer);
}

/** The first `size` bytes (a whole number of MiB) of stream `seed`, block by block. */
export function* blocks(seed: number, size: number): Generator<Buffer> {
  for (let i = 0; i < size / MiB; i++) yield block(seed, i);
}

/** The sha256 (hex) of the first `size` bytes of stream `seed`. */
export function digestOfBlocks(seed: number, size: number): string {
  const h = createHash('sha256');
  for (const b of blocks(seed, size)) h.update(b);
  return h.digest('hex');
}
