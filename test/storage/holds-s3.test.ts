/**
 * The holds protocol (registry/src/storage/holds.ts) on the s3 MetaStore, with two stores on one
 * bucket standing for two processes: concurrent holders are all recorded, and a hold that races a
 * release made through the other process waits for the deletion, whose final step is the
 * conditional tombstone write. Bytes stay in an fs BlobStore (the s3 one is not built yet).
 */
import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../registry/src/config/secret.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { BlobHolds } from '../../registry/src/storage/holds.js';
import { s3Location } from '../../registry/src/storage/s3/connect.js';
import { S3MetaStore } from '../../registry/src/storage/s3/meta-store.js';
import type { BlobStore } from '../../registry/src/storage/types.js';
import { startMinio, type Minio } from '../support/minio.js';
import { tempDir } from '../support/velodex.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

let minio: Minio;
beforeAll(async () => {
  minio = await startMinio();
});
afterAll(async () => {
  await minio?.stop();
});

/** Two MetaStores on one fresh prefix (two processes, in effect) and one fs BlobStore. */
async function stores() {
  const prefix = `holds-${randomUUID()}`;
  const meta = () =>
    new S3MetaStore(
      s3Location({
        backend: 's3',
        path: '',
        endpoint: minio.endpoint,
        bucket: minio.bucket,
        prefix,
        accessKey: new Secret(minio.accessKey, 'inline'),
        secretKey: new Secret(minio.secretKey, 'inline'),
      }),
    );
  const blobs = new FsBlobStore(tempDir('velodex-holds-s3-'));
  await blobs.init();
  const put = async (text: string) => (await blobs.put(Readable.from([Buffer.from(text)]), sha(text))).digest;
  return { a: meta(), b: meta(), blobs, put };
}

/** `blobs`, with `delete` waiting for `gate` first (whatever else the interface holds passes through). */
function gatedDeletes(blobs: BlobStore, gate: () => Promise<void>): BlobStore {
  return new Proxy(blobs, {
    get(target, prop) {
      if (prop === 'delete') {
        return async (hex: string) => {
          await gate();
          return target.delete(hex);
        };
      }
      const value: unknown = Reflect.get(target, prop);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('BlobHolds on the s3 MetaStore, two processes', () => {
  it('records every one of many concurrent holders made through either process', async () => {
    const { a, b, blobs } = await stores();
    const holds = [new BlobHolds(a, blobs), new BlobHolds(b, blobs)];
    const hex = sha('popular');
    const names = Array.from({ length: 20 }, (_, i) => `holder-${String(i).padStart(2, '0')}`);
    const added = await Promise.all([...names, ...names].map((n, i) => holds[i % 2]!.hold(hex, n)));
    expect(added.filter(Boolean)).toHaveLength(names.length);
    expect(await holds[0]!.holders(hex)).toEqual(names);
    expect(await holds[1]!.holders(hex)).toEqual(names);
  });

  it('a hold through one process waits for a release through the other, so its bytes survive', async () => {
    const { a, b, blobs, put } = await stores();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const releaser = new BlobHolds(a, gatedDeletes(blobs, () => gate));
    const holder = new BlobHolds(b, blobs);
    const hex = sha('contested');
    await releaser.hold(hex, 'first');
    await put('contested');

    const releasing = releaser.release(hex, 'first');
    // Wait (by polling the store, not the clock) until the release has marked the document.
    while ((await a.get<{ releasing?: number }>(`holds/${hex.slice(0, 2)}/${hex}`))?.doc.releasing === undefined) {
      await new Promise((r) => setTimeout(r, 10));
    }
    let held = false;
    const holding = holder.hold(hex, 'second').then(async (added) => {
      held = added;
      await put('contested');
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(held).toBe(false);

    open();
    expect(await releasing).toEqual({ released: true, last: true, deleted: true });
    await holding;
    expect(held).toBe(true);
    expect(await holder.holders(hex)).toEqual(['second']);
    expect(await releaser.holders(hex)).toEqual(['second']);
    expect(await blobs.stat(hex)).not.toBeNull();
  });

  it('releases the last hold through the other process: bytes and document go', async () => {
    const { a, b, blobs, put } = await stores();
    const hex = sha('short-lived');
    await new BlobHolds(a, blobs).hold(hex, 'only');
    await put('short-lived');
    expect(await new BlobHolds(b, blobs).release(hex, 'only')).toEqual({ released: true, last: true, deleted: true });
    expect(await a.get(`holds/${hex.slice(0, 2)}/${hex}`)).toBeNull();
    expect(await blobs.stat(hex)).toBeNull();
    // The key is free again (its tombstone is replaced by the next create).
    expect(await new BlobHolds(a, blobs).hold(hex, 'again')).toBe(true);
  });
});
