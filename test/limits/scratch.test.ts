/**
 * The scratch budget (`[storage] scratch_limit`, docs/configuration.md) with real clients, on the
 * run's backend (fs: the store's staging folder; s3: the data dir's scratch folder): an upload
 * larger than the whole limit is refused before it is staged, with a message naming the limit in
 * twine's and crane's output; one that fits the limit but not what another upload in flight leaves
 * free is refused for now (503, Retry-After), which crane retries by itself and twine reports, and
 * both uploads end up stored once the other is done; a chunked upload without a declared length is
 * cut as it passes the limit and leaves nothing visible. After every refusal no staged file is
 * left and the budget holds nothing.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject } from '../python/fixtures/projects.js';
import { formBody, formType, uploadEntries } from '../python/fixtures/form.js';
import { s3PrefixFor, sharedMinio, testBackend } from '../support/backend.js';
import { hosted, oci, s3Storage, toml, type ConfigPart } from '../support/config.js';
import { startDockerd, type Dockerd } from '../support/dockerd.js';
import { buildImage, pseudoRandom, tar, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { RawConnection, rawRequest, requestHead } from '../support/raw-http.js';
import { run, type RunResult } from '../support/run.js';
import { until } from '../support/until.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'scratch-token-5d1e';
const MiB = 1024 * 1024;
/** The whole budget: each upload of the test fits it alone, two of them together do not. */
const LIMIT = 3 * MiB;

let server: Velodex;
/** The upstream of the cached OCI index `hub`: a velodex without a scratch limit. */
let upstream: Velodex;
/** Pushed to the upstream: an image with a layer larger than the whole limit, and one whose layer of 1.5 MiB fits it. */
const upstreamImage = buildImage({ seed: 'scratch-upstream', layers: 2, bigFileSize: 4 * MiB });
const upstreamFits = buildImage({ seed: 'scratch-upstream-fits', layers: 1, bigFileSize: 1.5 * MiB });
let work: string;
let env: Record<string, string>;

interface Scratch {
  limit_bytes: number | null;
  used_bytes: number;
  waiting: number;
  refused: number;
}

/** `[storage]` with the budget: on s3 the run's MinIO under this server's prefix, as `startVelodex` would give it. */
function storage(dataDir: string): ConfigPart {
  const scratch = { scratch_limit: '3MiB', scratch_wait_secs: 1 };
  if (testBackend() === 'fs') return { storage: scratch };
  const { storage: s3 } = s3Storage(sharedMinio(), { prefix: s3PrefixFor(dataDir) }) as { storage: Record<string, unknown> };
  return { storage: { ...s3, ...scratch } };
}

beforeAll(async () => {
  work = tempDir('velodex-scratch-');
  env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  upstream = await startVelodex({ config: toml(oci.hosted('up', { route: 'up', token: TOKEN })) });
  const upHost = `127.0.0.1:${upstream.port}`;
  await crane(['auth', 'login', upHost, '-u', '__token__', '--password-stdin'], TOKEN);
  await crane(['push', writeLayout(join(work, 'upstream'), [{ tag: 'v1', item: upstreamImage }]), `${upHost}/up/app:v1`]);
  await crane(['push', writeLayout(join(work, 'upstream-fits'), [{ tag: 'v2', item: upstreamFits }]), `${upHost}/up/app:v2`]);
  const dataDir = tempDir('velodex-scratch-server-');
  server = await startVelodex({
    dataDir,
    config: toml(
      hosted('py', { token: TOKEN }),
      oci.hosted('images', { route: 'team/images', token: TOKEN }),
      oci.cached('hub', upstream.url, { route: 'hub' }),
      storage(dataDir),
    ),
  });
  await crane(['auth', 'login', host(), '-u', '__token__', '--password-stdin'], TOKEN);
}, 180_000);

afterAll(async () => {
  await Promise.all([server?.stop(), upstream?.stop()]);
});

const host = () => `127.0.0.1:${server.port}`;
const ref = (tag: string) => `${host()}/team/images/app:${tag}`;

