/**
 * The fs backend's chunk store (registry/src/storage/fs/chunk-store.ts) and shared stages over it,
 * as the worker processes of one server use them: two store instances on one data dir sharing one
 * set of key locks (what the primary holds for its workers). A chunk appears whole or not at all;
 * a one-chunk stage is published by a hard link; several chunks are streamed through a stage; two
 * appends from one version: one wins; names cannot leave the chunk folder.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsChunkStore } from '../../registry/src/storage/fs/chunk-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { ProcessKeyLocks } from '../../registry/src/storage/key-locks.js';
import { SharedStages } from '../../registry/src/storage/shared-stages.js';
import { ConflictError } from '../../registry/src/storage/types.js';
import { sha256 } from '../oci/api-support.js';
import { pseudoRandom } from '../support/oci-image.js';
import { tempDir } from '../support/velodex.js';

const from = (b: Buffer | string) => Readable.from([Buffer.from(b)]);

async function instances() {
  const root = tempDir('velodex-fs-chunks-');
  const locks = new ProcessKeyLocks();
  const make = async () => {
    const blobs = new FsBlobStore(root);
    const meta = new FsMetaStore(root, locks);
    await blobs.init();
    await meta.init();
    const chunks = new FsChunkStore(root, (path, digest) => blobs.adopt(path, digest));
    return { blobs, meta, chunks, stages: new SharedStages(meta, chunks, blobs) };
  };
  return { root, one: await make(), two: await make() };
}

function chunkFiles(root: string): string[] {
  const dir = join(root, 'chunks');
  return existsSync(dir) ? (readdirSync(dir, { recursive: true }) as string[]).filter((f) => statSync(join(dir, f)).isFile()) : [];
}

describe('fs chunk store', () => {
  it('a source that fails midway leaves no chunk and no staged file', async () => {
    const { root, one } = await instances();
    const failing = new Readable({
      read() {
        this.push(Buffer.from('partial'));
        this.destroy(new Error('client went away'));
      },
    });
    await expect(one.chunks.write('s1/c1', failing)).rejects.toThrow('client went away');
    expect(chunkFiles(root)).toEqual([]);
    expect(readdirSync(join(root, 'staging'))).toEqual([]);
    expect(await one.chunks.read('s1/c1')).toBeNull();
  });

  it('refuses names that would leave the chunk folder', async () => {
    const { one } = await instances();
    for (const name of ['../meta/x', '/etc/passwd', 'a/../../b', '.hidden']) await expect(one.chunks.write(name, from('x'))).rejects.toThrow('unsafe chunk name');
  });

  it('a one-chunk stage is published by a hard link; the blob outlives the chunk', async () => {
    const { root, one, two } = await instances();
    const data = pseudoRandom('fs-chunks-one', 300_000);
    let s = await one.stages.open({ who: 'a' });
    s = await two.stages.append(s, from(data));
    const [chunk] = chunkFiles(root);
    const inode = statSync(join(root, 'chunks', chunk!)).ino;
    await one.stages.commit(s, sha256(data));
    const blobPath = join(root, 'blobs', 'sha256', sha256(data).slice(0, 2), sha256(data));
    expect(statSync(blobPath).ino).toBe(inode);
    expect(chunkFiles(root)).toEqual([]);
    const body = await one.blobs.get(sha256(data));
    const chunks: Buffer[] = [];
    for await (const c of body!) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
  });

  it('several chunks from two instances are streamed into one blob; two appends from one version: one wins', async () => {
    const { root, one, two } = await instances();
    const s = await one.stages.open({});
    const won = await one.stages.append(s, from('hello '));
    await expect(two.stages.append(s, from('other'))).rejects.toBeInstanceOf(ConflictError);
    const more = await two.stages.append(won, from('world'));
    await one.stages.commit(more, sha256('hello world'));
    expect(await text((await two.blobs.get(sha256('hello world')))!)).toBe('hello world');
    expect(chunkFiles(root)).toEqual([]);
  });

  it('lists chunks older than a time, for the sweep', async () => {
    const { one } = await instances();
    await one.chunks.write('s2/c1', from('x'));
    const names: string[] = [];
    for await (const n of one.chunks.listOlder(Date.now() + 1000)) names.push(n);
    expect(names).toEqual(['s2/c1']);
    const none: string[] = [];
    for await (const n of one.chunks.listOlder(Date.now() - 60_000)) none.push(n);
    expect(none).toEqual([]);
  });
});
