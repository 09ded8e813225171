/**
 * A velodex process killed (SIGKILL) in the middle of a 200 MiB blob upload on the s3 backend,
 * at the worst moment: the blob's digest was given (`POST ?digest=`), so its parts went to a
 * multipart upload to the blob's own key, every part is in the bucket, and the request that
 * completes the upload is under way (held by a fault proxy between that process and MinIO).
 * Nothing partial is ever visible under the digest; the client's retry on another process over
 * the same bucket succeeds beside the unfinished upload; a restarted process's sweep leaves
 * another process's live upload session alone, which completes afterwards. The killed process's
 * unfinished upload is the store's to expire (MinIO lists uploads by exact key only, so no
 * listing by prefix finds it there; on S3 `sweepStaging` aborts it by age).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStores } from '../../registry/src/storage/index.js';
import { Registry } from '../oci/api-support.js';
import { oci, s3Storage, toml } from '../support/config.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startMinio, type Minio } from '../support/minio.js';
import { storageOf, storeProbe } from '../support/store-probe.js';
import { startVelodex, type Velodex } from '../support/velodex.js';

const TOKEN = 's3-killed-token-7d1a';
const MiB = 1024 * 1024;
const SIZE = 200 * MiB;
const PREFIX = 'killed';
const auth = `Basic ${Buffer.from(`__token__:${TOKEN}`).toString('base64')}`;

let minio: Minio;
let proxy: FaultProxy;
const running: Velodex[] = [];

beforeAll(async () => {
  minio = await startMinio();
  proxy = await FaultProxy.start(minio.endpoint, { keepHost: true });
});

afterAll(async () => {
  for (const s of running) await s.stop();
  await proxy?.close();
  await minio?.stop();
});

function config(endpoint: string): string {
  // A 200 MiB blob read back while another process, and the rest of the suite, keep MinIO busy:
  // more than the default 30 s for MinIO to begin answering is not what this test is about.
  return toml(s3Storage(minio, { prefix: PREFIX, endpoint, responseTimeoutSecs: 120 }), oci.hosted('images', { route: 'team/images', token: TOKEN }));
}

async function start(endpoint: string, dataDir?: string): Promise<Velodex> {
  const server = await startVelodex({ config: config(endpoint), ...(dataDir ? { dataDir } : {}) });
  running.push(server);
  return server;
}

/** Block `i` (1 MiB) of the reproducible stream `seed`: the client never holds the 200 MiB blob. */
function block(seed: number, i: number): Buffer {
  return Buffer.from(createHash('sha256').update(`${seed}/${i}`).digest('hex').repeat(MiB / 64));
}

function digestOf(seed: number, size: number): string {
  const h = createHash('sha256');
  for (let i = 0; i < size / MiB; i++) h.update(block(seed, i));
  return h.digest('hex');
}

/** A monolithic `POST ?digest=` streamed from the generator; resolves with the status, or the error that cut it. */
function postBlob(server: Velodex, seed: number, size: number, hex: string): Promise<number | Error> {
  const url = new URL(`${server.url}/v2/team/images/big/blobs/uploads/?digest=sha256:${hex}`);
  return new Promise((resolve) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: `${url.pathname}${url.search}`,
        headers: { authorization: auth, 'content-type': 'application/octet-stream', 'content-length': String(size) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', (err) => resolve(err));
      },
    );
    req.on('error', (err) => resolve(err));
    const gen = (function* () {
      for (let i = 0; i < size / MiB; i++) yield block(seed, i);
    })();
    pipeline(Readable.from(gen), req).catch((err: Error) => resolve(err));
  });
}

/** The sha256 of a blob as one server streams it whole (verified on its way out too). */
async function servedDigest(server: Velodex, hex: string): Promise<{ status: number; digest: string; size: number }> {
  const res = await fetch(`${server.url}/v2/team/images/big/blobs/sha256:${hex}`);
  const h = createHash('sha256');
  let size = 0;
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      h.update(chunk);
      size += chunk.length;
    }
  }
  return { status: res.status, digest: h.digest('hex'), size };
}