function crane(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env, input, allowFailure, timeoutMs: 180_000 });
}

function twine(files: string[], allowFailure = false): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/py/`, '-u', '__token__', '-p', TOKEN, ...files], {
    env: { NO_COLOR: '1', COLUMNS: '200' },
    allowFailure,
  });
}

function uvPublish(files: string[]): Promise<RunResult> {
  return run(tool('uv'), ['publish', '--publish-url', `${server.url}/root/py/`, '--token', TOKEN, ...files], {
    allowFailure: true,
    env: { UV_CACHE_DIR: join(work, 'uv-cache'), NO_COLOR: '1' },
  });
}

function oras(args: string[], cwd: string): Promise<RunResult> {
  return run(tool('oras'), [...args, '--plain-http', '-u', '__token__', '-p', TOKEN], { cwd, env, allowFailure: true, timeoutMs: 180_000 });
}

async function scratch(on: Velodex = server): Promise<Scratch> {
  const res = await fetch(`${on.url}/+status`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { storage: { scratch: Scratch } }).storage.scratch;
}

/**
 * The sizes of the staged files of either backend that hold bytes: the fs store's staging folder,
 * s3's scratch copies. (An upload session a client left open keeps its staged bytes until it is
 * cancelled or expires: crane, refused one layer, exits without cancelling the sessions of the
 * others, and on fs those hold what their PATCHes sent.)
 */
async function stagedFiles(on: Velodex = server): Promise<number[]> {
  const sizes: number[] = [];
  for (const dir of [join(on.dataDir, 'store', 'staging'), join(on.dataDir, 'scratch')]) {
    const found = await readdir(dir).catch(() => [] as string[]);
    for (const name of found.filter((n) => n.startsWith('stage-') || n.startsWith('chunk-'))) {
      const size = await stat(join(dir, name)).then((s) => s.size, () => 0);
      if (size > 0) sizes.push(size);
    }
  }
  return sizes.sort((a, b) => a - b);
}

/**
 * The budget holds what it held before (`before`: the staged files then), and the staged files
 * are those: a refused write gave back everything on its way out and left no bytes behind.
 */
async function backTo(before: number[], on: Velodex = server): Promise<void> {
  const held = before.reduce((a, b) => a + b, 0);
  await until('the scratch budget to hold what it held before', async () => ((await scratch(on)).used_bytes === held ? true : undefined), {
    timeoutMs: 30_000,
    context: async () => `scratch: ${JSON.stringify(await scratch(on))}, staged: ${(await stagedFiles(on)).join(', ')}`,
  });
  expect(await stagedFiles(on)).toEqual(before);
}

/** Names of the files of `project` on the hosted index's Simple page (none when it has no page). */
async function listed(project: string): Promise<string[]> {
  const res = await fetch(`${server.url}/root/py/simple/${project}/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
  if (res.status === 404) return [];
  expect(res.status).toBe(200);
  return ((await res.json()) as { files: { filename: string }[] }).files.map((f) => f.filename);
}

/**
 * A Python upload of `wheel` over a raw connection that sends its head (with the whole form's
 * Content-Length) and the form's first bytes, and holds on: its declared length is what the
 * budget holds while it does. `finish` sends the rest and reads the answer.
 */
async function heldUpload(wheel: string): Promise<{ declared: number; finish: () => Promise<number>; abandon: () => void }> {
  const boundary = 'scratch-hold-boundary';
  const { fields, file } = uploadEntries(wheel);
  const body = formBody(boundary, [...fields, file]);
  const conn = await RawConnection.open(server.url);
  const head = requestHead('POST', '/root/py/', { authorization: basicAuth(TOKEN), 'content-type': formType(boundary), 'content-length': String(body.length) });
  await conn.write(Buffer.concat([Buffer.from(head), body.subarray(0, 1024)]));
  return {
    declared: body.length,
    finish: async () => {
      await conn.write(body.subarray(1024));
      const res = await conn.response();
      conn.close();
      return res.status;
    },
    abandon: () => conn.close(),
  };
}

