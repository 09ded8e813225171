/**
 * The filesystem backend: the BlobStore contract (its MetaStore contract runs beside the s3 one
 * in meta-store.test.ts), and what only it has (its staging folder swept by
 * age when it opens, a document cache validated by the file's identity).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { ConflictError } from '../../registry/src/storage/types.js';
import { tempDir } from '../support/velodex.js';
import { describeBlobStore } from './contract/blob-store.js';

describeBlobStore('fs', async () => {
  const root = tempDir('velodex-store-');
  const store = new FsBlobStore(root);
  await store.init();
  return {
    store,
    cleanup: async () => rmSync(root, { recursive: true, force: true }),
    staged: async () => readdirSync(join(root, 'staging')),
  };
});

describe('fs staging', () => {
  it('fsyncs a committed blob before its name appears: a crash cannot leave a short blob under a digest', async () => {
    const root = tempDir('velodex-store-');
    const store = new FsBlobStore(root);
    await store.init();
    const bytes = Buffer.from('bytes that must be on the disk before their name');
    const digest = createHash('sha256').update(bytes).digest('hex');
    const named = join(root, 'blobs', 'sha256', digest.slice(0, 2), digest);
    // FileHandle is not exported; its prototype is that of any open handle.
    const probe = await open(join(root, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as FileHandle;
    await probe.close();
    const namedAtSync: boolean[] = [];
    const original = proto.sync;
    const sync = vi.spyOn(proto, 'sync').mockImplementation(function (this: FileHandle) {
      namedAtSync.push(existsSync(named));
      return original.call(this);
    });
    try {
      const stage = await store.stage();
      await stage.append(Readable.from([bytes]));
      expect(await stage.commit(digest)).toEqual({ digest, size: bytes.length });
      await stage.abort();
    } finally {
      sync.mockRestore();
      rmSync(root, { recursive: true, force: true });
    }
    expect(namedAtSync).toEqual([false]);
  });

  it('sweeps staged files a killed process left, by age, at start-up; live ones stay', async () => {
    const root = tempDir('velodex-store-');
    const first = new FsBlobStore(root);
    await first.init();
    // A live stage of a running writer, and files a killed process left a day and more ago.
    const live = await first.stage();
    await live.append(Readable.from([Buffer.from('in flight')]));
    const staging = join(root, 'staging');
    const old = new Date(Date.now() - 25 * 60 * 60 * 1000);
    for (const name of ['stage-killed', 'meta-killed']) {
      writeFileSync(join(staging, name), 'left behind');
      utimesSync(join(staging, name), old, old);
    }
    writeFileSync(join(staging, 'stage-recent'), 'maybe live elsewhere');

    const reopened = new FsBlobStore(root);
    await reopened.init();
    expect(readdirSync(staging).sort()).toEqual(['stage-recent', `stage-${live.id}`].sort());
    // The live stage is untouched and still commits.
    expect((await live.commit()).size).toBe(9);
    await live.abort();
    expect(readdirSync(staging)).toEqual(['stage-recent']);
  });

  it('sees a write made through another meta store instance on the same folder, and hands out frozen documents', async () => {
    const root = tempDir('velodex-meta-');
    const a = new FsMetaStore(root);
    const b = new FsMetaStore(root);
    await a.init();
    await a.put('shared/doc', { n: 1, list: [1] });
    const first = await a.get<{ n: number; list: number[] }>('shared/doc');
    expect(first?.doc.n).toBe(1);
    // Warm read from a's cache, then b (another process, in effect) changes the file.
    expect((await a.get<{ n: number }>('shared/doc'))?.doc.n).toBe(1);
    await b.put('shared/doc', { n: 2, list: [1, 2] }, first?.version);
    const second = await a.get<{ n: number; list: number[] }>('shared/doc');
    expect(second?.doc).toEqual({ n: 2, list: [1, 2] });
    expect(second?.version).not.toBe(first?.version);
    expect(() => second?.doc.list.push(3)).toThrow(TypeError);
    // A warm entry never outlives its file: b deletes it, a sees it gone.
    expect(await b.delete('shared/doc')).toBe(true);
    expect(await a.get('shared/doc')).toBeNull();
    await b.put('shared/doc', { n: 3, list: [] });
    expect((await a.get<{ n: number }>('shared/doc'))?.doc.n).toBe(3);
  });

  it('remembers a missing document as missing, and sees it the moment another instance writes it', async () => {
    const root = tempDir('velodex-meta-missing-');
    const a = new FsMetaStore(root);
    const b = new FsMetaStore(root);
    await a.init();
    for (let i = 0; i < 3; i++) expect(await a.get('absent/doc')).toBeNull();
    await b.put('absent/doc', { n: 1 });
    expect((await a.get<{ n: number }>('absent/doc'))?.doc.n).toBe(1);
    await b.delete('absent/doc');
    expect(await a.get('absent/doc')).toBeNull();
    expect(await a.get('absent/doc')).toBeNull();
    await b.put('absent/doc', { n: 2 });
    expect((await a.get<{ n: number }>('absent/doc'))?.doc.n).toBe(2);
  });

  it('creates a document never read only while it is absent, whether this instance remembers it missing or knows nothing of it', async () => {
    const root = tempDir('velodex-meta-create-');
    const a = new FsMetaStore(root);
    const b = new FsMetaStore(root);
    const c = new FsMetaStore(root);
    await a.init();
    // Never read anywhere: created (a new blob's holds, written without a read).
    await a.put('fresh/doc', { by: 'a' }, null);
    // c knows nothing of it, b remembers it missing from before a wrote it: neither creates over it.
    expect(await b.get('fresh/other')).toBeNull();
    await a.put('fresh/other', { by: 'a' }, null);
    await expect(b.put('fresh/other', { by: 'b' }, null)).rejects.toThrow(ConflictError);
    await expect(c.put('fresh/doc', { by: 'c' }, null)).rejects.toThrow(ConflictError);
    expect((await c.get<{ by: string }>('fresh/doc'))?.doc.by).toBe('a');
    expect((await b.get<{ by: string }>('fresh/other'))?.doc.by).toBe('a');
    // Deleted by another instance: absent again, so a create goes through.
    expect(await c.delete('fresh/doc')).toBe(true);
    await a.put('fresh/doc', { by: 'a again' }, null);
    expect((await c.get<{ by: string }>('fresh/doc'))?.doc.by).toBe('a again');
  });
});
