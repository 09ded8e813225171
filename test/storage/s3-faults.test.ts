/**
 * The s3 backend under faults of the object store, against a real MinIO this file starts (so it
 * runs on every run, whatever VELODEX_TEST_STORAGE says) and real clients:
 *
 * - MinIO stopped mid-download and mid-upload, and while clients push and install: a download
 *   already streaming breaks (never ends short as if complete), a request answers 503 in the
 *   ecosystem's error shape, nothing partial becomes visible, the process stays up, and the same
 *   process serves again as soon as MinIO is back;
 * - MinIO stopped while a cached OCI index stores a manifest its upstream just sent: the store's
 *   503, not the upstream's 502 (nor counted as an upstream error), and the pull succeeds once
 *   MinIO is back;
 * - MinIO answering slowly (a fault proxy between velodex and MinIO): requests still complete; a
 *   store that stops answering gives a 503 once the response timeout passes, not a hung client;
 *   a body that stops midway is cut once the idle timeout passes, while a client that reads
 *   slowly itself is never cut.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from '../oci/api-support.js';
import { PROJECT_ENV } from '../python/fixtures/clients.js';
import { buildProject } from '../python/fixtures/projects.js';
import { hosted, oci, s3Storage, toml } from '../support/config.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startHostile, type HostileServer } from '../support/hostile-server.js';
import { startMinio, type Minio } from '../support/minio.js';
import { buildImage, pseudoRandom, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { storeProbe } from '../support/store-probe.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 's3-faults-token-2b7e';
const MiB = 1024 * 1024;
let minio: Minio;
let work: string;

beforeAll(async () => {
  minio = await startMinio();
  work = tempDir('velodex-s3-faults-');
});

afterAll(async () => {
  await minio?.stop();
});

/** A config on MinIO at `endpoint` (MinIO itself, or a proxy in front of it), with a Python and an OCI index. */
function config(endpoint: string, prefix: string, idleTimeoutSecs?: number): string {
  return toml(s3Storage(minio, { prefix, endpoint, ...(idleTimeoutSecs ? { idleTimeoutSecs } : {}) }), hosted('py', { route: 'team/py', token: TOKEN }), oci.hosted('images', { route: 'team/images', token: TOKEN }));
}

const auth = `Basic ${Buffer.from(`__token__:${TOKEN}`).toString('base64')}`;

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A curl that runs in the background; `bytes()` tells how much has arrived so far. */
function backgroundCurl(args: string[], out: string): { done: Promise<RunResult & { status: number }>; bytes(): number } {
  const done = run(tool('curl'), ['-sS', '-o', out, '-w', '%{http_code}', ...args], { allowFailure: true }).then((r) => ({ ...r, status: Number(r.stdout.trim()) }));
  return { done, bytes: () => (existsSync(out) ? statSync(out).size : 0) };
}

