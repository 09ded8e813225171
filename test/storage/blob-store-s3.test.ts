/**
 * The s3 BlobStore against a real MinIO: the whole BlobStore contract, and what only it has to
 * prove: large blobs moved without being buffered, several stores (processes, in effect) on one
 * bucket, and stale staging objects swept by age.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Secret } from '../../registry/src/config/secret.js';
import type { StorageConfig } from '../../registry/src/config/types.js';
import { S3BlobStore } from '../../registry/src/storage/s3/blob-store.js';
import { s3Location } from '../../registry/src/storage/s3/connect.js';
import { putChecked, putVerified } from '../../registry/src/storage/s3/put.js';
import { ASK_ABOVE_BYTES } from '../../registry/src/storage/s3/stage.js';
import { DigestMismatchError, StoreUnavailableError } from '../../registry/src/storage/types.js';
import { startMinio, type Minio } from '../support/minio.js';
import { tempDir } from '../support/velodex.js';
import { describeBlobStore } from './contract/blob-store.js';

let minio: Minio;
beforeAll(async () => {
  minio = await startMinio();
});
afterAll(async () => {
  await minio?.stop();
});

function s3Config(m: Minio, prefix: string): StorageConfig {
  return {
    backend: 's3',
    path: '',
    endpoint: m.endpoint,
    bucket: m.bucket,
    region: 'us-east-1',
    prefix,
    accessKey: new Secret(m.accessKey, 'inline'),
    secretKey: new Secret(m.secretKey, 'inline'),
  };
}

/** Each call is its own client and scratch folder: a separate process, as far as the store can tell. */
async function s3Store(prefix = `t-${randomUUID()}`): Promise<{ store: S3BlobStore; scratch: string }> {
  const scratch = tempDir('velodex-scratch-');
  const store = new S3BlobStore(s3Location(s3Config(minio, prefix)), { scratchDir: scratch });
  await store.init();
  return { store, scratch };
}

/** Every object key below `prefix` in the test bucket. */
async function keys(prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const item of minio.client.listObjectsV2(minio.bucket, prefix, true)) {
    if (item.name) out.push(item.name);
  }
  return out;
}

// A fresh prefix per test: the bucket is shared, the blobs are not.
describeBlobStore('s3 (MinIO)', async () => {
  const prefix = `t-${randomUUID()}`;
  const { store, scratch } = await s3Store(prefix);
  return {
    store,
    cleanup: async () => rmSync(scratch, { recursive: true, force: true }),
    staged: async () => [...(await keys(`${prefix}/staging/`)), ...readdirSync(scratch)],
  };
});

/** `size` bytes of a repeating pattern, produced chunk by chunk: never held whole. */
function generated(size: number): Readable {
  const chunk = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 31 + 7) & 0xff;
  let left = size;
  return new Readable({
    read() {
      if (left === 0) {
        this.push(null);
        return;
      }
      const n = Math.min(left, chunk.length);
      left -= n;
      this.push(chunk.subarray(0, n));
    },
  });
}

async function hashOf(stream: AsyncIterable<unknown>): Promise<{ digest: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { digest: hash.digest('hex'), size };
}