describe('a Python upload and the scratch limit', () => {
  it('refuses a wheel larger than the whole limit before it is staged: twine shows 413 and the limit', async () => {
    const big = await buildProject('scratch-big', '1.0', { payloadBytes: 4 * MiB });
    const staged = await stagedFiles();
    const before = (await scratch()).refused;
    const res = await twine([big.wheel], true);
    expect(res.code).not.toBe(0);
    const output = `${res.stdout}\n${res.stderr}`;
    expect(output).toMatch(/413/);
    expect(output).toMatch(/scratch space, more than its whole limit of 3\.0 MiB/);
    expect(output).toMatch(/scratch_limit/);
    expect(await listed('scratch-big')).toEqual([]);
    expect((await scratch()).refused).toBeGreaterThan(before);
    // The same figures for a scrape.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^velodex_scratch_limit_bytes 3145728$/m);
    expect(Number(/^velodex_scratch_refused_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(before);
    await backTo(staged);
  });

  it('answers an upload whose Content-Length is above the limit before a byte of its form is sent', async () => {
    const conn = await RawConnection.open(server.url);
    await conn.write(requestHead('POST', '/root/py/', { authorization: basicAuth(TOKEN), 'content-type': formType('never-sent'), 'content-length': String(4 * MiB) }));
    const res = await conn.response();
    conn.close();
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ message: expect.stringContaining('more than its whole limit of 3.0 MiB') });
  });

  it('gives back the room of an upload whose client goes away midway, and keeps nothing of it', async () => {
    const held = await buildProject('scratch-gone', '1.0', { payloadBytes: 2 * MiB });
    const staged = await stagedFiles();
    const holder = await heldUpload(held.wheel);
    await until('the held upload to reserve its declared length', async () => ((await scratch()).used_bytes >= holder.declared ? true : undefined));
    holder.abandon();
    await backTo(staged);
    expect(await listed('scratch-gone')).toEqual([]);
  });

  it('refuses the same wheel through uv publish, with the limit in its output', async () => {
    const big = await buildProject('scratch-big', '1.0', { payloadBytes: 4 * MiB });
    const staged = await stagedFiles();
    const res = await uvPublish([big.wheel]);
    expect(res.code).not.toBe(0);
    expect(`${res.stdout}\n${res.stderr}`).toMatch(/413/);
    expect(`${res.stdout}\n${res.stderr}`).toMatch(/scratch_limit/);
    expect(await listed('scratch-big')).toEqual([]);
    await backTo(staged);
  });

  it('takes two uploads at once that together pass the limit: each is stored, or refused for now and stored when sent again', async () => {
    const a = await buildProject('scratch-pair-a', '1.0', { payloadBytes: 2 * MiB });
    const b = await buildProject('scratch-pair-b', '1.0', { payloadBytes: 2 * MiB });
    const staged = await stagedFiles();
    const results = await Promise.all([twine([a.wheel], true), twine([b.wheel], true)]);
    for (const [i, res] of results.entries()) {
      // Whichever lost the race for the room either waited for it or was told to come back.
      if (res.code !== 0) expect(`${res.stdout}\n${res.stderr}`, `upload ${i}`).toMatch(/503.*retry in \d+ s/s);
    }
    for (const [i, built] of [a, b].entries()) if (results[i]!.code !== 0) await twine([built.wheel]);
    expect(await listed('scratch-pair-a')).toEqual([a.wheelFilename]);
    expect(await listed('scratch-pair-b')).toEqual([b.wheelFilename]);
    await backTo(staged);
  });

  it('refuses a wheel for now while another upload holds the room (503, retry), then stores both', async () => {
    const held = await buildProject('scratch-held', '1.0', { payloadBytes: 2 * MiB });
    const waiting = await buildProject('scratch-waits', '1.0', { payloadBytes: 1.5 * MiB });
    const staged = await stagedFiles();
    const holder = await heldUpload(held.wheel);
    await until('the held upload to reserve its declared length', async () => ((await scratch()).used_bytes >= holder.declared ? true : undefined));

    const refused = await twine([waiting.wheel], true);
    expect(refused.code).not.toBe(0);
    const output = `${refused.stdout}\n${refused.stderr}`;
    expect(output).toMatch(/503/);
    expect(output).toMatch(/scratch space is taken by other uploads in flight.*retry in \d+ s/);
    expect(await listed('scratch-waits')).toEqual([]);

    // The held upload is unaffected, and once it is in, the refused one goes through as it is.
    expect(await holder.finish()).toBe(200);
    await twine([waiting.wheel]);
    expect(await listed('scratch-held')).toEqual([held.wheelFilename]);
    expect(await listed('scratch-waits')).toEqual([waiting.wheelFilename]);
    await backTo(staged);
  });
});

