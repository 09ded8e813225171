/**
 * The MetaStore contract on both backends, and what only the s3 backend has to prove against a
 * real MinIO: the conditional writes it relies on, several stores (processes, in effect) on one
 * key, and MinIO going away mid-operation and coming back.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { Secret } from '../../registry/src/config/secret.js';
import type { StorageConfig } from '../../registry/src/config/types.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { s3Location } from '../../registry/src/storage/s3/connect.js';
import { S3MetaStore } from '../../registry/src/storage/s3/meta-store.js';
import { StoreUnavailableError } from '../../registry/src/storage/types.js';
import { updateDoc } from '../../registry/src/storage/update.js';
import { startMinio, type Minio } from '../support/minio.js';
import { REPO } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/velodex.js';
import { describeMetaStore } from './contract/meta-store.js';

let minio: Minio;
beforeAll(async () => {
  minio = await startMinio();
});
afterAll(async () => {
  await minio?.stop();
});

function s3Config(m: Minio, prefix = `t-${randomUUID()}`): StorageConfig {
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

/** Each call is its own client and connection pool: a separate process, as far as the store can tell. */
const s3Store = (m: Minio, prefix?: string) => new S3MetaStore(s3Location(s3Config(m, prefix)));

describeMetaStore('fs', async () => {
  const store = new FsMetaStore(tempDir('velodex-meta-'));
  await store.init();
  return store;
});

// A fresh prefix per test: the bucket is shared, the documents are not.
describeMetaStore('s3 (MinIO)', async () => s3Store(minio));

describe('MinIO, as the s3 MetaStore relies on it', () => {
  const put = (name: string, body: string, headers: Record<string, string>) => minio.client.putObject(minio.bucket, name, Buffer.from(body), body.length, headers);

  it('answers 412 to If-None-Match: * on an existing key and to a stale If-Match', async () => {
    const name = `raw/${randomUUID()}`;
    const first = await put(name, 'one', { 'If-None-Match': '*' });
    await expect(put(name, 'two', { 'If-None-Match': '*' })).rejects.toMatchObject({ code: 'PreconditionFailed' });
    const second = await put(name, 'two', { 'If-Match': `"${first.etag}"` });
    await expect(put(name, 'three', { 'If-Match': `"${first.etag}"` })).rejects.toMatchObject({ code: 'PreconditionFailed' });
    // If-Match on a key that does not exist is refused too (404), never an unconditional create.
    await expect(put(`raw/${randomUUID()}`, 'x', { 'If-Match': `"${second.etag}"` })).rejects.toMatchObject({ code: 'NoSuchKey' });
  });

  it('ignores If-Match on DELETE, which is why deletes are tombstone writes', async () => {
    const name = `raw/${randomUUID()}`;
    await put(name, 'live', {});
    const res = await fetch(await minio.client.presignedUrl('DELETE', minio.bucket, name, 60), { method: 'DELETE', headers: { 'If-Match': '"0123456789abcdef0123456789abcdef"' } });
    // Were the condition honoured this would be 412 and the object would still be there.
    expect(res.status).toBe(204);
    await expect(minio.client.statObject(minio.bucket, name)).rejects.toMatchObject({ code: 'NotFound' });
  });
});

describe('s3 MetaStore layout in the bucket', () => {
  it('keeps each document at <prefix>meta/<key>.json and a deleted one as a 0-byte tombstone', async () => {
    const prefix = `t-${randomUUID()}`;
    const store = s3Store(minio, `${prefix}/`);
    const version = await store.put('a/b', { n: 1 }, null);
    const stat = await minio.client.statObject(minio.bucket, `${prefix}/meta/a/b.json`);
    expect(stat.etag).toBe(version);
    expect(stat.size).toBe(JSON.stringify({ n: 1 }).length);
    expect(await store.delete('a/b', version)).toBe(true);
    expect((await minio.client.statObject(minio.bucket, `${prefix}/meta/a/b.json`)).size).toBe(0);
    // An unconditional delete clears the tombstone too.
    expect(await store.delete('a/b')).toBe(false);
    await expect(minio.client.statObject(minio.bucket, `${prefix}/meta/a/b.json`)).rejects.toMatchObject({ code: 'NotFound' });
  });
});

