/**
 * The spool's readers take the latest landings from memory, and read back from the source what
 * is no longer there: every reader gets every byte in order, whatever its pace, and the last byte
 * only once the bytes are declared complete.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { Spool, type TailSource } from '../../registry/src/roles/spool.js';

/** A source over a buffer: `size` bytes of it have landed; counts the reads back. */
class BufferSource implements TailSource {
  size = 0;
  readsBack = 0;
  constructor(readonly bytes: Buffer) {}
  read(buffer: Buffer, position: number): Promise<number> {
    this.readsBack++;
    const n = this.bytes.copy(buffer, 0, position, Math.min(this.size, position + buffer.length));
    return Promise.resolve(n);
  }
  abort(): Promise<void> {
    return Promise.resolve();
  }
}

/** A consumer that takes a while over some chunks, so the reader's stream fills and waits. */
function collector(out: Buffer[], pauseEvery: number): Writable {
  let n = 0;
  return new Writable({
    highWaterMark: 16 * 1024,
    write(chunk: Buffer, _enc, done) {
      out.push(Buffer.from(chunk));
      if (++n % pauseEvery === 0) setTimeout(done, 1);
      else done();
    },
  });
}

/** Lands `bytes` in batches of `perBatch` chunks of `chunk` bytes, telling the spool each time. */
async function land(source: BufferSource, spool: Spool, chunk: number, perBatch: number): Promise<void> {
  let pos = 0;
  while (pos < source.bytes.length) {
    const landed: Buffer[] = [];
    for (let i = 0; i < perBatch && pos < source.bytes.length; i++) {
      const piece = source.bytes.subarray(pos, Math.min(source.bytes.length, pos + chunk));
      landed.push(piece);
      pos += piece.length;
    }
    source.size = pos;
    spool.grew(landed);
    await sleep(0);
  }
  spool.complete();
}

describe('Spool', () => {
  it('gives readers of any pace every byte, the recent ones from memory', async () => {
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const source = new BufferSource(bytes);
    const spool = new Spool(source);
    const fast: Buffer[] = [];
    const slow: Buffer[] = [];
    const readers = [
      pipeline(spool.reader(spool.reserve()), collector(fast, 1_000_000)),
      pipeline(spool.reader(spool.reserve()), collector(slow, 3)),
    ];
    await land(source, spool, 64 * 1024, 4);
    await Promise.all(readers);
    await spool.dispose();
    expect(Buffer.concat(fast).equals(bytes)).toBe(true);
    expect(Buffer.concat(slow).equals(bytes)).toBe(true);
    // The reader keeping up read (almost) nothing back: one read per batch would be 13.
    expect(source.readsBack).toBeLessThan(13 * 2);
  });

  it('holds the last byte back until the bytes are complete', async () => {
    const bytes = randomBytes(1000);
    const source = new BufferSource(bytes);
    const spool = new Spool(source);
    const got: Buffer[] = [];
    const reader = spool.reader(spool.reserve());
    reader.on('data', (c: Buffer) => got.push(c));
    source.size = bytes.length;
    spool.grew([bytes]);
    await sleep(20);
    expect(Buffer.concat(got).length).toBe(bytes.length - 1);
    spool.complete();
    await new Promise((r) => reader.once('end', r));
    expect(Buffer.concat(got).equals(bytes)).toBe(true);
    await spool.dispose();
  });
});