describe('an OCI push and the scratch limit', () => {
  it('refuses a layer larger than the whole limit: crane shows 413 with the limit, and nothing of the image is there', async () => {
    const image = buildImage({ seed: 'scratch-big', layers: 2, bigFileSize: 4 * MiB });
    const staged = await stagedFiles();
    const before = (await scratch()).refused;
    const res = await crane(['push', writeLayout(join(work, 'big'), [{ tag: 'big', item: image }]), ref('big')], undefined, true);
    expect(res.code).not.toBe(0);
    // crane prints the code and the message of the error body.
    expect(res.stderr).toMatch(/SIZE_INVALID: this upload needs 4\.\d MiB of the server's scratch space, more than its whole limit of 3\.0 MiB/);
    expect(res.stderr).toMatch(/raise \[storage\] scratch_limit/);
    const big = image.layers.find((l) => l.bytes.length > LIMIT)!;
    expect((await fetch(`${server.url}/v2/team/images/app/blobs/${big.descriptor.digest}`, { method: 'HEAD' })).status).toBe(404);
    expect((await crane(['manifest', ref('big')], undefined, true)).code).not.toBe(0);
    expect((await scratch()).refused).toBeGreaterThan(before);
    // crane exits on the refusal without cancelling the sessions of its other blobs (on fs they hold
    // what their PATCHes sent until they expire): whatever is staged now is theirs, never the refused layer's.
    const others = image.layers.filter((l) => l !== big).reduce((n, l) => n + l.bytes.length, image.config.bytes.length);
    await until('the budget to hold only what is staged', async () => {
      const files = await stagedFiles();
      return (await scratch()).used_bytes === files.reduce((a, b) => a + b, 0) ? files : undefined;
    }).then((files) => {
      expect(files.every((size) => size < big.bytes.length)).toBe(true);
      expect(files.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(staged.reduce((a, b) => a + b, 0) + others);
    });
  });

  it('refuses an oras push of a file larger than the whole limit, with the limit in its output', async () => {
    const dir = tempDir('velodex-scratch-oras-');
    writeFileSync(join(dir, 'big.bin'), pseudoRandom('scratch-oras', 4 * MiB));
    const staged = await stagedFiles();
    const res = await oras(['push', `${host()}/team/images/oras:big`, 'big.bin:application/octet-stream'], dir);
    expect(res.code).not.toBe(0);
    // oras prints the code (as words) and the message of the error body.
    expect(`${res.stdout}\n${res.stderr}`).toMatch(/size invalid: this upload needs 4\.0 MiB of the server's scratch space, more than its whole limit of 3\.0 MiB/);
    expect((await crane(['manifest', `${host()}/team/images/oras:big`], undefined, true)).code).not.toBe(0);
    // oras, like crane, leaves the sessions of the blobs it did send (the config) to expire.
    await until('the budget to hold only what is staged', async () => {
      const files = await stagedFiles();
      return (await scratch()).used_bytes === files.reduce((a, b) => a + b, 0) ? files : undefined;
    }).then((files) => expect(files.every((size) => size < MiB)).toBe(true));
    expect(staged.every((size) => size < MiB)).toBe(true);
  });

  it('refuses a monolithic POST ?digest= whose Content-Length is above the limit before reading its body', async () => {
    const staged = await stagedFiles();
    const bytes = pseudoRandom('scratch-monolithic', 4 * MiB);
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    const conn = await RawConnection.open(server.url);
    // Only the head: the answer must not wait for a body the server will not take.
    await conn.write(requestHead('POST', `/v2/team/images/app/blobs/uploads/?digest=${digest}`, { authorization: basicAuth(TOKEN), 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) }));
    const res = await conn.response();
    conn.close();
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ errors: [{ code: 'SIZE_INVALID', message: expect.stringContaining('more than its whole limit of 3.0 MiB') }] });
    expect((await fetch(`${server.url}/v2/team/images/app/blobs/${digest}`, { method: 'HEAD' })).status).toBe(404);
    await backTo(staged);
  });

  it('cuts a chunked PATCH without a declared length as it passes the limit, and nothing of it is visible', async () => {
    // A server of its own, whose budget nothing else holds: with room held (the sessions crane left
    // above), the cut comes before the whole limit, as a 503 for now, not the 413 this is about.
    const dataDir = tempDir('velodex-scratch-chunked-');
    const own = await startVelodex({ dataDir, config: toml(oci.hosted('images', { route: 'team/images', token: TOKEN }), storage(dataDir)) });
    try {
      await cutChunked(own);
    } finally {
      await own.stop();
    }
  });

  /** The chunked PATCH of the test above, through `on`. */
  async function cutChunked(on: Velodex): Promise<void> {
    const auth = { authorization: basicAuth(TOKEN) };
    const staged = await stagedFiles(on);
    const opened = await rawRequest(on.url, '/v2/team/images/app/blobs/uploads/', 'POST', { ...auth, 'content-length': '0' });
    expect(opened.status).toBe(202);
    const location = String(opened.headers.location);
    const bytes = pseudoRandom('scratch-chunked', 4 * MiB);
    const conn = await RawConnection.open(on.url);
    const head = requestHead('PATCH', location, { ...auth, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' });
    // Not awaited: the server stops reading once it refuses, and the rest stays in the socket's buffer.
    void conn.write(head);
    for (let at = 0; at < bytes.length; at += 64 * 1024) {
      const chunk = bytes.subarray(at, at + 64 * 1024);
      void conn.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]));
    }
    void conn.write('0\r\n\r\n');
    const res = await conn.response();
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ errors: [{ code: 'SIZE_INVALID', message: expect.stringContaining('scratch_limit') }] });
    // The cut did not reset the connection (a reset can overtake the answer: docker then prints
    // "broken pipe"): the rest of the body, a small one, was read and dropped, and the same
    // connection carries the next request. The session received nothing.
    expect(res.headers.connection).not.toBe('close');
    await conn.write(requestHead('GET', location, auth));
    const status = await conn.response();
    conn.close();
    expect(status.status).toBe(204);
    expect(status.headers.range).toBe('0-0');
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    expect((await fetch(`${on.url}/v2/team/images/app/blobs/${digest}`, { method: 'HEAD' })).status).toBe(404);
    expect((await rawRequest(on.url, location, 'DELETE', auth)).status).toBe(204);
    await backTo(staged, on);
  }

  it('gives back the room a PATCH declared when its client goes away midway; the session keeps what it had', async () => {
    const auth = { authorization: basicAuth(TOKEN) };
    const staged = await stagedFiles();
    const opened = await rawRequest(server.url, '/v2/team/images/app/blobs/uploads/', 'POST', { ...auth, 'content-length': '0' });
    const location = String(opened.headers.location);
    const conn = await RawConnection.open(server.url);
    await conn.write(requestHead('PATCH', location, { ...auth, 'content-type': 'application/octet-stream', 'content-length': String(2 * MiB) }));
    await conn.write(pseudoRandom('scratch-gone-oci', MiB));
    await until('the PATCH to reserve its declared length', async () => ((await scratch()).used_bytes >= 2 * MiB ? true : undefined));
    conn.close();
    await backTo(staged);
    const status = await rawRequest(server.url, location, 'GET', auth);
    expect(status.status).toBe(204);
    expect(status.headers.range).toBe('0-0');
    expect((await rawRequest(server.url, location, 'DELETE', auth)).status).toBe(204);
  });

  it('refuses a push for now while another upload holds the room; crane retries by itself and the image is stored', async () => {
    const held = await buildProject('scratch-held-oci', '1.0', { payloadBytes: 2 * MiB });
    const staged = await stagedFiles();
    const holder = await heldUpload(held.wheel);
    await until('the held upload to reserve its declared length', async () => ((await scratch()).used_bytes >= holder.declared ? true : undefined));
    const refusedBefore = (await scratch()).refused;

    const image = buildImage({ seed: 'scratch-retried', layers: 2 });
    const pushing = crane(['push', writeLayout(join(work, 'retried'), [{ tag: 'retried', item: image }]), ref('retried')], undefined, true);
    // Once crane has been refused for now, the other upload completes, and crane's retry finds room.
    await until('crane to be refused for now', async () => ((await scratch()).refused > refusedBefore ? true : undefined));
    expect(await holder.finish()).toBe(200);
    const pushed = await pushing;
    expect(pushed.code, pushed.stderr).toBe(0);

    const manifest = await crane(['manifest', ref('retried')]);
    expect(JSON.parse(manifest.stdout)).toMatchObject({ layers: image.layers.map((l) => ({ digest: l.descriptor.digest })) });
    for (const layer of image.layers) {
      const blob = await fetch(`${server.url}/v2/team/images/app/blobs/${layer.descriptor.digest}`);
      expect(Buffer.from(await blob.arrayBuffer()).equals(layer.bytes)).toBe(true);
    }
    expect(await listed('scratch-held-oci')).toEqual([held.wheelFilename]);
    await backTo(staged);
  });
});

