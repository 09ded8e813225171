/**
 * The fs backend's read path (`storage/fs/file-body.ts`): piped into an HTTP response, it lends
 * pooled buffers to the socket and takes them back once written. Reusing a buffer too early would
 * send one download's bytes in another's body, so these tests serve many different files at once
 * to slow and fast readers over real sockets and compare every byte; and a changed, truncated or
 * abandoned file must end the way the store promises (cut transfer, no leak).
 */
import { createHash } from 'node:crypto';
import { readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer, get, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { DigestMismatchError, type ByteRange } from '../../registry/src/storage/types.js';
import { pseudoRandom } from '../support/oci-image.js';
import { tempDir } from '../support/velodex.js';

const KiB = 1024;
let store: FsBlobStore;
let root: string;
let server: Server;
let base: string;
const streamErrors: unknown[] = [];

async function putBytes(bytes: Buffer): Promise<string> {
  const { Readable } = await import('node:stream');
  return (await store.put(Readable.from([bytes]))).digest;
}

beforeAll(async () => {
  root = tempDir('velodex-file-body-');
  store = new FsBlobStore(root);
  await store.init();
  // The shape of the registry's routes: headers from what is known, then the store's stream piped
  // into the response (fastify does `stream.pipe(res)`).
  server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const digest = url.pathname.slice(1);
      const start = url.searchParams.get('start');
      const range: ByteRange | undefined = start === null ? undefined : { start: Number(start), end: Number(url.searchParams.get('end')) };
      const info = await store.stat(digest);
      const body = await store.get(digest, range);
      if (!info || !body) {
        res.writeHead(404).end();
        return;
      }
      res.setHeader('content-length', range ? range.end - range.start + 1 : info.size);
      body.once('error', (err) => {
        streamErrors.push(err);
        res.destroy();
      });
      res.once('close', () => body.destroy());
      body.pipe(res);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

interface Download {
  status: number;
  declared: number;
  body: Buffer;
  /** The connection ended before Content-Length bytes came. */
  cut: boolean;
}

/** GET with a reader that, when `slow`, pauses after each chunk (the socket backs up, writes go async). */
function download(path: string, slow = false): Promise<Download> {
  return new Promise((resolve, reject) => {
    get(`${base}${path}`, { agent: false }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      const declared = Number(res.headers['content-length'] ?? -1);
      const finish = (cut: boolean) => resolve({ status: res.statusCode ?? 0, declared, body: Buffer.concat(chunks), cut });
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        if (slow) {
          res.pause();
          setTimeout(() => res.resume(), 5);
        }
      });
      res.once('end', () => finish(false));
      res.once('aborted', () => finish(true));
      res.once('error', () => finish(true));
    }).once('error', reject);
  });
}

function openFiles(): number {
  return readdirSync('/proc/self/fd').length;
}