describe('s3 MetaStore across processes and faults', () => {
  it('loses no update when two stores (as two processes) update one key concurrently', async () => {
    const prefix = `t-${randomUUID()}`;
    const a = s3Store(minio, prefix);
    const b = s3Store(minio, prefix);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => updateDoc<{ seen: number[] }>(i % 2 ? a : b, 'shared/doc', (cur) => ({ seen: [...(cur?.seen ?? []), i] }))),
    );
    for (const store of [a, b]) {
      const found = await store.get<{ seen: number[] }>('shared/doc');
      expect(found?.doc.seen.slice().sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    }
    // A delete through one is seen by the other at once: nothing is cached per store.
    const current = await a.get('shared/doc');
    expect(await b.delete('shared/doc', current?.version)).toBe(true);
    expect(await a.get('shared/doc')).toBeNull();
  });

  it('reads an unchanged document as a 304 and hands back the same frozen copy; a change by another process is read at once', async () => {
    const prefix = `t-${randomUUID()}`;
    const loc = s3Location(s3Config(minio, prefix));
    const statuses: number[] = [];
    const send = loc.requests.request.bind(loc.requests);
    loc.requests.request = async (...args) => {
      const res = await send(...args);
      statuses.push(res.statusCode ?? 0);
      return res;
    };
    const a = new S3MetaStore(loc);
    const b = s3Store(minio, prefix);
    await b.put('docs/one', { tags: { v1: 'x' } });
    const first = await a.get<{ tags: Record<string, string> }>('docs/one');
    const second = await a.get<{ tags: Record<string, string> }>('docs/one');
    expect(statuses).toEqual([200, 304]);
    expect(second?.doc).toBe(first?.doc);
    expect(Object.isFrozen(second?.doc.tags)).toBe(true);
    expect(() => {
      (second as { doc: { tags: Record<string, string> } }).doc.tags.v2 = 'y';
    }).toThrow(TypeError);
    // Another process changes it: the next read is the new document, not the cached one.
    await b.put('docs/one', { tags: { v1: 'z' } }, second?.version);
    expect((await a.get<{ tags: Record<string, string> }>('docs/one'))?.doc.tags).toEqual({ v1: 'z' });
    expect(statuses.at(-1)).toBe(200);
    await b.delete('docs/one');
    expect(await a.get('docs/one')).toBeNull();
  });

  it('remembers what it last read or wrote for an update to start from (seen): one request per update of a document it knows, and another process\'s write still read before it is changed', async () => {
    const prefix = `t-${randomUUID()}`;
    const loc = s3Location(s3Config(minio, prefix));
    const sent: string[] = [];
    const send = loc.requests.request.bind(loc.requests);
    loc.requests.request = async (...args) => {
      sent.push(args[0]);
      return send(...args);
    };
    const a = new S3MetaStore(loc);
    const b = s3Store(minio, prefix);
    expect(a.seen('docs/two')).toBeUndefined();
    expect(await a.get('docs/two')).toBeNull();
    expect(a.seen('docs/two')).toBeNull();
    type Doc = { names: string[] };
    const add = (name: string) => (doc: Doc | undefined) => ({ names: [...(doc?.names ?? []), name] });
    sent.length = 0;
    // Seen absent: created with no read; then updated from what it wrote, with no read either.
    await updateDoc<Doc>(a, 'docs/two', add('x'));
    await updateDoc<Doc>(a, 'docs/two', add('y'));
    expect(sent).toEqual(['PUT', 'PUT']);
    sent.length = 0;
    const written = await b.get<Doc>('docs/two');
    expect(written?.doc).toEqual({ names: ['x', 'y'] });
    expect(a.seen('docs/two')?.version).toBe(written?.version);
    // Another process writes: the guess is stale, the write refused, the document read, nothing lost.
    await b.put<Doc>('docs/two', { names: ['x', 'y', 'b'] }, written?.version);
    await updateDoc<Doc>(a, 'docs/two', add('z'));
    expect(sent).toEqual(['PUT', 'GET', 'PUT']);
    expect((await b.get<Doc>('docs/two'))?.doc).toEqual({ names: ['x', 'y', 'b', 'z'] });
    await a.delete('docs/two');
    expect(a.seen('docs/two')).toBeNull();
  });

  it('loses no update when three writer processes update one key concurrently', async () => {
    const prefix = `t-${randomUUID()}`;
    const env = {
      S3_ENDPOINT: minio.endpoint,
      S3_BUCKET: minio.bucket,
      S3_PREFIX: prefix,
      S3_ACCESS_KEY: minio.accessKey,
      S3_SECRET_KEY: minio.secretKey,
      KEY: 'shared/doc',
      COUNT: '15',
    };
    const fixture = join(REPO, 'test', 'storage', 'fixtures', 'meta-writer.ts');
    const writers = ['a', 'b', 'c'];
    const results = await Promise.all(writers.map((w) => run(process.execPath, ['--import', 'tsx', fixture], { cwd: REPO, env: { ...env, WRITER: w }, timeoutMs: 120_000 })));
    expect(results.map((r) => r.stdout.trim())).toEqual(writers.map((w) => `done ${w}`));
    const found = await s3Store(minio, prefix).get<{ seen: string[] }>('shared/doc');
    const expected = writers.flatMap((w) => Array.from({ length: 15 }, (_, n) => `${w}:${n}`));
    expect(found?.doc.seen.slice().sort()).toEqual(expected.sort());
  });

  it('fails with StoreUnavailableError when the store accepts a connection and never answers', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((sock) => sockets.push(sock));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const store = new S3MetaStore(s3Location({ ...s3Config(minio), endpoint }, { responseTimeoutMs: 300 }));
      const err = (await store.get('slow/doc').then(() => null, (e: unknown) => e)) as Error;
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect(err.message).toBe(`object store ${endpoint} failed while reading slow/doc: ETIMEDOUT`);
    } finally {
      for (const sock of sockets) sock.destroy();
      silent.close();
    }
  });

  it('waits for an answer as long as [storage] response_timeout_secs says, then fails with StoreUnavailableError', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((sock) => sockets.push(sock));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const config = parseConfigText(
        `[storage]\nbackend = "s3"\nendpoint = "${endpoint}"\nbucket = "b"\naccess_key = "ak"\nsecret_key = "sk"\nresponse_timeout_secs = 2\n`,
        'timeout.toml',
        { ecosystems, env: {} },
      );
      const store = new S3MetaStore(s3Location(config.storage));
      const started = Date.now();
      const err = (await store.get('slow/doc').then(() => null, (e: unknown) => e)) as Error;
      const waited = Date.now() - started;
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect(err.message).toContain('ETIMEDOUT');
      // Two seconds, not the default thirty (a loaded machine may add a little).
      expect(waited).toBeGreaterThanOrEqual(1900);
      expect(waited).toBeLessThan(15_000);
    } finally {
      for (const sock of sockets) sock.destroy();
      silent.close();
    }
    expect(() => parseConfigText('[storage]\nresponse_timeout_secs = 5\n', 'fs.toml', { ecosystems, env: {} })).toThrow(/storage\.response_timeout_secs.*is for the object store/);
  });

  it('fails with a clear error while MinIO is down, never crashes, and works again after a restart', async () => {
    // Its own server: stopping the shared one would break the other tests.
    const own = await startMinio();
    try {
      const store = s3Store(own);
      await store.put('fault/doc', { n: 0, seen: [] }, null);
      // Updates in flight when the server goes away.
      const inFlight = Array.from({ length: 20 }, (_, i) => updateDoc<{ n: number; seen: number[] }>(store, 'fault/doc', (cur) => ({ n: (cur?.n ?? 0) + 1, seen: [...(cur?.seen ?? []), i] })));
      const outcome = Promise.allSettled(inFlight);
      await new Promise((r) => setTimeout(r, 15));
      await own.pause();
      const settled = await outcome;
      const failures = settled.filter((s) => s.status === 'rejected').map((s) => s.reason as Error);
      for (const err of failures) {
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect(err.message).toContain(own.endpoint);
      }
      const acknowledged = settled.filter((s) => s.status === 'fulfilled').length;

      // Down: every operation says so, naming the endpoint and never a key.
      const ops = [
        () => store.get('fault/doc'),
        () => store.put('fault/doc', { n: -1 }),
        () => store.delete('fault/doc'),
        async () => {
          for await (const k of store.list('fault')) void k;
        },
      ];
      for (const op of ops) {
        const err = (await op().then(() => null, (e: unknown) => e)) as Error;
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect(err.message).toMatch(new RegExp(`object store ${own.endpoint} failed while \\w+ .*: (ECONNREFUSED|ECONNRESET|EPIPE)`));
        expect(err.message).not.toContain(own.secretKey);
        expect(err.message).not.toContain(own.accessKey);
      }

      await own.start();
      const after = await store.get<{ n: number; seen: number[] }>('fault/doc');
      // Every acknowledged update is there; an unacknowledged one may or may not be.
      expect(after?.doc.n).toBe(after?.doc.seen.length);
      expect(after?.doc.n).toBeGreaterThanOrEqual(acknowledged);
      await store.put('fault/doc', { n: 100, seen: [] }, after?.version);
      expect((await store.get<{ n: number }>('fault/doc'))?.doc.n).toBe(100);
    } finally {
      await own.stop();
    }
  });
});