describe('a pull-through fill and the scratch limit', () => {
  const blobUrl = (digest: string) => `${server.url}/v2/hub/up/app/blobs/${digest}`;
  const big = upstreamImage.layers.find((l) => l.bytes.length > LIMIT)!;
  const fits = upstreamFits.layers[0]!;

  it('answers 502 naming the limit for an upstream blob larger than the whole limit, and keeps nothing of it', async () => {
    const staged = await stagedFiles();
    for (let i = 0; i < 2; i++) {
      const res = await fetch(blobUrl(big.descriptor.digest));
      expect(res.status).toBe(502);
      const body = (await res.json()) as { errors: { code: string; message: string }[] };
      expect(body.errors[0]).toMatchObject({ code: 'UNKNOWN', message: expect.stringContaining("larger than this server's scratch limit of 3.0 MiB") });
    }
    await backTo(staged);
  });

  it('refuses a fill for now (503, Retry-After) while an upload holds the room, and serves it once there is room', async () => {
    const held = await buildProject('scratch-held-fill', '1.0', { payloadBytes: 2 * MiB });
    const staged = await stagedFiles();
    const holder = await heldUpload(held.wheel);
    await until('the held upload to reserve its declared length', async () => ((await scratch()).used_bytes >= holder.declared ? true : undefined));
    const refused = await fetch(blobUrl(fits.descriptor.digest));
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await refused.json()) as { errors: { code: string }[] }).errors[0]?.code).toBe('UNAVAILABLE');

    expect(await holder.finish()).toBe(200);
    const served = await fetch(blobUrl(fits.descriptor.digest));
    expect(served.status).toBe(200);
    expect(Buffer.from(await served.arrayBuffer()).equals(fits.bytes)).toBe(true);
    await backTo(staged);
  });
});

