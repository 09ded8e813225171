/**
 * OCI upload sessions in the shared store: three velodex processes on one real MinIO bucket act
 * as one registry for chunked pushes. Every verb of one upload (POST, PATCH, status GET, PUT,
 * DELETE) goes to another process; real clients (crane, oras, regctl, the conformance suites) push
 * through a round-robin proxy that sends each request to the next process; a process killed mid-
 * PATCH loses nothing and exposes nothing; two PATCHes at once on one session from two processes
 * leave it consistent. Runs on its own MinIO whatever VELODEX_TEST_STORAGE says.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3StorageToml } from '../support/backend.js';
import { startMinio, type Minio } from '../support/minio.js';
import { allBlobs, buildImage, buildIndex, layoutMismatches, pseudoRandom, readLayout, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { RoundRobinProxy } from '../support/round-robin.js';
import { run, type RunResult } from '../support/run.js';
import { storeProbe, type StoreProbe } from '../support/store-probe.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { runMain, runV111 } from './conformance-support.js';
import { expectOciError, sha256, TWO_TEAMS } from './api-support.js';

const AUTH = basicAuth('token-a');
const REPO = 'team-a/oci/shared';
const MiB = 1024 * 1024;

let minio: Minio;
let storage: string;
const prefix = 'sessions';
let a: Velodex;
let b: Velodex;
let c: Velodex;
let proxy: RoundRobinProxy;
let probe: StoreProbe;
const extra: Velodex[] = [];

async function startOne(): Promise<Velodex> {
  return startVelodex({ config: `${storage}\n${TWO_TEAMS}` });
}

beforeAll(async () => {
  minio = await startMinio();
  storage = s3StorageToml({ endpoint: minio.endpoint, bucket: minio.bucket, accessKey: minio.accessKey, secretKey: minio.secretKey }, prefix);
  [a, b, c] = await Promise.all([startOne(), startOne(), startOne()]);
  proxy = await RoundRobinProxy.start([a.url, b.url, c.url]);
  probe = await storeProbe(a.dataDir);
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  await Promise.all([a, b, c, ...extra].map((s) => s?.stop()));
  await minio?.stop();
});

/** Names of the chunk objects in the bucket (what shared sessions hold between requests). */
async function chunkObjects(): Promise<string[]> {
  const out: string[] = [];
  for await (const item of minio.client.listObjectsV2(minio.bucket, `${prefix}/chunks/`, true) as AsyncIterable<{ name?: string }>) if (item.name) out.push(item.name);
  return out;
}

async function open(server: Velodex, repo = REPO): Promise<string> {
  const res = await fetch(`${server.url}/v2/${repo}/blobs/uploads/`, { method: 'POST', headers: { Authorization: AUTH } });
  expect(res.status).toBe(202);
  expect(res.headers.get('range')).toBe('0-0');
  const location = res.headers.get('location');
  expect(location).toMatch(new RegExp(`^/v2/${REPO}/blobs/uploads/[0-9a-f-]{36}$`));
  return location ?? '';
}

function idOf(location: string): string {
  return location.split('/').pop() ?? '';
}

async function patch(server: Velodex, location: string, body: Buffer, start?: number): Promise<Response> {
  const headers: Record<string, string> = { Authorization: AUTH, 'Content-Type': 'application/octet-stream' };
  if (start !== undefined) headers['Content-Range'] = `${start}-${start + body.length - 1}`;
  return fetch(`${server.url}${location}`, { method: 'PATCH', headers, body });
}

async function status(server: Velodex, location: string): Promise<Response> {
  return fetch(`${server.url}${location}`, { headers: { Authorization: AUTH } });
}

async function put(server: Velodex, location: string, hex: string, body?: Buffer): Promise<Response> {
  return fetch(`${server.url}${location}?digest=sha256:${hex}`, {
    method: 'PUT',
    headers: { Authorization: AUTH, 'Content-Type': 'application/octet-stream' },
    ...(body ? { body } : {}),
  });
}

