/**
 * `PartChecksums` (s3/part-checksums.ts): the CRC32 of each part of a file, kept while its bytes
 * are written and taken back. The store refuses a part whose checksum is not its bytes', so every
 * answer must be the CRC32 of exactly those bytes, however the writes fell on the part boundaries
 * and whatever was undone.
 */
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PartChecksums } from '../../registry/src/storage/s3/part-checksums.js';

const PART = 16;

/** What the file holds, and the checksums kept beside it, after `appends` (some failing). */
function replay(appends: { chunks: Uint8Array[]; fails: boolean }[]): { file: Buffer; sums: PartChecksums } {
  const sums = new PartChecksums(PART);
  let file = Buffer.alloc(0);
  for (const { chunks, fails } of appends) {
    const mark = sums.mark();
    const before = file.length;
    for (const chunk of chunks) {
      sums.add(Buffer.from(chunk));
      file = Buffer.concat([file, chunk]);
    }
    if (fails) {
      sums.rewind(mark);
      file = file.subarray(0, before);
    }
  }
  return { file, sums };
}

describe('PartChecksums', () => {
  it('gives the CRC32 of every whole part and of the tail, whatever the writes and the undone appends', () => {
    const append = fc.record({ chunks: fc.array(fc.uint8Array({ maxLength: 3 * PART }), { maxLength: 4 }), fails: fc.boolean() });
    fc.assert(
      fc.property(fc.array(append, { maxLength: 8 }), (appends) => {
        const { file, sums } = replay(appends);
        expect(sums.length).toBe(file.length);
        const whole = Math.floor(file.length / PART);
        for (let i = 0; i < whole; i++) expect(sums.of(i, PART)).toBe(crc32(file.subarray(i * PART, (i + 1) * PART)));
        const tail = file.subarray(whole * PART);
        expect(sums.of(whole, tail.length)).toBe(crc32(tail));
      }),
    );
  });

  it('refuses a slice it did not record as a part, rather than answer a wrong checksum', () => {
    const { sums } = replay([{ chunks: [Buffer.alloc(PART + 5, 1)], fails: false }]);
    expect(() => sums.of(0, PART - 1)).toThrow(/no checksum for part 1 of 15 bytes/);
    expect(() => sums.of(1, 4)).toThrow(/21 bytes were recorded/);
    expect(() => sums.of(2, 0)).toThrow();
    expect(sums.of(1, 5)).toBe(crc32(Buffer.alloc(5, 1)));
  });
});
