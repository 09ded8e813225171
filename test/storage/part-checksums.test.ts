/**
 * `PartChecksums` (s3/part-checksums.ts): the CRC32 of each part of a file, kept while its bytes
 * are written and taken back (the first part's read from the file when asked for). The store
 * refuses a part whose checksum is not its bytes', so every answer must be the CRC32 of exactly
 * those bytes, however the writes fell on the part boundaries and whatever was undone.
 */
import { appendFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PartChecksums } from '../../registry/src/storage/s3/part-checksums.js';
import { tempDir } from '../support/velodex.js';

const PART = 16;
const dir = tempDir('velodex-part-checksums-');

/** A file written by `appends` (some failing, then truncated back), and the checksums kept beside it. */
function replay(appends: { chunks: Uint8Array[]; fails: boolean }[]): { file: Buffer; sums: PartChecksums } {
  const path = join(dir, 'scratch');
  writeFileSync(path, '');
  const sums = new PartChecksums(PART, path);
  let file = Buffer.alloc(0);
  for (const { chunks, fails } of appends) {
    const mark = sums.mark();
    const before = file.length;
    for (const chunk of chunks) {
      appendFileSync(path, chunk);
      sums.add(Buffer.from(chunk));
      file = Buffer.concat([file, chunk]);
    }
    if (fails) {
      truncateSync(path, before);
      sums.rewind(mark);
      file = file.subarray(0, before);
    }
  }
  return { file, sums };
}

describe('PartChecksums', () => {
  it('gives the CRC32 of every whole part and of the last, whatever the writes and the undone appends', async () => {
    const append = fc.record({ chunks: fc.array(fc.uint8Array({ maxLength: 3 * PART }), { maxLength: 4 }), fails: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(append, { maxLength: 8 }), async (appends) => {
        const { file, sums } = replay(appends);
        expect(sums.length).toBe(file.length);
        const whole = Math.floor(file.length / PART);
        for (let i = 0; i < whole; i++) expect(await sums.of(i, PART)).toBe(crc32(file.subarray(i * PART, (i + 1) * PART)));
        const last = file.subarray(whole * PART);
        expect(await sums.of(whole, last.length)).toBe(crc32(last));
      }),
    );
  });

  it('refuses a slice it did not record as a part, rather than answer a wrong checksum', async () => {
    const { sums } = replay([{ chunks: [Buffer.alloc(PART + 5, 1)], fails: false }]);
    await expect(sums.of(0, PART - 1)).rejects.toThrow(/no checksum for part 1 of 15 bytes/);
    await expect(sums.of(1, 4)).rejects.toThrow(/21 bytes were recorded/);
    await expect(sums.of(1, PART)).rejects.toThrow();
    await expect(sums.of(2, 0)).rejects.toThrow();
    expect(await sums.of(1, 5)).toBe(crc32(Buffer.alloc(5, 1)));
  });

  it('fails when the file holds less of the first part than was recorded', async () => {
    const path = join(dir, 'short');
    writeFileSync(path, Buffer.alloc(PART, 2));
    const sums = new PartChecksums(PART, path);
    sums.add(Buffer.alloc(PART, 2));
    truncateSync(path, PART - 3);
    await expect(sums.of(0, PART)).rejects.toThrow(/ended after 13 of its first 16 bytes/);
  });
});