describe('the scratch limit of a server of several worker processes', () => {
  let workers: Velodex;

  beforeAll(async () => {
    const dataDir = tempDir('velodex-scratch-workers-');
    workers = await startVelodex({ dataDir, args: ['--workers', '2'], config: toml(hosted('py', { token: TOKEN }), storage(dataDir)) });
  }, 120_000);

  afterAll(async () => {
    await workers?.stop();
  });

  it('gives each worker half of it: an upload above a half is refused with the share named, one below is stored', async () => {
    const over = await buildProject('scratch-share-over', '1.0', { payloadBytes: 2 * MiB });
    const under = await buildProject('scratch-share-under', '1.0', { payloadBytes: 1 * MiB });
    const upload = (wheel: string) =>
      run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${workers.url}/root/py/`, '-u', '__token__', '-p', TOKEN, wheel], {
        env: { NO_COLOR: '1', COLUMNS: '200' },
        allowFailure: true,
      });
    const refused = await upload(over.wheel);
    expect(refused.code).not.toBe(0);
    expect(`${refused.stdout}\n${refused.stderr}`).toMatch(/413.*more than its limit of 1\.5 MiB \(each of its 2 worker processes' share of 3\.0 MiB\)/s);
    const stored = await upload(under.wheel);
    expect(stored.code, stored.stderr).toBe(0);
    const page = await fetch(`${workers.url}/root/py/simple/scratch-share-under/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
    expect(((await page.json()) as { files: { filename: string }[] }).files.map((f) => f.filename)).toEqual([under.wheelFilename]);
    // A scrape sums the workers: their shares make the server's limit.
    expect(await (await fetch(`${workers.url}/metrics`)).text()).toMatch(/^velodex_scratch_limit_bytes 3145728$/m);
  });
});