async function blobBytes(server: Velodex, hex: string): Promise<Buffer | null> {
  const res = await fetch(`${server.url}/v2/${REPO}/blobs/sha256:${hex}`);
  if (res.status === 404) return null;
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

/** A PATCH whose body the test writes piece by piece, to a server directly. */
function streamingPatch(server: Velodex, location: string, start: number, total: number) {
  const req = http.request(`${server.url}${location}`, {
    method: 'PATCH',
    headers: { Authorization: AUTH, 'Content-Type': 'application/octet-stream', 'Content-Length': String(total), 'Content-Range': `${start}-${start + total - 1}` },
  });
  const response = new Promise<{ status: number; range: string | undefined; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, range: res.headers.range, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  return { req, write: (buf: Buffer) => new Promise<void>((r) => req.write(buf, () => r())), end: () => req.end(), response };
}

/**
 * Resolves once the server has a chunk's scratch file of at least `bytes` (the PATCH is streaming
 * in there); rejects when none shows up within a minute, so a server that never streams fails the
 * test instead of hanging it.
 */
async function chunkArriving(server: Velodex, bytes: number): Promise<void> {
  const dir = join(server.dataDir, 'scratch');
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith('stage-chunk-')) : [];
    if (files.some((f) => (statSync(join(dir, f), { throwIfNoEntry: false })?.size ?? 0) >= bytes)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no chunk of ${bytes} bytes arrived at ${server.url} within a minute`);
}

describe('one upload, every request on another process', () => {
  it('pushes a layer in chunks across three processes (server-side compose), rejects an out-of-order chunk, and serves it from all', async () => {
    const chunks = [pseudoRandom('shared-1', 6 * MiB), pseudoRandom('shared-2', 6 * MiB), pseudoRandom('shared-3', MiB + 17)];
    const layer = Buffer.concat(chunks);
    const hex = sha256(layer);

    const location = await open(a);
    let res = await patch(b, location, chunks[0] as Buffer, 0);
    expect(res.status).toBe(202);
    expect(res.headers.get('range')).toBe(`0-${6 * MiB - 1}`);
    expect(res.headers.get('docker-upload-uuid')).toBe(idOf(location));

    res = await status(c, location);
    expect(res.status).toBe(204);
    expect(res.headers.get('range')).toBe(`0-${6 * MiB - 1}`);

    // Out of order (starts at 0 again), on yet another process: 416 with the range held.
    res = await patch(a, location, chunks[1] as Buffer, 0);
    expect(res.status).toBe(416);
    expect(res.headers.get('range')).toBe(`0-${6 * MiB - 1}`);
    await expectOciError(res, 416, 'BLOB_UPLOAD_INVALID');

    res = await patch(c, location, chunks[1] as Buffer, 6 * MiB);
    expect(res.status).toBe(202);
    res = await patch(b, location, chunks[2] as Buffer);
    expect(res.status).toBe(202);
    expect(res.headers.get('range')).toBe(`0-${layer.length - 1}`);
    expect(await probe.has(hex)).toBe(false);

    res = await put(a, location, hex);
    expect(res.status).toBe(201);
    expect(res.headers.get('docker-content-digest')).toBe(`sha256:${hex}`);

    for (const s of [a, b, c]) expect((await blobBytes(s, hex))?.equals(layer)).toBe(true);
    for (const s of [a, b, c]) await expectOciError(await status(s, location), 404, 'BLOB_UPLOAD_UNKNOWN');
    expect(await probe.keys('shared-stages')).toEqual([]);
    expect(await chunkObjects()).toEqual([]);
  });

  it('pushes a config in small chunks (streamed, not composed) with the last bytes in the PUT, and crane pulls the image through a fourth process', async () => {
    const image = buildImage({ seed: 'shared-crane', layers: 1, bigFileSize: 3 * MiB });
    for (const blob of allBlobs(image).filter((x) => x.descriptor.mediaType !== image.manifest.descriptor.mediaType)) {
      const bytes = blob.bytes;
      const hex = blob.descriptor.digest.slice('sha256:'.length);
      const cut = [0, Math.floor(bytes.length / 3), Math.floor((2 * bytes.length) / 3), bytes.length];
      const location = await open(b);
      expect((await patch(c, location, bytes.subarray(cut[0], cut[1]))).status).toBe(202);
      expect((await patch(a, location, bytes.subarray(cut[1], cut[2]), cut[1])).status).toBe(202);
      const res = await put(b, location, hex, bytes.subarray(cut[2]));
      expect(res.status).toBe(201);
    }
    const manifest = await fetch(`${c.url}/v2/${REPO}/manifests/v1`, {
      method: 'PUT',
      headers: { Authorization: AUTH, 'Content-Type': image.manifest.descriptor.mediaType },
      body: image.manifest.bytes,
    });
    expect(manifest.status).toBe(201);

    const d = await startOne();
    extra.push(d);
    const work = tempDir('velodex-shared-crane-');
    await run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `127.0.0.1:${d.port}/${REPO}:v1`, join(work, 'pulled')], { env: { HOME: work }, timeoutMs: 120_000 });
    expect(layoutMismatches(readLayout(join(work, 'pulled')), allBlobs(image))).toEqual([]);
    expect(await chunkObjects()).toEqual([]);
  });

  it('keeps a session whose PUT has the wrong digest, and cancels it from another process', async () => {
    const bytes = pseudoRandom('shared-cancel', 200_000);
    const location = await open(a);
    expect((await patch(b, location, bytes)).status).toBe(202);
    await expectOciError(await put(c, location, sha256('something else')), 400, 'DIGEST_INVALID');
    const res = await status(a, location);
    expect(res.status).toBe(204);
    expect(res.headers.get('range')).toBe(`0-${bytes.length - 1}`);
    expect(await chunkObjects()).toHaveLength(1);

    const del = await fetch(`${b.url}${location}`, { method: 'DELETE', headers: { Authorization: AUTH } });
    expect(del.status).toBe(204);
    for (const s of [a, b, c]) await expectOciError(await status(s, location), 404, 'BLOB_UPLOAD_UNKNOWN');
    await expectOciError(await put(c, location, sha256(bytes)), 404, 'BLOB_UPLOAD_UNKNOWN');
    expect(await probe.has(sha256(bytes))).toBe(false);
    expect(await chunkObjects()).toEqual([]);
  });
});

describe('faults and races', () => {
  it('kill -9 of the process receiving a PATCH: nothing partial visible, the retry on another process succeeds', async () => {
    const first = pseudoRandom('shared-kill-1', MiB);
    const second = pseudoRandom('shared-kill-2', 12 * MiB);
    const hex = sha256(Buffer.concat([first, second]));
    const victim = await startOne();
    extra.push(victim);
    const blobsBefore = await probe.blobs();

    const location = await open(a);
    expect((await patch(b, location, first)).status).toBe(202);
    const doomed = streamingPatch(victim, location, first.length, second.length);
    doomed.response.catch(() => undefined);
    // Past one 8 MiB part: a multipart upload of the chunk is under way when the process dies.
    await doomed.write(second.subarray(0, 10 * MiB));
    await chunkArriving(victim, 9 * MiB);
    process.kill(victim.pid, 'SIGKILL');
    await expect(doomed.response).rejects.toThrow();

    // The session is as before the PATCH, on every process; no blob appeared.
    const res = await status(c, location);
    expect(res.status).toBe(204);
    expect(res.headers.get('range')).toBe(`0-${first.length - 1}`);
    expect(await probe.blobs()).toEqual(blobsBefore);
    expect(await chunkObjects()).toHaveLength(1);

    const retry = await patch(c, location, second, first.length);
    expect(retry.status).toBe(202);
    expect((await put(a, location, hex)).status).toBe(201);
    expect((await blobBytes(b, hex))?.equals(Buffer.concat([first, second]))).toBe(true);
    expect(await chunkObjects()).toEqual([]);
  });

  it('two PATCHes at once on one session from two processes: one wins, the other gets 416, the digest verifies', async () => {
    const head = pseudoRandom('shared-race-head', 100_000);
    const mine = pseudoRandom('shared-race-b', 300_000);
    const theirs = pseudoRandom('shared-race-c', 300_000);
    const location = await open(a);
    expect((await patch(a, location, head)).status).toBe(202);

    const onB = streamingPatch(b, location, head.length, mine.length);
    const onC = streamingPatch(c, location, head.length, theirs.length);
    await onB.write(mine.subarray(0, 1000));
    await onC.write(theirs.subarray(0, 1000));
    // Both have read the session and are writing their chunk before either finishes.
    await Promise.all([chunkArriving(b, 1000), chunkArriving(c, 1000)]);
    await onB.write(mine.subarray(1000));
    await onC.write(theirs.subarray(1000));
    onB.end();
    onC.end();
    const [rb, rc] = await Promise.all([onB.response, onC.response]);

    expect([rb.status, rc.status].sort()).toEqual([202, 416]);
    const winner = rb.status === 202 ? mine : theirs;
    const loser = rb.status === 202 ? rc : rb;
    expect(loser.range).toBe(`0-${head.length + winner.length - 1}`);
    expect(JSON.parse(loser.body)).toMatchObject({ errors: [{ code: 'BLOB_UPLOAD_INVALID' }] });

    const now = await status(c, location);
    expect(now.headers.get('range')).toBe(`0-${head.length + winner.length - 1}`);
    // The loser's chunk object is gone: the session lists two chunks, the bucket holds two.
    expect(await chunkObjects()).toHaveLength(2);

    const whole = Buffer.concat([head, winner]);
    expect((await put(b, location, sha256(whole))).status).toBe(201);
    expect((await blobBytes(a, sha256(whole)))?.equals(whole)).toBe(true);
    expect(await chunkObjects()).toEqual([]);
  });
});

describe('clients through a round-robin proxy over the three processes', () => {
  const work = tempDir('velodex-shared-clients-');
  const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker'), REGCTL_CONFIG: join(work, 'regctl.json') };
  const cli = (name: string, args: string[], input?: string): Promise<RunResult> => run(tool(name), args, { env, input, timeoutMs: 300_000 });

  /** How many upload sessions so far had their requests served by two or more processes. */
  function spreadSessions(): number {
    return [...proxy.sessionTargets().values()].filter((targets) => new Set(targets).size > 1).length;
  }

  it('crane push through the proxy, pull through one process', async () => {
    await cli('crane', ['auth', 'login', proxy.host, '-u', '__token__', '--password-stdin'], 'token-a');
    const index = buildIndex('shared-crane-multi');
    const src = writeLayout(join(work, 'crane-src'), [{ tag: 'multi', item: index }]);
    await cli('crane', ['push', '--insecure', src, `${proxy.host}/team-a/oci/crane/multi:1`]);
    await cli('crane', ['pull', '--insecure', '--format', 'oci', `127.0.0.1:${b.port}/team-a/oci/crane/multi:1`, join(work, 'crane-pull')]);
    expect(layoutMismatches(readLayout(join(work, 'crane-pull')), allBlobs(index))).toEqual([]);
    expect(spreadSessions()).toBeGreaterThan(0);
  });

  it('regctl image copy through the proxy, pull through one process', async () => {
    await cli('regctl', ['registry', 'set', proxy.host, '--tls', 'disabled']);
    await cli('regctl', ['registry', 'login', proxy.host, '-u', '__token__', '--pass-stdin'], 'token-a');
    const image = buildImage({ seed: 'shared-regctl', layers: 2, bigFileSize: 2 * MiB });
    const src = writeLayout(join(work, 'regctl-src'), [{ tag: 'v1', item: image }]);
    await cli('regctl', ['image', 'copy', `ocidir://${src}:v1`, `${proxy.host}/team-a/oci/regctl/app:v1`]);
    await cli('crane', ['pull', '--insecure', '--format', 'oci', `127.0.0.1:${c.port}/team-a/oci/regctl/app:v1`, join(work, 'regctl-pull')]);
    expect(layoutMismatches(readLayout(join(work, 'regctl-pull')), allBlobs(image))).toEqual([]);
  });

  it('oras push through the proxy, pull through one process', async () => {
    const dir = join(work, 'oras');
    const data = pseudoRandom('shared-oras', 3 * MiB);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'data.bin'), data);
    await run(tool('oras'), ['push', '--plain-http', '-u', '__token__', '-p', 'token-a', `${proxy.host}/team-a/oci/oras/thing:v1`, 'data.bin:application/octet-stream'], { cwd: dir, env, timeoutMs: 300_000 });
    const out = join(work, 'oras-pull');
    await run(tool('oras'), ['pull', '--plain-http', '-o', out, `127.0.0.1:${a.port}/team-a/oci/oras/thing:v1`], { env, timeoutMs: 300_000 });
    expect(sha256(readFileSync(join(out, 'data.bin')))).toBe(sha256(data));
    expect(spreadSessions()).toBeGreaterThan(0);
  });

  it('passes both OCI conformance suites through the proxy', async () => {
    await runV111(proxy.url, 'team-a/oci', 'token-a');
    await runMain(proxy.url, 'team-a/oci', 'token-a');
    expect(spreadSessions()).toBeGreaterThan(10);
  }, 1_200_000);
});
