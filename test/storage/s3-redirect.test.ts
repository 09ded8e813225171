/**
 * `[storage] redirect = true` on a real MinIO: a full GET of a large stored blob (an OCI layer, a
 * hosted wheel) answers 307 to a presigned URL of the object store, and pip, uv, crane, skopeo and
 * containerd's ctr follow it and get the right bytes. HEAD, Range and small blobs stay with
 * velodex; the URL expires after `redirect_ttl_secs`; no signature reaches velodex's log, `/+stats`
 * or `/metrics`. Clients reach MinIO through a proxy that keeps the Host header, named as
 * `redirect_endpoint`: it shows which object reads went to the store directly, and that URLs are
 * signed for the address clients use. Runs on its own MinIO whatever VELODEX_TEST_STORAGE says.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from '../oci/api-support.js';
import { buildBigWheel, type BigWheel } from '../python/fixtures/big-wheel.js';
import { CLEAN_ENV, freshPipVenv, freshUvVenv } from '../python/fixtures/clients.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { defaultIndexes } from '../support/backend.js';
import { cached, s3Storage, toml } from '../support/config.js';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { startDockerd } from '../support/dockerd.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { until } from '../support/until.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startMinio, type Minio } from '../support/minio.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { basicAuth, defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const MiB = 1024 * 1024;
const TTL_SECS = 2;
const REPO = 'root/oci/redirect/app';

let minio: Minio;
let storeProxy: FaultProxy;
let server: Velodex;
let host: string;
let work: string;
let wheel: BigWheel;
/** Only on the upstream: other bytes than the hosted one, so nothing of it is stored at first. */
let upstreamWheel: BigWheel;
let image: Image;
let daemon: Containerd;
let pypi: PypiServer;

beforeAll(async () => {
  minio = await startMinio();
  // Keeps the Host header: the signature covers the address the client used, the proxy's.
  storeProxy = await FaultProxy.start(minio.endpoint, { keepHost: true });
  work = tempDir('velodex-redirect-');
  mkdirSync(join(work, 'containerd'));
  mkdirSync(join(work, 'upstream'));
  [wheel, upstreamWheel, daemon] = await Promise.all([
    buildBigWheel(work, 3 * MiB),
    buildBigWheel(tempDir('velodex-redirect-upstream-'), 2 * MiB),
    startContainerd(join(work, 'containerd')),
  ]);
  copyFileSync(upstreamWheel.path, join(work, 'upstream', upstreamWheel.filename));
  pypi = await startPypiserver(join(work, 'upstream'));
  const dataDir = tempDir();
  const storage = s3Storage(minio, { prefix: 'redirect', redirect: { minSize: MiB, ttlSecs: TTL_SECS, endpoint: storeProxy.url } });
  // The embedded default (hosted indexes of both ecosystems) and a cached index of the pypiserver.
  const config = toml(storage, defaultIndexes(dataDir), cached('pypi', `${pypi.url}/simple/`));
  server = await startVelodex({ config, dataDir });
  host = `127.0.0.1:${server.port}`;

  const token = defaultToken(server);
  const uploaded = await postUpload({ url: `${server.url}/root/hosted/`, token, file: wheel.path });
  expect(uploaded.status, uploaded.body).toBe(200);
  // Two layers: a small one (served by velodex) and one with 3 MiB of incompressible bytes.
  image = buildImage({ seed: 'redirect', layers: 2, bigFileSize: 3 * MiB });
  const reg = new Registry(server.url, basicAuth(token));
  for (const blob of allBlobs(image).slice(1)) await reg.pushBlob(REPO, blob.bytes);
  expect((await reg.pushManifest(REPO, 'v1', image.manifest.bytes)).status).toBe(201);
}, 180_000);

afterAll(async () => {
  await daemon?.stop();
  await server?.stop();
  await storeProxy?.close();
  await pypi?.stop();
  await minio?.stop();
});