describe('FileBody piped into HTTP responses', () => {
  it('serves many different files at once to slow and fast readers, every byte its own, whole and ranged', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            size: fc.integer({ min: 0, max: 1200 * KiB }),
            seed: fc.string({ minLength: 1, maxLength: 8 }),
            slow: fc.boolean(),
            range: fc.option(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }))),
          }),
          { minLength: 2, maxLength: 8 },
        ),
        async (files) => {
          const prepared = await Promise.all(
            files.map(async (f, i) => {
              const bytes = pseudoRandom(`${f.seed}-${i}-${f.size}`, f.size);
              const digest = await putBytes(bytes);
              if (!f.range || f.size === 0) return { path: `/${digest}`, expected: bytes, slow: f.slow };
              const [a, b] = f.range.map((x) => Math.min(f.size - 1, Math.floor(x * f.size))) as [number, number];
              const [start, end] = a <= b ? [a, b] : [b, a];
              return { path: `/${digest}?start=${start}&end=${end}`, expected: bytes.subarray(start, end + 1), slow: f.slow };
            }),
          );
          const got = await Promise.all(prepared.map((p) => download(p.path, p.slow)));
          for (const [i, g] of got.entries()) {
            expect(g.status).toBe(200);
            expect(g.cut).toBe(false);
            expect(g.body.length).toBe(prepared[i]!.expected.length);
            expect(g.body.equals(prepared[i]!.expected)).toBe(true);
          }
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);

  it('keeps each buffer lent until its socket wrote it: large files to readers that back the sockets up', async () => {
    const files = await Promise.all(
      [0, 1, 2, 3, 4, 5].map(async (i) => {
        const bytes = pseudoRandom(`backed-up-${i}`, 8 * 1024 * KiB + i * 4099);
        return { bytes, digest: await putBytes(bytes) };
      }),
    );
    // Half the readers stall (their socket buffers fill and writes complete late) while the others
    // read at full speed and keep taking buffers from the pool.
    const got = await Promise.all(files.map((f, i) => download(`/${f.digest}`, i % 2 === 0)));
    for (const [i, g] of got.entries()) {
      expect(g.cut).toBe(false);
      expect(g.body.equals(files[i]!.bytes)).toBe(true);
    }
  }, 60_000);

  it('cuts the transfer before the last chunk when the stored bytes were changed, and closes the file', async () => {
    const bytes = pseudoRandom('changed-on-disk', 3 * 256 * KiB + 1000);
    const digest = await putBytes(bytes);
    const changed = Buffer.from(bytes);
    changed[changed.length - 5] = (changed[changed.length - 5] ?? 0) ^ 0xff;
    writeFileSync(join(root, 'blobs', 'sha256', digest.slice(0, 2), digest), changed);
    const before = openFiles();
    streamErrors.length = 0;
    const got = await download(`/${digest}`);
    expect(got.cut).toBe(true);
    expect(got.body.length).toBeLessThan(bytes.length);
    // Whatever went out is a prefix of the file: the last chunk (holding the change) never did.
    expect(got.body.equals(changed.subarray(0, got.body.length))).toBe(true);
    expect(got.body.length).toBeLessThanOrEqual(3 * 256 * KiB);
    expect(streamErrors.some((e) => e instanceof DigestMismatchError)).toBe(true);
    await until(() => openFiles() <= before);
  });

  it('fails a file truncated behind the store\'s back (short read) instead of hanging', async () => {
    const bytes = pseudoRandom('truncated', 600 * KiB);
    const digest = await putBytes(bytes);
    // Read once whole, so the version is remembered as verified and the next read is not hashed.
    expect((await download(`/${digest}`)).body.equals(bytes)).toBe(true);
    const path = join(root, 'blobs', 'sha256', digest.slice(0, 2), digest);
    truncateSync(path, 300 * KiB);
    streamErrors.length = 0;
    const got = await download(`/${digest}?start=0&end=${600 * KiB - 1}`);
    expect(got.cut).toBe(true);
    expect(String(streamErrors[0])).toMatch(/ended .* bytes before its recorded size/);
  });

  it('stops reading and closes the file when the client goes away mid-download', async () => {
    const bytes = pseudoRandom('abandoned', 8 * 1024 * KiB);
    const digest = await putBytes(bytes);
    const before = openFiles();
    await new Promise<void>((resolve, reject) => {
      const req = get(`${base}/${digest}`, { agent: false }, (res) => {
        let seen = 0;
        res.on('data', (c: Buffer) => {
          seen += c.length;
          if (seen > 512 * KiB) {
            req.destroy();
            resolve();
          }
        });
      });
      req.once('error', () => undefined);
      setTimeout(() => reject(new Error('no bytes came')), 10_000).unref();
    });
    await until(() => openFiles() <= before);
    // The server still serves afterwards, and the buffers it took back carry no stale bytes.
    expect((await download(`/${digest}`)).body.equals(bytes)).toBe(true);
  });
});

describe('FileBody read by other consumers', () => {
  it('reads whole and ranged with for-await, verified the same way', async () => {
    const bytes = pseudoRandom('pulled', 700 * KiB);
    const digest = await putBytes(bytes);
    const collect = async (range?: ByteRange) => {
      const chunks: Buffer[] = [];
      for await (const c of (await store.get(digest, range))!) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    };
    expect((await collect()).equals(bytes)).toBe(true);
    expect((await collect({ start: 1000, end: 300 * KiB })).equals(bytes.subarray(1000, 300 * KiB + 1))).toBe(true);
    const empty = await putBytes(Buffer.alloc(0));
    expect(createHash('sha256').update(await (async () => {
      const chunks: Buffer[] = [];
      for await (const c of (await store.get(empty))!) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    })()).digest('hex')).toBe(empty);

    const changed = Buffer.from(bytes);
    changed[10] = (changed[10] ?? 0) ^ 1;
    const other = await putBytes(pseudoRandom('pulled-changed', 700 * KiB));
    writeFileSync(join(root, 'blobs', 'sha256', other.slice(0, 2), other), changed);
    await expect(
      (async () => {
        for await (const _ of (await store.get(other))!) void _;
      })(),
    ).rejects.toBeInstanceOf(DigestMismatchError);
  });
});

async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
