/**
 * Shared stages (registry/src/storage/shared-stages.ts) on a real MinIO, through two instances
 * as two processes would hold them: appends from either, what a failed or racing append leaves,
 * both ways of publishing (server-side compose, streamed through a stage), a commit cut short
 * and continued elsewhere, and the sweep by age that never takes a live stage.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stores } from '../../registry/src/storage/index.js';
import { S3ChunkStore } from '../../registry/src/storage/s3/chunks.js';
import { s3Location } from '../../registry/src/storage/s3/connect.js';
import type { S3BlobStore } from '../../registry/src/storage/s3/blob-store.js';
import { SharedStages, type SharedStage } from '../../registry/src/storage/shared-stages.js';
import { ConflictError, DigestMismatchError, type ChunkRef } from '../../registry/src/storage/types.js';
import { s3StorageToml } from '../support/backend.js';
import { startMinio, type Minio } from '../support/minio.js';
import { sha256 } from '../oci/api-support.js';
import { pseudoRandom } from '../support/oci-image.js';
import { serverStores, storageOf } from '../support/store-probe.js';
import { until } from '../support/until.js';
import { tempDir } from '../support/velodex.js';

const MiB = 1024 * 1024;
const HOUR = 60 * 60 * 1000;

let minio: Minio;
let stores: Stores;
let dir: string;
/** The clock both instances read; tests move it to age stages. */
let clock = Date.now();
let one: SharedStages;
let two: SharedStages;

/** Blobs published by server-side compose so far (the other way streams them through a stage). */
let composed = 0;

class CountingChunks extends S3ChunkStore {
  override async compose(chunks: readonly ChunkRef[], digest: string): Promise<boolean> {
    const done = await super.compose(chunks, digest);
    if (done) composed++;
    return done;
  }
}

function instance(): SharedStages {
  const loc = s3Location(storageOf(dir));
  const chunks = new CountingChunks(loc, join(dir, 'probe-scratch'), (d) => (stores.blobs as S3BlobStore).key(d));
  return new SharedStages(stores.meta, chunks, stores.blobs, { idleMs: HOUR, now: () => clock });
}

beforeAll(async () => {
  minio = await startMinio();
  dir = tempDir('velodex-shared-stages-');
  writeFileSync(
    join(dir, 'velodex.toml'),
    s3StorageToml({ endpoint: minio.endpoint, bucket: minio.bucket, accessKey: minio.accessKey, secretKey: minio.secretKey }, 'stages'),
  );
  stores = await serverStores(dir);
  one = instance();
  two = instance();
});

afterAll(async () => {
  await minio?.stop();
});

async function chunkObjects(): Promise<string[]> {
  const out: string[] = [];
  for await (const item of minio.client.listObjectsV2(minio.bucket, 'stages/chunks/', true) as AsyncIterable<{ name?: string }>) if (item.name) out.push(item.name.slice('stages/chunks/'.length));
  return out.sort();
}

const from = (b: Buffer | string) => Readable.from([Buffer.from(b)]);

function failing(first: Buffer): Readable {
  return new Readable({
    read() {
      this.push(first);
      this.destroy(new Error('client went away'));
    },
  });
}

async function blobText(hex: string): Promise<string | null> {
  const body = await stores.blobs.get(hex);
  return body ? text(body) : null;
}

