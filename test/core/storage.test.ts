/**
 * The filesystem stores under the conditions that break naive ones: wrong digests, sources that
 * die mid-stream, concurrent writers of one blob and of one document.
 */
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { ConflictError, DigestMismatchError } from '../../registry/src/storage/types.js';
import { updateDoc } from '../../registry/src/storage/update.js';
import { tempDir } from '../support/velodex.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function blobStore() {
  const root = tempDir('velodex-store-');
  const store = new FsBlobStore(root);
  await store.init();
  const files = () => readdirSync(root, { recursive: true }).map(String).filter((f) => /[0-9a-f]{64}$|staging\/./.test(f));
  return { root, store, files };
}

describe('FsBlobStore', () => {
  it('publishes verified bytes and reads ranges back', async () => {
    const { store } = await blobStore();
    const info = await store.put(Readable.from([Buffer.from('hello '), Buffer.from('world')]), sha('hello world'));
    expect(info).toEqual({ digest: sha('hello world'), size: 11 });
    expect(await text((await store.get(info.digest))!)).toBe('hello world');
    expect(await text((await store.get(info.digest, { start: 6, end: 10 }))!)).toBe('world');
    expect(await store.stat(info.digest)).toEqual({ digest: info.digest, size: 11 });
  });

  it('refuses bytes that do not match the expected digest and leaves nothing behind', async () => {
    const { store, files } = await blobStore();
    await expect(store.put(Readable.from([Buffer.from('tampered')]), sha('original'))).rejects.toBeInstanceOf(DigestMismatchError);
    expect(await store.stat(sha('tampered'))).toBeNull();
    expect(await store.stat(sha('original'))).toBeNull();
    expect(files()).toEqual([]);
  });

  it('leaves nothing visible when the source dies mid-stream', async () => {
    const { store, files } = await blobStore();
    const dying = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024, 1));
        this.destroy(new Error('connection reset'));
      },
    });
    await expect(store.put(dying)).rejects.toThrow(/connection reset/);
    expect(files()).toEqual([]);
  });

  it('lets concurrent writers of the same bytes all succeed with one blob', async () => {
    const { store, files } = await blobStore();
    const body = 'same bytes '.repeat(10_000);
    const results = await Promise.all(Array.from({ length: 8 }, () => store.put(Readable.from([Buffer.from(body)]), sha(body))));
    expect(new Set(results.map((r) => r.digest))).toEqual(new Set([sha(body)]));
    expect(files()).toHaveLength(1);
  });

  it('publishes a local file by digest and deletes', async () => {
    const { store, root } = await blobStore();
    const { writeFileSync } = await import('node:fs');
    const path = join(root, 'upload.tmp');
    writeFileSync(path, 'file bytes');
    await expect(store.putFile(path, sha('other'))).rejects.toBeInstanceOf(DigestMismatchError);
    const info = await store.putFile(path, sha('file bytes'));
    expect(await text((await store.get(info.digest))!)).toBe('file bytes');
    expect(await store.delete(info.digest)).toBe(true);
    expect(await store.delete(info.digest)).toBe(false);
    expect(await store.get(info.digest)).toBeNull();
  });
});

describe('FsMetaStore', () => {
  async function metaStore() {
    const store = new FsMetaStore(tempDir('velodex-meta-'));
    await store.init();
    return store;
  }

  it('compare-and-swap refuses a stale version', async () => {
    const store = await metaStore();
    const v1 = await store.put('a/doc', { n: 1 }, null);
    await expect(store.put('a/doc', { n: 2 }, null)).rejects.toBeInstanceOf(ConflictError);
    const v2 = await store.put('a/doc', { n: 2 }, v1);
    await expect(store.put('a/doc', { n: 3 }, v1)).rejects.toBeInstanceOf(ConflictError);
    expect(await store.get('a/doc')).toEqual({ doc: { n: 2 }, version: v2 });
  });

  it('loses no update among 50 concurrent read-modify-writes', async () => {
    const store = await metaStore();
    await Promise.all(
      Array.from({ length: 50 }, (_, i) => updateDoc<{ seen: number[] }>(store, 'counter/doc', (cur) => ({ seen: [...(cur?.seen ?? []), i] }))),
    );
    const found = await store.get<{ seen: number[] }>('counter/doc');
    expect(found?.doc.seen.slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('sees a write made through another store instance on the same folder, and hands out frozen documents', async () => {
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

  it('lists keys under a prefix and refuses unsafe keys', async () => {
    const store = await metaStore();
    await store.put('p/x/one', 1);
    await store.put('p/x/two', 2);
    await store.put('p/y/three', 3);
    const keys: string[] = [];
    for await (const k of store.list('p/x')) keys.push(k);
    expect(keys.sort()).toEqual(['p/x/one', 'p/x/two']);
    await expect(store.put('p/../escape', 1)).rejects.toThrow(/unsafe metadata key/);
    expect(await store.delete('p/x/one')).toBe(true);
    expect(await store.get('p/x/one')).toBeNull();
  });
});