it('kill -9 mid-commit: nothing partial visible, the retry on another process succeeds beside the unfinished upload, a live session is untouched by a restarted process\'s sweep', async () => {
  // A reaches MinIO through the proxy, which holds the completion of the multipart upload that
  // publishes a blob (the second POST to a blob key; the first begins the upload, and parts pass).
  // B reaches MinIO directly; same bucket, same prefix.
  let posts = 0;
  proxy.on((path, method) => method === 'POST' && path.includes(`/${PREFIX}/blobs/sha256/`) && ++posts === 2, { kind: 'stall' });
  const a = await start(proxy.url);
  const b = await start(minio.endpoint);
  const reg = new Registry(b.url, auth);
  const probe = await storeProbe(b.dataDir);

  const seed = 7;
  const hex = digestOf(seed, SIZE);
  const upload = postBlob(a, seed, SIZE, hex);
  await proxy.stalled();
  // The whole blob is in the bucket as an unfinished upload to its key now; A is completing it.
  const key = `${PREFIX}/blobs/sha256/${hex.slice(0, 2)}/${hex}`;
  const unfinished = async () => (await minio.client.listIncompleteUploadsQuery(minio.bucket, key, '', '', '')).uploads.map((u) => u.uploadId);
  const leftover = await unfinished();
  expect(leftover).toHaveLength(1);
  // No staging object and no copy: the parts went to the blob's key.
  const staged = await probe.staged();
  expect(staged).toEqual([]);
  process.kill(a.pid, 'SIGKILL');
  const outcome = await upload;
  expect(outcome).toBeInstanceOf(Error);
  // The completion A sent stays held (and is dropped when the proxy closes): it never reaches
  // MinIO, as if A had died before sending it. Later requests through the proxy pass.
  proxy.clear();

  // Nothing under the digest, through any process or in the bucket.
  expect(await probe.blobs()).not.toContain(hex);
  expect((await reg.fetch(`/v2/team/images/big/blobs/sha256:${hex}`, { method: 'HEAD' })).status).toBe(404);
  expect(await probe.staged()).toEqual(staged);
  expect(await unfinished()).toEqual(leftover);

  // A live chunked upload on B, across the sweep below: its first 16 MiB already in the bucket.
  const session = await reg.openUpload('team/images/live');
  const live = Buffer.concat(Array.from({ length: 24 }, (_, i) => block(99, i)));
  const first = await reg.fetch(session, { method: 'PATCH', body: live.subarray(0, 16 * MiB), headers: { 'content-type': 'application/octet-stream', 'content-range': `0-${16 * MiB - 1}` } });
  expect(first.status).toBe(202);

  // The client retries on B: the blob is published whole, and streams back verified; A's
  // unfinished upload to the same key neither blocks it nor shows.
  expect(await postBlob(b, seed, SIZE, hex)).toBe(201);
  expect(await servedDigest(b, hex)).toEqual({ status: 200, digest: hex, size: SIZE });
  expect(await unfinished()).toEqual(leftover);

  // A restarts on its data dir: its start-up sweep (a day's age) leaves the young leftover alone.
  const restarted = await start(proxy.url, a.dataDir);
  await sleep(1000);
  expect(await probe.staged()).toEqual(staged);
  expect(await unfinished()).toEqual(leftover);
  // The same sweep with a small age, from a store opened as a restarted process opens it: on
  // MinIO it finds nothing of A's to remove (see the top), and must not take B's live session.
  await sleep(3000);
  const stores = await openStores(storageOf(restarted.dataDir), { scratchDir: join(restarted.dataDir, 'scratch'), staleStagingMs: 2000 });
  await stores.sweep();
  expect(await probe.staged()).toEqual([]);
  // The killed process's local copy went with it.
  const scratch = join(restarted.dataDir, 'scratch');
  expect(existsSync(scratch) ? readdirSync(scratch).filter((f) => f.startsWith('stage-')) : []).toEqual([]);

  // B's session was not touched: it takes its last chunk and commits.
  const liveHex = createHash('sha256').update(live).digest('hex');
  const last = await reg.fetch(`${session}${session.includes('?') ? '&' : '?'}digest=sha256:${liveHex}`, {
    method: 'PUT',
    body: live.subarray(16 * MiB),
    headers: { 'content-type': 'application/octet-stream', 'content-range': `${16 * MiB}-${live.length - 1}` },
  });
  expect(last.status, await last.text()).toBe(201);
  const got = await reg.fetch(`/v2/team/images/live/blobs/sha256:${liveHex}`);
  expect(createHash('sha256').update(Buffer.from(await got.arrayBuffer())).digest('hex')).toBe(liveHex);
  // And the restarted A serves the blob B published (its log, should it not: a loaded run once
  // saw a quick 503 here that no run alone has shown).
  const served = await servedDigest(restarted, hex);
  expect(served, restarted.logs().slice(-6000)).toEqual({ status: 200, digest: hex, size: SIZE });
}, 300_000);