describe('s3 BlobStore', () => {
  it('keeps blobs at <prefix>/blobs/sha256/<ab>/<hex>, and no staging object once committed', async () => {
    const prefix = `t-${randomUUID()}`;
    const { store } = await s3Store(prefix);
    const { digest } = await store.put(Readable.from([Buffer.from('layout')]));
    expect(await keys(`${prefix}/`)).toEqual([`${prefix}/blobs/sha256/${digest.slice(0, 2)}/${digest}`]);
  });

  it('moves a 64 MiB blob in and out, whole and in ranges, without buffering it', async () => {
    const { store } = await s3Store();
    const size = 64 * 1024 * 1024 + 5;
    const expected = await hashOf(generated(size));
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sample = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 20);
    try {
      expect(await store.put(generated(size), expected.digest)).toEqual(expected);
      expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
      const start = 40 * 1024 * 1024 + 3;
      const end = size - 2;
      expect(await hashOf((await store.get(expected.digest, { start, end }))!)).toEqual(await hashOf(sliced(generated(size), start, end)));
    } finally {
      clearInterval(sample);
    }
    // Generous: parts of 8 MiB and stream buffers, far from the 64 MiB a buffered copy would add.
    expect(peak - before).toBeLessThan(48 * 1024 * 1024);
  }, 120_000);

  it('publishes a blob above the single-copy limit by a multipart copy (limits lowered: S3 allows one CopyObject up to 5 GiB)', async () => {
    const MiB = 1024 * 1024;
    const prefix = `t-${randomUUID()}`;
    const scratch = tempDir('velodex-scratch-');
    const store = new S3BlobStore(s3Location(s3Config(minio, prefix)), { scratchDir: scratch, copyLimits: { singleCopyMax: MiB, partSize: 5 * MiB } });
    await store.init();
    // 5 + 5 + 2 MiB (+ 7 bytes): three UploadPartCopy requests, the last one short.
    const size = 12 * MiB + 7;
    const expected = await hashOf(generated(size));
    // No digest given in advance: the parts go to a staging object, which the copy publishes.
    expect(await store.put(generated(size))).toEqual(expected);
    // Read back whole, so verified on the way: every range landed in its place.
    expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
    expect(await keys(`${prefix}/`)).toEqual([`${prefix}/blobs/sha256/${expected.digest.slice(0, 2)}/${expected.digest}`]);
    // Made of three parts (a multipart object's ETag ends in -<parts>), not by one CopyObject.
    expect((await minio.client.statObject(minio.bucket, store.key(expected.digest))).etag).toMatch(/-3$/);
    // The multipart copy left no unfinished upload on the blob's key.
    expect((await minio.client.listIncompleteUploadsQuery(minio.bucket, store.key(expected.digest), '', '', '')).uploads).toEqual([]);
    rmSync(scratch, { recursive: true, force: true });
  }, 120_000);

  describe('parts sent while appends go on', () => {
    const MiB = 1024 * 1024;
    /** Unfinished multipart uploads to exactly `key` (MinIO lists them by exact key only). */
    const uploadsTo = async (key: string) => (await minio.client.listIncompleteUploadsQuery(minio.bucket, key, '', '', '')).uploads;
    const until = async (cond: () => Promise<boolean>) => {
      for (let i = 0; i < 200 && !(await cond()); i++) await new Promise((r) => setTimeout(r, 25));
    };

    it('uploads whole parts before the commit; the commit completes the upload and leaves nothing', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store, scratch } = await s3Store(prefix);
      const stage = await store.stage();
      const key = `${prefix}/staging/${stage.id}`;
      try {
        for (let i = 0; i < 20; i++) await stage.append(generated(MiB));
        await until(async () => (await uploadsTo(key)).length === 1);
        // The upload is under way, and nothing is visible as an object yet, under any key.
        expect(await uploadsTo(key)).toHaveLength(1);
        expect(await keys(`${prefix}/`)).toEqual([]);
        const expected = await hashOf(generated(20 * MiB));
        expect(await stage.commit(expected.digest)).toEqual(expected);
        expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
      } finally {
        await stage.abort();
      }
      expect(await uploadsTo(key)).toEqual([]);
      expect(await keys(`${prefix}/staging/`)).toEqual([]);
      expect(readdirSync(scratch)).toEqual([]);
    }, 60_000);

    it('abort discards an upload under way', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store } = await s3Store(prefix);
      const stage = await store.stage();
      const key = `${prefix}/staging/${stage.id}`;
      for (let i = 0; i < 10; i++) await stage.append(generated(MiB));
      await until(async () => (await uploadsTo(key)).length === 1);
      await stage.abort();
      expect(await uploadsTo(key)).toEqual([]);
      expect(await keys(`${prefix}/`)).toEqual([]);
    }, 60_000);

    it('an upload swept by age under a slow stage is sent again at the commit from the local copy', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store } = await s3Store(prefix);
      const stage = await store.stage();
      const key = `${prefix}/staging/${stage.id}`;
      try {
        for (let i = 0; i < 10; i++) await stage.append(generated(MiB));
        await until(async () => (await uploadsTo(key)).length === 1);
        const [upload] = await uploadsTo(key);
        await minio.client.abortMultipartUpload(minio.bucket, key, upload!.uploadId);
        const expected = await hashOf(generated(10 * MiB));
        expect(await stage.commit(expected.digest)).toEqual(expected);
        expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
      } finally {
        await stage.abort();
      }
      expect(await keys(`${prefix}/staging/`)).toEqual([]);
    }, 60_000);

    it('a stage begun with its digest uploads its parts to the blob key itself: no staging object, no copy', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store, scratch } = await s3Store(prefix);
      const expected = await hashOf(generated(20 * MiB));
      const stage = await store.stage({ expected: expected.digest });
      const key = store.key(expected.digest);
      try {
        for (let i = 0; i < 20; i++) await stage.append(generated(MiB));
        await until(async () => (await uploadsTo(key)).length === 1);
        // Under way to the blob's key, and invisible there until the commit completes it.
        expect(await uploadsTo(key)).toHaveLength(1);
        expect(await keys(`${prefix}/`)).toEqual([]);
        expect(await store.stat(expected.digest)).toBeNull();
        expect(await stage.commit()).toEqual(expected);
      } finally {
        await stage.abort();
      }
      expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
      // Completed from its three parts (8 + 8 + 4 MiB), not copied: a copy's ETag has no part count.
      expect((await minio.client.statObject(minio.bucket, key)).etag).toMatch(/-3$/);
      expect(await uploadsTo(key)).toEqual([]);
      expect(await keys(`${prefix}/`)).toEqual([key]);
      expect(readdirSync(scratch)).toEqual([]);
    }, 60_000);

    it('an append that fails across a part boundary is taken back: the parts sent after it carry the checksums of the bytes kept', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store } = await s3Store(prefix);
      const expected = await hashOf(generated(20 * MiB));
      const stage = await store.stage({ expected: expected.digest });
      const key = store.key(expected.digest);
      // 6 MiB of other bytes on top of 5: past the first part's end, then the source dies.
      const dying = Readable.from(
        (async function* () {
          for (let i = 0; i < 6; i++) yield Buffer.alloc(MiB, 0xaa);
          throw new Error('the source died');
        })(),
      );
      try {
        for (let i = 0; i < 5; i++) await stage.append(generated(MiB));
        await expect(stage.append(dying)).rejects.toThrow('the source died');
        expect(stage.size).toBe(5 * MiB);
        for (let i = 5; i < 20; i++) await stage.append(generated(MiB));
        // The store checks each part's CRC32: a checksum of the undone bytes would be refused.
        expect(await stage.commit()).toEqual(expected);
      } finally {
        await stage.abort();
      }
      expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
      expect((await minio.client.statObject(minio.bucket, key)).etag).toMatch(/-3$/);
    }, 60_000);

    it('a stage begun with a digest its bytes do not have leaves nothing visible and no unfinished upload', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store } = await s3Store(prefix);
      const claimed = createHash('sha256').update('other bytes').digest('hex');
      const stage = await store.stage({ expected: claimed });
      const key = store.key(claimed);
      try {
        for (let i = 0; i < 20; i++) await stage.append(generated(MiB));
        await until(async () => (await uploadsTo(key)).length === 1);
        expect(await uploadsTo(key)).toHaveLength(1);
        await expect(stage.commit()).rejects.toBeInstanceOf(DigestMismatchError);
        // Aborted by the failed commit itself, before the owner's `abort`.
        expect(await uploadsTo(key)).toEqual([]);
        expect(await keys(`${prefix}/`)).toEqual([]);
        expect(await store.stat(claimed)).toBeNull();
      } finally {
        await stage.abort();
      }
      expect(await uploadsTo(key)).toEqual([]);
    }, 60_000);

    it('two stores committing the same digest at once both succeed, of one part and of several', async () => {
      const prefix = `t-${randomUUID()}`;
      const a = (await s3Store(prefix)).store;
      const b = (await s3Store(prefix)).store;
      for (const size of [3 * MiB, 17 * MiB]) {
        const expected = await hashOf(generated(size));
        const stages = await Promise.all([a.stage({ expected: expected.digest }), b.stage({ expected: expected.digest }), a.stage(), b.stage()]);
        try {
          await Promise.all(stages.map((s) => s.append(generated(size))));
          // At once: each of the four may find the blob absent and upload it; all succeed.
          expect(await Promise.all(stages.map((s) => s.commit(expected.digest)))).toEqual(stages.map(() => expected));
        } finally {
          await Promise.all(stages.map((s) => s.abort()));
        }
        expect(await hashOf((await a.get(expected.digest))!)).toEqual(expected);
        expect(await uploadsTo(a.key(expected.digest))).toEqual([]);
      }
      expect(await keys(`${prefix}/staging/`)).toEqual([]);
    }, 60_000);

    it('a part that failed while MinIO was away is sent again at the commit from the local copy', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store } = await s3Store(prefix);
      const stage = await store.stage();
      try {
        await minio.pause();
        try {
          // Two parts' worth while the store is down: their background uploads fail.
          for (let i = 0; i < 17; i++) await stage.append(generated(MiB));
          await new Promise((r) => setTimeout(r, 300));
        } finally {
          await minio.start();
        }
        const expected = await hashOf(generated(17 * MiB));
        expect(await stage.commit(expected.digest)).toEqual(expected);
        expect(await hashOf((await store.get(expected.digest))!)).toEqual(expected);
      } finally {
        await stage.abort();
      }
      expect(await keys(`${prefix}/staging/`)).toEqual([]);
    }, 60_000);
  });

  describe('a PUT the store verifies (put.ts)', () => {
    const right = Buffer.from('the bytes that were hashed');
    const digest = createHash('sha256').update(right).digest('hex');
    const wrong = Buffer.from('the bytes that were changed');

    it('is refused for other bytes than its sha256 and leaves nothing under the key, signed (http) or by its checksum header alone (as over https)', async () => {
      for (const signsPayload of [true, false]) {
        const loc = s3Location(s3Config(minio, `t-${randomUUID()}`));
        // Over https the request signs UNSIGNED-PAYLOAD: only x-amz-checksum-sha256 guards the body.
        loc.requests.signsPayload = signsPayload;
        const key = `${loc.prefix}blobs/sha256/${digest.slice(0, 2)}/${digest}`;
        const err = await putVerified(loc, key, wrong, digest).then(
          () => null,
          (e: unknown) => e,
        );
        expect((err as { code?: string } | null)?.code).toBe(signsPayload ? 'XAmzContentSHA256Mismatch' : 'XAmzContentChecksumMismatch');
        expect(await keys(loc.prefix)).toEqual([]);
        await putVerified(loc, key, right, digest);
        expect(await keys(loc.prefix)).toEqual([key]);
        // Nor does a refused PUT touch what a key already holds.
        await expect(putVerified(loc, key, wrong, digest)).rejects.toThrow();
        const body = await minio.client.getObject(minio.bucket, key);
        const chunks: Buffer[] = [];
        for await (const c of body) chunks.push(c as Buffer);
        expect(Buffer.concat(chunks)).toEqual(right);
      }
    });

    it('streams a slice of a local file as the body, and sends nothing the file cannot fill', async () => {
      const loc = s3Location(s3Config(minio, `t-${randomUUID()}`));
      const path = join(tempDir('velodex-slice-'), 'scratch');
      writeFileSync(path, Buffer.concat([Buffer.from('head:'), right, Buffer.from(':tail')]));
      const key = `${loc.prefix}blobs/sha256/${digest.slice(0, 2)}/${digest}`;
      // Past the end of the file: refused before the store sees a whole body, and nothing is kept.
      await expect(putVerified(loc, key, { path, start: 5, length: right.length + 10 }, digest)).rejects.toThrow(/ended after/);
      expect(await keys(loc.prefix)).toEqual([]);
      await putVerified(loc, key, { path, start: 5, length: right.length }, digest);
      const body = await minio.client.getObject(minio.bucket, key);
      expect((await hashOf(body)).digest).toBe(digest);
      // A CRC32 that is not the slice's is refused by the store.
      const other = `${loc.prefix}other`;
      await expect(putChecked(loc, other, { path, start: 5, length: right.length }, crc32(wrong))).rejects.toMatchObject({ code: 'XAmzContentChecksumMismatch' });
      await putChecked(loc, other, { path, start: 5, length: right.length }, crc32(right));
      expect((await keys(loc.prefix)).sort()).toEqual([key, other].sort());
    });

    it('a blob of one part is one PUT to its key: no staging object, no multipart upload', async () => {
      const prefix = `t-${randomUUID()}`;
      const { store } = await s3Store(prefix);
      const info = await store.put(Readable.from([right]));
      expect(info).toEqual({ digest, size: right.length });
      expect(await keys(`${prefix}/`)).toEqual([store.key(digest)]);
      // A PUT's ETag is the MD5 of the body; the store computed it, this process did not.
      expect((await minio.client.statObject(minio.bucket, store.key(digest))).etag).toBe(createHash('md5').update(right).digest('hex'));
    });
  });

  it('a stage begun `absent` (a pull-through of bytes just found missing) publishes without asking whether the blob is there; one begun without asks first', async () => {
    const prefix = `t-${randomUUID()}`;
    const { store } = await s3Store(prefix);
    // Above ASK_ABOVE_BYTES: smaller bytes are never asked about (next test).
    const bytes = Buffer.concat([Buffer.from(`fetched for a cache ${prefix}`), Buffer.alloc(ASK_ABOVE_BYTES, 7)]);
    const digest = createHash('sha256').update(bytes).digest('hex');
    const stat = vi.spyOn(store, 'stat');
    const fresh = await store.stage({ expected: digest, absent: true });
    try {
      await fresh.append(Readable.from([bytes]));
      expect(await fresh.commit()).toEqual({ digest, size: bytes.length });
    } finally {
      await fresh.abort();
    }
    expect(stat).not.toHaveBeenCalled();
    const etag = (await minio.client.statObject(minio.bucket, store.key(digest))).etag;
    const again = await store.stage({ expected: digest });
    try {
      await again.append(Readable.from([bytes]));
      expect(await again.commit()).toEqual({ digest, size: bytes.length });
    } finally {
      await again.abort();
    }
    expect(stat).toHaveBeenCalledTimes(1);
    expect((await minio.client.statObject(minio.bucket, store.key(digest))).etag).toBe(etag);
    expect(await keys(`${prefix}/`)).toEqual([store.key(digest)]);
  });

  it('does not fsync a stage\'s scratch copy: it is unlinked once uploaded, and the PUT makes the blob durable', async () => {
    const { store, scratch } = await s3Store();
    const bytes = Buffer.concat([Buffer.from(`scratch only ${randomUUID()}`), Buffer.alloc(ASK_ABOVE_BYTES * 2, 3)]);
    const digest = createHash('sha256').update(bytes).digest('hex');
    // FileHandle is not exported; its prototype is that of any open handle.
    const probe = await open(join(scratch, 'probe'), 'w');
    const sync = vi.spyOn(Object.getPrototypeOf(probe) as FileHandle, 'sync');
    await probe.close();
    let syncs: number;
    try {
      const stage = await store.stage({ expected: digest, absent: true });
      await stage.append(Readable.from([bytes]));
      expect(await stage.commit()).toEqual({ digest, size: bytes.length });
      await stage.abort();
    } finally {
      // Counted before the restore, which forgets the calls.
      syncs = sync.mock.calls.length;
      sync.mockRestore();
    }
    expect(syncs).toBe(0);
    expect(await buffer((await store.get(digest))!)).toEqual(bytes);
    expect(readdirSync(scratch).filter((n) => n !== 'probe')).toEqual([]);
  });

  it('small bytes (a manifest, a config) are put without asking whether they are stored, and put again identical', async () => {
    const prefix = `t-${randomUUID()}`;
    const { store } = await s3Store(prefix);
    const bytes = Buffer.from(`{"small":"${prefix}"}`);
    const digest = createHash('sha256').update(bytes).digest('hex');
    const stat = vi.spyOn(store, 'stat');
    for (let i = 0; i < 2; i++) {
      const stage = await store.stage({ expected: digest });
      try {
        await stage.append(Readable.from([bytes]));
        expect(await stage.commit()).toEqual({ digest, size: bytes.length });
      } finally {
        await stage.abort();
      }
    }
    expect(stat).not.toHaveBeenCalled();
    expect(await buffer((await store.get(digest))!)).toEqual(bytes);
    expect(await keys(`${prefix}/`)).toEqual([store.key(digest)]);
  });

  it('two stores on one bucket see each other\'s commits and deletes', async () => {
    const prefix = `t-${randomUUID()}`;
    const a = (await s3Store(prefix)).store;
    const b = (await s3Store(prefix)).store;
    const { digest } = await a.put(Readable.from([Buffer.from('shared bytes')]));
    expect(await b.stat(digest)).toEqual({ digest, size: 12, modifiedMs: expect.any(Number) });
    // b commits the same bytes again: no error (small, so written again identical).
    const stage = await b.stage();
    await stage.append(Readable.from([Buffer.from('shared bytes')]));
    expect(await stage.commit(digest)).toEqual({ digest, size: 12 });
    await stage.abort();
    expect(await b.delete(digest)).toBe(true);
    expect(await a.get(digest)).toBeNull();
  });

  it('sweeps staging objects older than the given age, and leaves fresh ones', async () => {
    const prefix = `t-${randomUUID()}`;
    const { store } = await s3Store(prefix);
    await minio.client.putObject(minio.bucket, `${prefix}/staging/killed-mid-commit`, Buffer.from('left behind'));
    // MinIO stamps objects with its own clock, to the second: 3 s apart is clearly older than 2 s.
    await new Promise((r) => setTimeout(r, 3000));
    await minio.client.putObject(minio.bucket, `${prefix}/staging/live`, Buffer.from('in flight'));
    expect(await store.sweepStaging(2000)).toBe(1);
    expect(await keys(`${prefix}/staging/`)).toEqual([`${prefix}/staging/live`]);
  });

  it('sweeps stage files a killed process left in the scratch folder when it opens; others stay', async () => {
    const scratch = tempDir('velodex-scratch-');
    const old = new Date(Date.now() - 25 * 60 * 60 * 1000);
    for (const name of ['stage-killed', 'not-a-stage']) {
      writeFileSync(join(scratch, name), 'left behind');
      utimesSync(join(scratch, name), old, old);
    }
    writeFileSync(join(scratch, 'stage-recent'), 'maybe live');
    await new S3BlobStore(s3Location(s3Config(minio, `t-${randomUUID()}`)), { scratchDir: scratch }).init();
    expect(readdirSync(scratch).sort()).toEqual(['not-a-stage', 'stage-recent']);
    rmSync(scratch, { recursive: true, force: true });
  });

  it('cannot list MinIO\'s multipart uploads by prefix, so MinIO\'s own stale-upload expiry removes them', async () => {
    // sweepStaging also aborts old multipart uploads under <prefix>staging/, which AWS S3 lists
    // by prefix; MinIO lists them only for an exact key (this shows it), and expires abandoned
    // uploads itself (MINIO_API_STALE_UPLOADS_EXPIRY, 24 h by default). docs/storage.md says so.
    const prefix = `t-${randomUUID()}`;
    const { store } = await s3Store(prefix);
    const key = `${prefix}/staging/killed-mid-upload`;
    const id = await minio.client.initiateNewMultipartUpload(minio.bucket, key, {});
    try {
      await new Promise((r) => setTimeout(r, 1100));
      expect(await store.sweepStaging(0)).toBe(0);
      expect((await minio.client.listIncompleteUploadsQuery(minio.bucket, `${prefix}/staging/`, '', '', '')).uploads).toEqual([]);
      expect((await minio.client.listIncompleteUploadsQuery(minio.bucket, key, '', '', '')).uploads.map((u) => u.uploadId)).toEqual([id]);
    } finally {
      await minio.client.abortMultipartUpload(minio.bucket, key, id);
    }
  });

  it('fails with StoreUnavailableError, naming no key, while MinIO is down, and works again after', async () => {
    const { store } = await s3Store();
    const { digest } = await store.put(Readable.from([Buffer.from('before the outage')]));
    await minio.pause();
    try {
      for (const call of [() => store.stat(digest), () => store.get(digest), () => store.put(Readable.from([Buffer.from('during')])), () => store.delete(digest)]) {
        const err = await call().then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect(String((err as Error).message)).not.toContain(minio.secretKey);
        expect(String((err as Error).message)).not.toContain(minio.accessKey);
      }
    } finally {
      await minio.start();
    }
    expect(await store.stat(digest)).toEqual({ digest, size: 17, modifiedMs: expect.any(Number) });
  });
});

/** The bytes `start..end` (inclusive) of `source`, as an iterable. */
async function* sliced(source: Readable, start: number, end: number): AsyncIterable<Buffer> {
  let pos = 0;
  for await (const chunk of source) {
    const buf = chunk as Buffer;
    const from = Math.max(start - pos, 0);
    const to = Math.min(end + 1 - pos, buf.length);
    if (to > from) yield buf.subarray(from, to);
    pos += buf.length;
  }
}