const [smallLayer, bigLayer] = [() => image.layers[0]!, () => image.layers[1]!];
const hexOf = (digest: string) => digest.replace(/^sha256:/, '');
/** The path of a blob's object in the bucket, as clients ask the store for it. */
const objectPath = (hex: string) => `/${minio.bucket}/redirect/blobs/sha256/${hex.slice(0, 2)}/${hex}`;
const storeReads = (hex: string) => storeProxy.seen.filter((r) => r.method === 'GET' && r.path === objectPath(hex)).length;

/** Status codes velodex answered GETs of `path` with, from its request log, in order. */
function statuses(path: string, method = 'GET'): number[] {
  const urls = new Map<string, string>();
  const out: number[] = [];
  for (const line of server.logs().split('\n')) {
    let entry: { reqId?: string; msg?: string; req?: { url?: string; method?: string }; res?: { statusCode?: number } };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.msg === 'incoming request' && entry.reqId && entry.req?.method === method) urls.set(entry.reqId, entry.req.url ?? '');
    if (entry.msg === 'request completed' && entry.reqId && urls.get(entry.reqId) === path) out.push(entry.res?.statusCode ?? 0);
  }
  return out;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('Python files', () => {
  const fileUrl = () => `/root/hosted/files/${sha256(readFileSync(wheel.path))}/${wheel.filename}`;

  it('pip installs a large wheel through the redirect, from the object store', async () => {
    const venv = await freshPipVenv();
    const before = storeReads(sha256(readFileSync(wheel.path)));
    await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${server.url}/root/hosted/simple/`, 'bigwheel'], { env: CLEAN_ENV });
    // pip checks the page's sha256 of what it downloaded: the installed payload is the right one.
    const payload = join(venv, 'lib', `python${await pyVersion(venv)}`, 'site-packages', 'bigwheel', 'payload.bin');
    expect(statSync(payload).size).toBe(3 * MiB);
    expect(statuses(fileUrl()).at(-1)).toBe(307);
    expect(storeReads(sha256(readFileSync(wheel.path)))).toBe(before + 1);
  }, 120_000);

  it('uv installs it the same way', async () => {
    const venv = await freshUvVenv();
    const before = storeReads(sha256(readFileSync(wheel.path)));
    await run(tool('uv'), ['pip', 'install', '--no-cache', '--python', join(venv, 'bin', 'python'), '--index-url', `${server.url}/root/hosted/simple/`, 'bigwheel'], { env: CLEAN_ENV });
    expect(statuses(fileUrl()).at(-1)).toBe(307);
    expect(storeReads(sha256(readFileSync(wheel.path)))).toBe(before + 1);
  }, 120_000);

  it('a cached file streams through velodex on its first download, and redirects once stored', async () => {
    const digest = sha256(readFileSync(upstreamWheel.path));
    const path = `/root/pypi/files/${digest}/${upstreamWheel.filename}`;
    const install = async () => {
      const venv = await freshPipVenv();
      await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${server.url}/root/pypi/simple/`, 'bigwheel'], { env: CLEAN_ENV });
    };
    await install();
    expect(statuses(path)).toEqual([200]);
    // The fill publishes once the whole file is in; until then a GET would join or start a flight.
    await until('the cached wheel to be stored', async () => {
      const res = await fetch(`${server.url}${path}`, { redirect: 'manual' });
      await res.body?.cancel();
      return res.status === 307 ? true : undefined;
    });
    const before = storeReads(digest);
    await install();
    expect(statuses(path).at(-1)).toBe(307);
    expect(storeReads(digest)).toBe(before + 1);
  }, 180_000);

  it('answers HEAD and ranged GETs itself, and the redirect is never cached', async () => {
    const res = await fetch(`${server.url}${fileUrl()}`, { redirect: 'manual' });
    expect(res.status).toBe(307);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('location')?.startsWith(`${storeProxy.url}/`)).toBe(true);
    const head = await fetch(`${server.url}${fileUrl()}`, { method: 'HEAD', redirect: 'manual' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(wheel.size));
    const ranged = await fetch(`${server.url}${fileUrl()}`, { headers: { range: 'bytes=0-99' }, redirect: 'manual' });
    expect(ranged.status).toBe(206);
    expect(Buffer.from(await ranged.arrayBuffer())).toEqual(readFileSync(wheel.path).subarray(0, 100));
  });
});

