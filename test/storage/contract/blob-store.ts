/**
 * The BlobStore contract: what every backend must do, under the conditions that break naive ones
 * (wrong digests, sources that die mid-stream, concurrent writers of one blob, staged writes
 * committed, aborted or refused). A backend's test file calls `describeBlobStore` with a factory.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer, text } from 'node:stream/consumers';
import { afterEach, describe, expect, it } from 'vitest';
import { DigestMismatchError, type BlobStore } from '../../../registry/src/storage/types.js';

export interface BlobStoreUnderTest {
  store: BlobStore;
  cleanup: () => Promise<void>;
  /**
   * Staged bytes the backend still keeps (ids or keys), for "nothing left behind" checks; a
   * backend that cannot tell leaves it out and those checks are skipped.
   */
  staged?: () => Promise<string[]>;
}

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const from = (...parts: (string | Buffer)[]) => Readable.from(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));

/** A source that sends some bytes, then fails as a dropped connection does. */
function dying(bytes = 64 * 1024): Readable {
  return new Readable({
    read() {
      this.push(Buffer.alloc(bytes, 1));
      this.destroy(new Error('connection reset'));
    },
  });
}

/** Deterministic, incompressible-looking bytes of any size. */
function pattern(size: number, seed = 1): Buffer {
  const out = Buffer.allocUnsafe(size);
  let x = seed;
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

export function describeBlobStore(name: string, make: () => Promise<BlobStoreUnderTest>): void {
  describe(`BlobStore contract: ${name}`, () => {
    const opened: BlobStoreUnderTest[] = [];
    const open = async () => {
      const s = await make();
      opened.push(s);
      return s;
    };
    const nothingStaged = async (s: BlobStoreUnderTest) => {
      if (s.staged) expect(await s.staged()).toEqual([]);
    };
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((s) => s.cleanup()));
    });

    it('publishes verified bytes; get, stat and delete', async () => {
      const s = await open();
      const info = await s.store.put(from('hello ', 'world'), sha('hello world'));
      expect(info).toEqual({ digest: sha('hello world'), size: 11 });
      expect(await text((await s.store.get(info.digest))!)).toBe('hello world');
      expect(await s.store.stat(info.digest)).toEqual({ digest: info.digest, size: 11, modifiedMs: expect.any(Number) });
      expect(await s.store.delete(info.digest)).toBe(true);
      expect(await s.store.delete(info.digest)).toBe(false);
      expect(await s.store.get(info.digest)).toBeNull();
      expect(await s.store.stat(info.digest)).toBeNull();
      await nothingStaged(s);
    });

    it('lists every published blob with its size and when it was written, and nothing staged or deleted', async () => {
      const s = await open();
      const listed = async () => {
        const out: { digest: string; size: number; modifiedMs: number }[] = [];
        for await (const blob of s.store.list()) out.push(blob);
        return out.sort((x, y) => x.size - y.size);
      };
      expect(await listed()).toEqual([]);
      const before = Date.now();
      await s.store.put(from('one'), sha('one'));
      await s.store.put(from('three'), sha('three'));
      await s.store.put(from('gone soon'), sha('gone soon'));
      await s.store.delete(sha('gone soon'));
      const stage = await s.store.stage();
      await stage.append(from('staged, never committed'));
      const blobs = await listed();
      expect(blobs.map(({ digest, size }) => ({ digest, size }))).toEqual([
        { digest: sha('one'), size: 3 },
        { digest: sha('three'), size: 5 },
      ]);
      // Clocks of the store and of this process may differ a little (MinIO rounds to the second).
      for (const blob of blobs) expect(Math.abs(blob.modifiedMs - before)).toBeLessThan(60_000);
      await stage.abort();
    });

    it('takes the computed digest when none is expected, and stores empty blobs', async () => {
      const s = await open();
      expect(await s.store.put(from('no expectation'))).toEqual({ digest: sha('no expectation'), size: 14 });
      expect(await s.store.put(from())).toEqual({ digest: sha(''), size: 0 });
      expect(await text((await s.store.get(sha('')))!)).toBe('');
    });

    it('reads byte ranges (inclusive) of a large blob', async () => {
      const s = await open();
      const bytes = pattern(3 * 1024 * 1024 + 17);
      const { digest } = await s.store.put(Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]));
      const range = async (start: number, end: number) => buffer((await s.store.get(digest, { start, end }))!);
      expect(await range(0, 0)).toEqual(bytes.subarray(0, 1));
      expect(await range(6, 10)).toEqual(bytes.subarray(6, 11));
      expect(await range(1024 * 1024 - 3, 2 * 1024 * 1024 + 5)).toEqual(bytes.subarray(1024 * 1024 - 3, 2 * 1024 * 1024 + 6));
      expect(await range(bytes.length - 5, bytes.length - 1)).toEqual(bytes.subarray(bytes.length - 5));
      expect(sha(await buffer((await s.store.get(digest))!))).toBe(digest);
    });

    it('refuses bytes that do not match the expected digest and leaves nothing behind', async () => {
      const s = await open();
      await expect(s.store.put(from('tampered'), sha('original'))).rejects.toBeInstanceOf(DigestMismatchError);
      expect(await s.store.stat(sha('tampered'))).toBeNull();
      expect(await s.store.stat(sha('original'))).toBeNull();
      await nothingStaged(s);
    });

    it('leaves nothing visible when the source dies mid-stream', async () => {
      const s = await open();
      await expect(s.store.put(dying())).rejects.toThrow(/connection reset/);
      expect(await s.store.stat(sha(Buffer.alloc(64 * 1024, 1)))).toBeNull();
      await nothingStaged(s);
    });

    it('lets concurrent writers of the same bytes all succeed with one blob', async () => {
      const s = await open();
      const body = 'same bytes '.repeat(10_000);
      const results = await Promise.all(Array.from({ length: 8 }, () => s.store.put(from(body), sha(body))));
      expect(new Set(results.map((r) => r.digest))).toEqual(new Set([sha(body)]));
      expect(await text((await s.store.get(sha(body)))!)).toBe(body);
      await nothingStaged(s);
    });

    describe('staged writes', () => {
      it('appends chunks while hashing, reads them back, and publishes only on commit', async () => {
        const s = await open();
        const stage = await s.store.stage({ readBack: true });
        try {
          await stage.append(from('hello '));
          await stage.append(from('wor', 'ld'));
          expect(stage.size).toBe(11);
          expect(stage.digest()).toBe(sha('hello world'));
          // Nothing is visible before the commit, under any digest.
          expect(await s.store.stat(sha('hello world'))).toBeNull();
          expect(await text(stage.readBack())).toBe('hello world');
          expect(await text(stage.readBack({ start: 6, end: 10 }))).toBe('world');
          const buf = Buffer.alloc(4);
          expect(await stage.read(buf, 2)).toBe(4);
          expect(buf.toString()).toBe('llo ');
          expect(await stage.read(Buffer.alloc(8), 8)).toBe(3);
          expect(await stage.read(Buffer.alloc(8), 11)).toBe(0);
          expect(await stage.commit(sha('hello world'))).toEqual({ digest: sha('hello world'), size: 11 });
          // Readers that were tailing the stage may go on reading after the commit.
          expect(await text(stage.readBack())).toBe('hello world');
          await expect(stage.append(from('more'))).rejects.toThrow();
        } finally {
          await stage.abort();
        }
        expect(await text((await s.store.get(sha('hello world')))!)).toBe('hello world');
        await stage.abort();
        await nothingStaged(s);
      });

      it('reads back a large stage at random positions without loading it', async () => {
        const s = await open();
        const bytes = pattern(4 * 1024 * 1024 + 3, 7);
        const stage = await s.store.stage({ readBack: true });
        try {
          for (let off = 0; off < bytes.length; off += 1024 * 1024) await stage.append(Readable.from([bytes.subarray(off, off + 1024 * 1024)]));
          // A zip's directory is at its end: read the tail first, then the middle.
          expect(await buffer(stage.readBack({ start: bytes.length - 100, end: bytes.length - 1 }))).toEqual(bytes.subarray(bytes.length - 100));
          expect(await buffer(stage.readBack({ start: 1_000_000, end: 3_000_000 }))).toEqual(bytes.subarray(1_000_000, 3_000_001));
          expect(sha(await buffer(stage.readBack()))).toBe(sha(bytes));
          expect((await stage.commit()).digest).toBe(sha(bytes));
        } finally {
          await stage.abort();
        }
        expect(sha(await buffer((await s.store.get(sha(bytes)))!))).toBe(sha(bytes));
      });

      it('refuses a commit under another digest and publishes nothing', async () => {
        const s = await open();
        const stage = await s.store.stage();
        try {
          await stage.append(from('tampered'));
          await expect(stage.commit(sha('original'))).rejects.toBeInstanceOf(DigestMismatchError);
        } finally {
          await stage.abort();
        }
        expect(await s.store.stat(sha('tampered'))).toBeNull();
        expect(await s.store.stat(sha('original'))).toBeNull();
        await nothingStaged(s);
      });

      it('commits a stage begun with its digest under it, and refuses other bytes for one begun with another', async () => {
        const s = await open();
        const right = await s.store.stage({ expected: sha('original') });
        const wrong = await s.store.stage({ expected: sha('original') });
        try {
          await right.append(from('original'));
          expect(await right.commit()).toEqual({ digest: sha('original'), size: 8 });
          await wrong.append(from('tampered'));
          // With no digest named at the commit, as with one: the stage's own is required.
          await expect(wrong.commit()).rejects.toBeInstanceOf(DigestMismatchError);
        } finally {
          await right.abort();
          await wrong.abort();
        }
        expect(await s.store.stat(sha('tampered'))).toBeNull();
        expect(sha(await buffer((await s.store.get(sha('original')))!))).toBe(sha('original'));
        await nothingStaged(s);
      });

      it('abort discards the bytes; the stage takes nothing more', async () => {
        const s = await open();
        const stage = await s.store.stage();
        await stage.append(from('never published'));
        await stage.abort();
        await stage.abort();
        await expect(stage.append(from('x'))).rejects.toThrow();
        await expect(stage.commit()).rejects.toThrow();
        expect(await s.store.stat(sha('never published'))).toBeNull();
        await nothingStaged(s);
      });

      it('undoes an append whose source dies midway, and goes on from where it was', async () => {
        const s = await open();
        const stage = await s.store.stage({ readBack: true });
        try {
          await stage.append(from('hello '));
          await expect(stage.append(dying())).rejects.toThrow(/connection reset/);
          expect(stage.size).toBe(6);
          expect(stage.digest()).toBe(sha('hello '));
          expect(await text(stage.readBack())).toBe('hello ');
          await stage.append(from('world'));
          expect((await stage.commit(sha('hello world'))).size).toBe(11);
        } finally {
          await stage.abort();
        }
        expect(await text((await s.store.get(sha('hello world')))!)).toBe('hello world');
      });

      it('undoes an append that leaves the stage at another digest than expected', async () => {
        const s = await open();
        const stage = await s.store.stage();
        try {
          await stage.append(from('chunk one, '));
          await expect(stage.append(from('wrong end'), { expect: sha('chunk one, right end') })).rejects.toBeInstanceOf(DigestMismatchError);
          expect(stage.size).toBe(11);
          expect(stage.digest()).toBe(sha('chunk one, '));
          await stage.append(from('right end'), { expect: sha('chunk one, right end') });
          await stage.commit(sha('chunk one, right end'));
        } finally {
          await stage.abort();
        }
        expect(await text((await s.store.get(sha('chunk one, right end')))!)).toBe('chunk one, right end');
      });

      it('tells a tailing reader each time bytes land', async () => {
        const s = await open();
        const stage = await s.store.stage({ readBack: true });
        const seen: number[] = [];
        try {
          await stage.append(from('ab', 'cd', 'ef'), { onWritten: (size) => seen.push(size) });
          expect(seen.at(-1)).toBe(6);
          expect(seen).toEqual([...seen].sort((a, b) => a - b));
        } finally {
          await stage.abort();
        }
      });

      it('lets concurrent stages of the same bytes all commit, as one blob', async () => {
        const s = await open();
        const body = 'staged twice '.repeat(5_000);
        const stages = await Promise.all(Array.from({ length: 6 }, () => s.store.stage()));
        try {
          await Promise.all(stages.map((st) => st.append(from(body))));
          const infos = await Promise.all(stages.map((st) => st.commit(sha(body))));
          expect(new Set(infos.map((i) => `${i.digest}:${i.size}`))).toEqual(new Set([`${sha(body)}:${body.length}`]));
        } finally {
          await Promise.all(stages.map((st) => st.abort()));
        }
        expect(await text((await s.store.get(sha(body)))!)).toBe(body);
        await nothingStaged(s);
      });

      it('commits bytes that are already stored without error', async () => {
        const s = await open();
        await s.store.put(from('already here'));
        const stage = await s.store.stage();
        try {
          await stage.append(from('already here'));
          expect(await stage.commit(sha('already here'))).toEqual({ digest: sha('already here'), size: 12 });
        } finally {
          await stage.abort();
        }
        expect(await text((await s.store.get(sha('already here')))!)).toBe('already here');
        await nothingStaged(s);
      });

      it('gives every stage its own id', async () => {
        const s = await open();
        const a = await s.store.stage();
        const b = await s.store.stage();
        expect(a.id).not.toBe(b.id);
        await Promise.all([a.abort(), b.abort()]);
        await nothingStaged(s);
      });
    });
  });
}