describe('shared stages on MinIO', () => {
  it('appends from two instances, hashing each chunk from the saved state; a failed or mismatched append leaves the stage as it was', async () => {
    let s = await one.open({ who: 'test' });
    s = await one.append(s, from('hello '));
    const again = await two.get<{ who: string }>(s.id);
    expect(again?.doc.owner).toEqual({ who: 'test' });
    expect(again?.doc.size).toBe(6);

    await expect(two.append(again as SharedStage<{ who: string }>, failing(Buffer.from('partial')))).rejects.toThrow('client went away');
    await expect(two.append(again as SharedStage<{ who: string }>, from('there'), { expect: sha256('hello world') })).rejects.toBeInstanceOf(DigestMismatchError);
    const unchanged = await one.get(s.id);
    expect(unchanged?.version).toBe(s.version);
    expect(await chunkObjects()).toHaveLength(1);

    const done = await two.append(unchanged as SharedStage<unknown>, from('world'));
    expect(await one.digest(done)).toBe(sha256('hello world'));
    expect(await one.commit(done, sha256('hello world'))).toEqual({ digest: sha256('hello world'), size: 11 });
    expect(await blobText(sha256('hello world'))).toBe('hello world');
    expect(await one.get(s.id)).toBeNull();
    expect(await chunkObjects()).toEqual([]);
  });

  it('two appends from one version: the second loses with ConflictError and leaves no chunk', async () => {
    const s = await one.open({});
    const won = await one.append(s, from('first'));
    await expect(two.append(s, from('second'))).rejects.toBeInstanceOf(ConflictError);
    expect((await two.get(s.id))?.doc).toEqual(won.doc);
    expect((await chunkObjects()).filter((c) => c.startsWith(s.id))).toHaveLength(1);
    await two.discard(won);
    expect(await chunkObjects()).toEqual([]);
  });

  it('publishes by server-side compose when chunks are 5 MiB and more, and by streaming when they are not', async () => {
    const big = [pseudoRandom('compose-1', 5 * MiB), pseudoRandom('compose-2', 7 * MiB), pseudoRandom('compose-3', 100)];
    let s = await one.open({});
    for (const [i, chunk] of big.entries()) s = await (i % 2 ? two : one).append(s, from(chunk));
    const whole = Buffer.concat(big);
    const before = composed;
    await two.commit(s, sha256(whole));
    expect(composed).toBe(before + 1);
    const stored = await stores.blobs.get(sha256(whole));
    expect(sha256(Buffer.from(await (stored as Readable).toArray().then((c) => Buffer.concat(c as Buffer[]))))).toBe(sha256(whole));

    const small = ['ab', 'cd', 'ef'];
    let t = await one.open({});
    for (const chunk of small.slice(0, 2)) t = await one.append(t, from(chunk));
    // The last bytes ride with the commit, as in an OCI PUT with a body.
    await two.commit(t, sha256('abcdef'), { last: from('ef') });
    expect(await blobText(sha256('abcdef'))).toBe('abcdef');
    expect(composed).toBe(before + 1);
    expect(await chunkObjects()).toEqual([]);
  });

  it('a commit marked but cut short is continued by a commit of the same digest elsewhere; the mark turns appends away', async () => {
    let s = await one.open({});
    s = await one.append(s, from('cut short'));
    const hex = sha256('cut short');
    // Dies in beforePublish: the stage is marked committing, nothing is published.
    await expect(one.commit(s, hex, { beforePublish: () => Promise.reject(new Error('killed')) })).rejects.toThrow('killed');
    const marked = (await two.get(s.id)) as SharedStage<unknown>;
    expect(marked.doc.committing).toBe(hex);
    expect(await stores.blobs.stat(hex)).toBeNull();
    await expect(two.append(marked, from('more'))).rejects.toBeInstanceOf(ConflictError);
    await two.commit(marked, hex);
    expect(await blobText(hex)).toBe('cut short');
    expect(await chunkObjects()).toEqual([]);
  });

  it('sweeps idle stages and unlisted old chunks, never a stage used within the idle time', async () => {
    let idle = await one.open({ n: 'idle' });
    idle = await one.append(idle, from('idle bytes'));
    clock += 2 * HOUR;
    let live = await two.open({ n: 'live' });
    live = await two.append(live, from('live bytes'));
    // What a process killed between its chunk object and its CAS leaves: a chunk no stage lists.
    const loc = s3Location(storageOf(dir));
    await new S3ChunkStore(loc, join(dir, 'probe-scratch'), (d) => d).write(`${live.id}/orphan`, from('orphan'));
    // Chunk ages come from MinIO's clock: look far enough ahead that every chunk written so far is old.
    clock += 30 * 60 * 1000;

    expect(await one.sweep()).toEqual({ stages: 1, chunks: 1 });
    expect(await two.get(idle.id)).toBeNull();
    expect((await one.get(live.id))?.doc.size).toBe(10);
    expect(await chunkObjects()).toEqual(live.doc.chunks.map((c) => c.name));
    await one.commit((await one.get(live.id)) as SharedStage<unknown>, sha256('live bytes'));
    expect(await blobText(sha256('live bytes'))).toBe('live bytes');
  });

  it('a long append keeps its stage from the sweep, and still wins its write', async () => {
    // A clock of the test's own, moved past the idle time again and again while one append
    // streams: each time the sweep runs only once the append's refresh has written the new time,
    // so the outcome never depends on how fast this machine is. A stage nobody appends to, aged
    // the same way, is swept: the control.
    let now = Date.now();
    const idleMs = 400;
    const quick = new SharedStages(stores.meta, new S3ChunkStore(s3Location(storageOf(dir)), join(dir, 'probe-scratch'), (d) => (stores.blobs as S3BlobStore).key(d)), stores.blobs, { idleMs, now: () => now });
    const s = await quick.open({});
    let release: (() => void) | undefined;
    let sent = 0;
    const slow = new Readable({
      read() {
        // The next piece goes out only when the test says so.
        release = () => this.push(sent++ < 5 ? Buffer.from('tick ') : null);
      },
    });
    const appending = quick.append(s, slow);
    for (let round = 0; round < 5; round++) {
      const idle = await quick.open({});
      now += idleMs * 2;
      const moved = now;
      await until('the append refreshed its stage at the moved clock', async () => ((await quick.get(s.id))?.doc.lastUsed === moved ? true : undefined), { timeoutMs: 30_000, intervalMs: 50 });
      expect((await quick.sweep()).stages).toBeGreaterThanOrEqual(1);
      expect(await quick.get(idle.id)).toBeNull();
      expect(await quick.get(s.id)).not.toBeNull();
      await until('the stream asked for its next piece', async () => (release ? true : undefined), { timeoutMs: 30_000, intervalMs: 20 });
      const next = release!;
      release = undefined;
      next();
    }
    await until('the stream asked for its end', async () => (release ? true : undefined), { timeoutMs: 30_000, intervalMs: 20 });
    release!();
    const after = await appending;
    expect(after.doc.size).toBe(25);
    expect((await quick.get(s.id))?.doc.size).toBe(25);
    await quick.discard(after);
  });
});