async function pyVersion(venv: string): Promise<string> {
  const res = await run(join(venv, 'bin', 'python'), ['-c', 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")']);
  return res.stdout.trim();
}

describe('OCI blobs', () => {
  const blobPath = (digest: string) => `/v2/${REPO}/blobs/${digest}`;

  it('redirects a full GET of a large layer to a URL that works, then expires', async () => {
    const big = bigLayer();
    expect(big.bytes.length).toBeGreaterThan(MiB);
    const res = await fetch(`${server.url}${blobPath(big.descriptor.digest)}`, { redirect: 'manual' });
    expect(res.status).toBe(307);
    expect(res.headers.get('docker-content-digest')).toBe(big.descriptor.digest);
    expect(await res.text()).toBe('');
    const location = res.headers.get('location') ?? '';
    expect(location.startsWith(`${storeProxy.url}${objectPath(hexOf(big.descriptor.digest))}?`)).toBe(true);
    const fetched = await fetch(location);
    expect(fetched.status).toBe(200);
    // By digest: a deep comparison of megabytes takes vitest many seconds.
    expect(sha256(Buffer.from(await fetched.arrayBuffer()))).toBe(hexOf(big.descriptor.digest));
    await sleep((TTL_SECS + 1.5) * 1000);
    expect((await fetch(location)).status).toBe(403);
  });

  it('serves HEAD, a ranged GET and a small layer itself', async () => {
    const big = bigLayer();
    const head = await fetch(`${server.url}${blobPath(big.descriptor.digest)}`, { method: 'HEAD', redirect: 'manual' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(big.bytes.length));
    const ranged = await fetch(`${server.url}${blobPath(big.descriptor.digest)}`, { headers: { range: 'bytes=10-1000009' }, redirect: 'manual' });
    expect(ranged.status).toBe(206);
    expect(sha256(Buffer.from(await ranged.arrayBuffer()))).toBe(sha256(big.bytes.subarray(10, 1000010)));
    const small = smallLayer();
    expect(small.bytes.length).toBeLessThan(MiB);
    const direct = await fetch(`${server.url}${blobPath(small.descriptor.digest)}`, { redirect: 'manual' });
    expect(direct.status).toBe(200);
    expect(Buffer.from(await direct.arrayBuffer())).toEqual(small.bytes);
  });

  it('crane pulls the image through the redirect', async () => {
    const before = storeReads(hexOf(bigLayer().descriptor.digest));
    const out = join(work, 'crane-layout');
    await run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `${host}/${REPO}:v1`, out], { env: { HOME: work } });
    expect(layoutMismatches(readLayout(out), allBlobs(image))).toEqual([]);
    expect(statuses(blobPath(bigLayer().descriptor.digest)).at(-1)).toBe(307);
    expect(storeReads(hexOf(bigLayer().descriptor.digest))).toBe(before + 1);
  }, 120_000);

  it('skopeo copies the image out through the redirect', async () => {
    const before = storeReads(hexOf(bigLayer().descriptor.digest));
    writeFileSync(join(work, 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
    writeFileSync(join(work, 'auth.json'), '{}');
    const out = join(work, 'skopeo-layout');
    await run(
      tool('skopeo'),
      ['--policy', join(work, 'policy.json'), 'copy', '--preserve-digests', '--src-tls-verify=false', `docker://${host}/${REPO}:v1`, `oci:${out}:v1`],
      { env: { HOME: work, REGISTRY_AUTH_FILE: join(work, 'auth.json') }, timeoutMs: 120_000 },
    );
    expect(layoutMismatches(readLayout(out), allBlobs(image))).toEqual([]);
    expect(storeReads(hexOf(bigLayer().descriptor.digest))).toBe(before + 1);
  }, 120_000);

  it('containerd (ctr) pulls and unpacks the image through the redirect', async () => {
    const before = storeReads(hexOf(bigLayer().descriptor.digest));
    await daemon.ctr(['images', 'pull', '--plain-http', '--snapshotter', 'native', `${host}/${REPO}:v1`], { timeoutMs: 60_000 });
    expect(storeReads(hexOf(bigLayer().descriptor.digest))).toBe(before + 1);
    expect(statuses(blobPath(bigLayer().descriptor.digest)).at(-1)).toBe(307);
  }, 120_000);

  it('docker pulls the image through the redirect', async () => {
    const dir = join(work, 'docker');
    mkdirSync(dir);
    const engine = await startDockerd(dir);
    try {
      const before = storeReads(hexOf(bigLayer().descriptor.digest));
      await engine.docker(['pull', `${host}/${REPO}:v1`], { timeoutMs: 120_000 });
      expect(storeReads(hexOf(bigLayer().descriptor.digest))).toBe(before + 1);
      expect(statuses(blobPath(bigLayer().descriptor.digest)).at(-1)).toBe(307);
      // The engine unpacked what it got: the layer's big file is in the image, byte for byte.
      const created = (await engine.docker(['create', `${host}/${REPO}:v1`, '/none'])).stdout.trim();
      const out = join(dir, 'big.bin');
      await engine.docker(['cp', `${created}:/srv/redirect-amd64/big.bin`, out]);
      expect(sha256(readFileSync(out))).toBe(sha256(image.files[1]?.get('srv/redirect-amd64/big.bin') ?? Buffer.alloc(0)));
    } finally {
      await engine.stop();
    }
  }, 240_000);
});

describe('secrecy and counting', () => {
  it('keeps presigned URLs out of the log, /+stats and /metrics, and counts redirected downloads', async () => {
    const res = await fetch(`${server.url}/v2/${REPO}/blobs/${bigLayer().descriptor.digest}`, { redirect: 'manual' });
    const signature = new URL(res.headers.get('location') ?? '').searchParams.get('X-Amz-Signature') ?? '';
    expect(signature).toMatch(/^[0-9a-f]{64}$/);
    const stats = await (await fetch(`${server.url}/+stats?index=root/oci`)).text();
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(((await (await fetch(`${server.url}/+status`)).json()) as { storage: unknown }).storage).toMatchObject({ backend: 's3', redirect: true });
    for (const [where, text] of [['log', server.logs()], ['/+stats', stats], ['/metrics', metrics]] as const) {
      expect(text, where).not.toContain(signature);
      expect(text.toLowerCase(), where).not.toContain('x-amz-signature=');
    }
    // A redirected GET (crane, skopeo, ctr, docker, the fetches above) counts the layer's full size,
    // as a served one would; the one ranged GET counts its 1,000,000 bytes.
    const big = bigLayer().descriptor;
    const gets = statuses(`/v2/${REPO}/blobs/${big.digest}`);
    const redirected = gets.filter((st) => st === 307).length;
    expect(redirected).toBeGreaterThanOrEqual(6);
    const project = (await (await fetch(`${server.url}/+stats?index=root/oci&project=${encodeURIComponent('redirect/app')}`)).json()) as {
      files: Record<string, { downloads: number; bytes: number }>;
    };
    const ranged = gets.filter((st) => st === 206).length;
    expect(project.files[big.digest]).toMatchObject({ downloads: redirected + ranged, bytes: redirected * big.size + ranged * 1_000_000 });
  });
});