async function until(what: string, test: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Bytes the server's stages hold in its scratch folder: a sign that an upload is under way. */
function scratchBytes(server: Velodex): number {
  const dir = join(server.dataDir, 'scratch');
  if (!existsSync(dir)) return 0;
  return readdirSync(dir)
    .filter((f) => f.startsWith('stage-'))
    .reduce((n, f) => n + statSync(join(dir, f)).size, 0);
}

async function ociError(res: Response): Promise<string | undefined> {
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return ((await res.json()) as { errors: { code: string }[] }).errors[0]?.code;
}

function twine(server: Velodex, file: string): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/team/py/`, '-u', '__token__', '-p', TOKEN, file], {
    allowFailure: true,
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

/** `requirement`: a name and version, or a file's URL. */
function pipDownload(server: Velodex, requirement: string, dest: string): Promise<RunResult> {
  return run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--retries', '0', '--index-url', `${server.url}/team/py/simple/`, '-d', dest, requirement], {
    allowFailure: true,
    env: PROJECT_ENV,
  });
}

function crane(args: string[], input?: string): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, input, allowFailure: true, timeoutMs: 180_000 });
}

describe('MinIO stopped', () => {
  let server: Velodex;
  let reg: Registry;

  beforeAll(async () => {
    server = await startVelodex({ config: config(minio.endpoint, 'stopped') });
    reg = new Registry(server.url, auth);
    expect((await crane(['auth', 'login', `127.0.0.1:${server.port}`, '-u', '__token__', '--password-stdin'], TOKEN)).code).toBe(0);
  });

  afterAll(async () => {
    await minio.start();
    await server?.stop();
  });

  it('mid-download: the transfer breaks, never ends short as if complete; once MinIO is back the same process serves it', async () => {
    const bytes = pseudoRandom('faults/download', 32 * MiB);
    const hex = await reg.pushBlob('team/images/app', bytes);
    const url = `${server.url}/v2/team/images/app/blobs/sha256:${hex}`;
    const out = join(work, 'download-cut');
    const curl = backgroundCurl(['--limit-rate', '1M', url], out);
    await until('the first MiB to arrive', () => curl.bytes() >= MiB);
    await minio.pause();
    try {
      const cut = await curl.done;
      // 18: transfer closed with bytes remaining; 56: failure receiving data (connection reset).
      expect([18, 56], `curl exit ${cut.code}: ${cut.stderr}`).toContain(cut.code);
      expect(cut.status).toBe(200);
      expect(statSync(out).size).toBeLessThan(bytes.length);

      // While MinIO is away: the process is up, and a new download is a clear 503.
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      const down = await fetch(url);
      expect(down.status).toBe(503);
      expect(down.headers.get('retry-after')).toBe('5');
      expect(await ociError(down)).toBe('UNAVAILABLE');
    } finally {
      await minio.start();
    }
    const again = await fetch(url);
    expect(again.status).toBe(200);
    expect(sha256(Buffer.from(await again.arrayBuffer()))).toBe(hex);
    expect(server.logs()).toMatch(/"msg":"OCI request failed"/);
  });

  it('mid-upload: a 503 in the OCI error shape, nothing visible, and the same upload succeeds once MinIO is back', async () => {
    const bytes = pseudoRandom('faults/upload', 24 * MiB);
    const hex = sha256(bytes);
    const file = join(work, 'upload.bin');
    writeFileSync(file, bytes);
    const url = `${server.url}/v2/team/images/app/blobs/uploads/?digest=sha256:${hex}`;
    const out = join(work, 'upload-answer');
    // 4 MB/s: six seconds of body, so MinIO goes away while the bytes still arrive.
    const curl = backgroundCurl(['--limit-rate', '4M', '-X', 'POST', '-H', 'content-type: application/octet-stream', '-u', `__token__:${TOKEN}`, '--data-binary', `@${file}`, url], out);
    await until('the upload to be under way', () => scratchBytes(server) >= 2 * MiB);
    await minio.pause();
    let answer: RunResult & { status: number };
    try {
      answer = await curl.done;
    } finally {
      await minio.start();
    }
    expect(answer.status, answer.stderr).toBe(503);
    expect((JSON.parse(readFileSync(out, 'utf8')) as { errors: { code: string }[] }).errors[0]?.code).toBe('UNAVAILABLE');
    const probe = await storeProbe(server.dataDir);
    expect(await probe.blobs()).not.toContain(hex);
    expect(await probe.staged()).toEqual([]);
    expect((await fetch(`${server.url}/v2/team/images/app/blobs/sha256:${hex}`, { method: 'HEAD' })).status).toBe(404);

    const retry = await run(tool('curl'), ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST', '-H', 'content-type: application/octet-stream', '-u', `__token__:${TOKEN}`, '--data-binary', `@${file}`, url]);
    expect(retry.stdout).toBe('201');
    const got = await fetch(`${server.url}/v2/team/images/app/blobs/sha256:${hex}`);
    expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(hex);
  });

  it('twine upload and pip download while MinIO is down fail with a 503; both work once it is back', async () => {
    const alpha = await buildProject('alpha', '1.0', { variant: 's3-faults' });
    await minio.pause();
    let upload: RunResult;
    try {
      upload = await twine(server, alpha.wheel);
    } finally {
      await minio.start();
    }
    expect(upload.code).not.toBe(0);
    expect(upload.stdout + upload.stderr).toMatch(/503/);
    expect(await (await storeProbe(server.dataDir)).blobs()).not.toContain(sha256(readFileSync(alpha.wheel)));

    const ok = await twine(server, alpha.wheel);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);

    const listing = await fetch(`${server.url}/team/py/simple/alpha/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
    const fileUrl = new URL(((await listing.json()) as { files: { url: string }[] }).files[0]!.url, `${server.url}/team/py/simple/alpha/`).toString();
    await minio.pause();
    let down: RunResult;
    try {
      // By the file's URL: pip reports a failed download; a failed index page it only turns into "no matching distribution".
      down = await pipDownload(server, fileUrl, join(work, 'pip-down'));
      const page = await fetch(`${server.url}/team/py/simple/alpha/`);
      expect(page.status).toBe(503);
      expect(await page.json()).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    } finally {
      await minio.start();
    }
    expect(down.code).not.toBe(0);
    expect(down.stdout + down.stderr).toMatch(/503/);
    expect(existsSync(join(work, 'pip-down', alpha.wheelFilename))).toBe(false);
    const dest = join(work, 'pip-up');
    const up = await pipDownload(server, 'alpha==1.0', dest);
    expect(up.code, up.stdout + up.stderr).toBe(0);
    expect(readFileSync(join(dest, alpha.wheelFilename)).equals(readFileSync(alpha.wheel))).toBe(true);
  });

  it('crane push and pull while MinIO is down fail; both work once it is back', async () => {
    const image = buildImage({ seed: 's3-faults-crane', layers: 2 });
    const src = writeLayout(join(work, 'crane-src'), [{ tag: 'v1', item: image }]);
    const ref = `127.0.0.1:${server.port}/team/images/crane:v1`;
    await minio.pause();
    let push: RunResult;
    try {
      push = await crane(['push', src, ref]);
    } finally {
      await minio.start();
    }
    expect(push.code).not.toBe(0);
    expect(push.stderr).toMatch(/UNAVAILABLE|503/);
    const pushed = await crane(['push', src, ref]);
    expect(pushed.code, pushed.stderr).toBe(0);

    await minio.pause();
    let pull: RunResult;
    try {
      pull = await crane(['pull', '--format', 'oci', ref, join(work, 'crane-pull-down')]);
    } finally {
      await minio.start();
    }
    expect(pull.code).not.toBe(0);
    const pulled = await crane(['pull', '--format', 'oci', ref, join(work, 'crane-pull')]);
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(existsSync(join(work, 'crane-pull', 'blobs', 'sha256', image.layers[1]!.descriptor.digest.slice(7)))).toBe(true);
  });
});