describe('a docker push and the scratch limit', () => {
  let engine: Dockerd;
  /**
   * A server of its own, whose budget nothing else holds: docker streams a layer without a
   * declared length, so the cut comes where the stream passes what is free, which is the whole
   * limit (413) only when no other write holds a byte (the sessions crane left above do).
   */
  let fresh: Velodex;
  const freshRef = (tag: string) => `127.0.0.1:${fresh.port}/team/images/app:${tag}`;

  beforeAll(async () => {
    const dataDir = tempDir('velodex-scratch-docker-server-');
    fresh = await startVelodex({ dataDir, config: toml(oci.hosted('images', { route: 'team/images', token: TOKEN }), storage(dataDir)) });
    const dir = tempDir('velodex-scratch-docker-');
    engine = await startDockerd(dir);
    const rootfs = join(dir, 'rootfs.tar');
    writeFileSync(rootfs, tar(new Map([['big.bin', pseudoRandom('scratch-docker', 4 * MiB)]])));
    await engine.docker(['import', rootfs, 'local/big:v1']);
    await engine.docker(['login', '-u', '__token__', '--password-stdin', `127.0.0.1:${fresh.port}`], { input: `${TOKEN}\n` });
  }, 180_000);

  afterAll(async () => {
    await engine?.stop();
    await fresh?.stop();
  });

  // docker retries a layer upload on any error but a denial (five times, about 50 s) before it
  // gives up and prints the registry's message.
  it('refuses a layer larger than the whole limit: docker push fails with the limit in its output, and nothing is stored', async () => {
    await engine.docker(['tag', 'local/big:v1', freshRef('docker-big')]);
    const res = await engine.docker(['push', freshRef('docker-big')], { allowFailure: true, timeoutMs: 180_000 });
    const output = `${res.stdout}\n${res.stderr}`;
    expect(res.code, output).not.toBe(0);
    expect(output).toMatch(/scratch space, more than its whole limit of 3\.0 MiB/);
    expect((await crane(['manifest', freshRef('docker-big')], undefined, true)).code).not.toBe(0);
    // Every attempt's session was undone to nothing: the budget holds nothing, and no staged file a byte.
    const status = (await (await fetch(`${fresh.url}/+status`)).json()) as { storage: { scratch: Scratch } };
    expect(status.storage.scratch).toMatchObject({ used_bytes: 0, limit_bytes: LIMIT });
    for (const dir of [join(fresh.dataDir, 'store', 'staging'), join(fresh.dataDir, 'scratch')]) {
      for (const name of (await readdir(dir).catch(() => [] as string[])).filter((n) => n.startsWith('stage-'))) expect((await stat(join(dir, name))).size).toBe(0);
    }
  });
});