describe('MinIO answering slowly', () => {
  let proxy: FaultProxy;
  let server: Velodex;
  let reg: Registry;

  beforeAll(async () => {
    proxy = await FaultProxy.start(minio.endpoint, { keepHost: true });
    server = await startVelodex({ config: config(proxy.url, 'slow') });
    reg = new Registry(server.url, auth);
  });

  afterAll(async () => {
    await server?.stop();
    await proxy?.close();
  });

  it('with every MinIO answer held back and a body stalled midway, pushes and pulls still complete', async () => {
    proxy.on(() => true, { kind: 'stall', ms: 200 });
    const bytes = pseudoRandom('faults/slow', 12 * MiB);
    const hex = await reg.pushBlob('team/images/slow', bytes);
    // The object's body stops for 3 s after its first MiB: slower than any request, but answering.
    proxy.on((path, method) => method === 'GET' && path.endsWith(`/${hex}`), { kind: 'stall', ms: 3000, afterBytes: MiB });
    const got = await fetch(`${server.url}/v2/team/images/slow/blobs/sha256:${hex}`);
    expect(got.status).toBe(200);
    expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(hex);
    proxy.clear();
  });

  it('a store that stops answering gives a 503 once the response timeout passes, and serves again when it answers', async () => {
    const bytes = pseudoRandom('faults/hung', 100_000);
    const hex = await reg.pushBlob('team/images/hung', bytes);
    proxy.on(() => true, { kind: 'stall' });
    try {
      // The client would wait far longer than the store's 30 s response timeout.
      const [res, page] = await Promise.all([
        fetch(`${server.url}/v2/team/images/hung/blobs/sha256:${hex}`, { signal: AbortSignal.timeout(120_000) }),
        fetch(`${server.url}/team/py/simple/`, { signal: AbortSignal.timeout(120_000) }),
      ]);
      expect(res.status).toBe(503);
      expect(await ociError(res)).toBe('UNAVAILABLE');
      expect(page.status).toBe(503);
      expect(await page.json()).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    } finally {
      proxy.clear();
      proxy.release();
    }
    const again = await fetch(`${server.url}/v2/team/images/hung/blobs/sha256:${hex}`);
    expect(again.status).toBe(200);
    expect(Buffer.from(await again.arrayBuffer()).equals(bytes)).toBe(true);
    expect(server.logs()).toMatch(/ETIMEDOUT/);
  }, 240_000);

  describe('with idle_timeout_secs = 2', () => {
    let quick: Velodex;
    let quickReg: Registry;
    beforeAll(async () => {
      quick = await startVelodex({ config: config(proxy.url, 'idle', 2) });
      quickReg = new Registry(quick.url, auth);
    });
    afterAll(async () => {
      await quick?.stop();
    });

    it('a body that stops midway is cut (never ends short as if complete), and served whole once the store answers again', async () => {
      const bytes = pseudoRandom('faults/idle', 8 * MiB);
      const hex = await quickReg.pushBlob('team/images/idle', bytes);
      // Stops after its first MiB and never goes on: only the idle limit ends it.
      proxy.on((path, method) => method === 'GET' && path.endsWith(`/${hex}`), { kind: 'stall', afterBytes: MiB });
      try {
        const res = await fetch(`${quick.url}/v2/team/images/idle/blobs/sha256:${hex}`, { signal: AbortSignal.timeout(120_000) });
        // Either the answer never started (503) or its body breaks off: never a complete-looking short body.
        if (res.status === 200) {
          await expect(res.arrayBuffer()).rejects.toThrow();
        } else {
          expect(res.status).toBe(503);
        }
      } finally {
        proxy.clear();
        proxy.release();
      }
      expect(quick.logs()).toMatch(/the object store sent nothing for 2000 ms/);
      const again = await fetch(`${quick.url}/v2/team/images/idle/blobs/sha256:${hex}`);
      expect(again.status).toBe(200);
      expect(sha256(Buffer.from(await again.arrayBuffer()))).toBe(hex);
    });

    it('a client that stops reading for longer than the idle time still gets every byte', async () => {
      const bytes = pseudoRandom('faults/slow-reader', 12 * MiB);
      const hex = await quickReg.pushBlob('team/images/slow-reader', bytes);
      const res = await fetch(`${quick.url}/v2/team/images/slow-reader/blobs/sha256:${hex}`);
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const chunks: Uint8Array[] = [];
      let paused = false;
      let received = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        received += value.length;
        // Once, after the first MiB: three idle limits without reading a byte.
        if (!paused && received > MiB) {
          paused = true;
          await sleep(6000);
        }
      }
      expect(sha256(Buffer.concat(chunks))).toBe(hex);
    });
  });
});

describe('MinIO stopped during a pull-through', () => {
  const images = {
    byDigest: buildImage({ seed: 's3-faults-pull-digest', layers: 1, bigFileSize: 2048 }),
    byTag: buildImage({ seed: 's3-faults-pull-tag', layers: 1, bigFileSize: 2048 }),
  };
  /** The repositories whose next manifest GET stops MinIO before it is answered (once each). */
  const stopMinioOn = new Set(['team/by-digest', 'team/by-tag']);
  let upstream: HostileServer;
  let server: Velodex;

  beforeAll(async () => {
    // An upstream registry of the test's own, serving each image as `v1` of its repository.
    upstream = await startHostile(async (req, res) => {
      const path = (req.url ?? '').split('?')[0]!;
      if (path === '/v2/' || path === '/v2') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      const m = /^\/v2\/(team\/by-(?:digest|tag))\/manifests\/(.+)$/.exec(path);
      const image = m?.[1] === 'team/by-digest' ? images.byDigest : m?.[1] === 'team/by-tag' ? images.byTag : undefined;
      if (!m || !image || (m[2] !== 'v1' && m[2] !== image.manifest.descriptor.digest)) return void res.writeHead(404).end();
      // The store goes away between velodex's own lookups and its storing what the upstream sent.
      if (req.method === 'GET' && stopMinioOn.delete(m[1]!)) await minio.pause();
      const { mediaType, digest } = image.manifest.descriptor;
      res.writeHead(200, { 'content-type': mediaType, 'docker-content-digest': digest, 'content-length': image.manifest.bytes.length });
      res.end(req.method === 'HEAD' ? undefined : image.manifest.bytes);
    });
    server = await startVelodex({ config: toml(s3Storage(minio, { prefix: 'pull-through' }), oci.cached('mirror', upstream.url, { route: 'mirror' })) });
  });

  afterAll(async () => {
    await minio.start();
    await server?.stop();
    await upstream?.close();
  });

  async function upstreamErrors(): Promise<number> {
    const doc = (await (await fetch(`${server.url}/+stats?index=mirror`)).json()) as { totals?: { upstream_errors: number }; upstream_errors?: number };
    return (doc.totals ?? (doc as { upstream_errors: number })).upstream_errors;
  }

  it('a manifest the upstream sent that cannot be stored is the store\'s 503, not the upstream\'s 502; once MinIO is back it is pulled', async () => {
    for (const [repo, image, reference] of [
      ['team/by-digest', images.byDigest, images.byDigest.manifest.descriptor.digest],
      ['team/by-tag', images.byTag, 'v1'],
    ] as const) {
      const url = `${server.url}/v2/mirror/${repo}/manifests/${reference}`;
      let down: Response;
      try {
        down = await fetch(url);
        expect(down.status, reference).toBe(503);
        expect(down.headers.get('retry-after')).toBe('5');
        expect(await ociError(down)).toBe('UNAVAILABLE');
      } finally {
        await minio.start();
      }
      // The upstream answered: it is not counted as its failure.
      expect(await upstreamErrors()).toBe(0);
      const again = await fetch(url);
      expect(again.status, reference).toBe(200);
      expect(Buffer.from(await again.arrayBuffer()).equals(image.manifest.bytes)).toBe(true);
    }
    expect(stopMinioOn.size).toBe(0);
  });
});
