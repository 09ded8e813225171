/**
 * One upstream fetch per miss for the whole server, not per worker process: velodex with two
 * workers on the fs backend, a cached Python index over a real pypiserver and a cached OCI index
 * over a real distribution registry, each behind the fault proxy, which counts the upstream
 * requests and holds a transfer mid-body so that every client has joined before it goes on.
 *
 * - Six pip processes download one cold 24 MiB wheel at once; their downloads reach both workers
 *   and the upstream sees one whole-file GET (and one page fetch).
 * - Four crane processes pull one cold image at once through both workers: one upstream GET per
 *   blob and for the tag's manifest.
 * - The worker that leads a transfer is killed mid-body: the clients that the other worker
 *   serves from it fail (a short body, never a complete-looking one), that worker never fetches
 *   on its own meanwhile, the primary restarts the killed one, and the next request fetches anew.
 * - The upstream dies mid-transfer: every download on both workers fails, nothing is stored, and
 *   pip then gets the file.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../events/receiver.js';
import { makeBigWheel } from '../python/fixtures/archives.js';
import { CLEAN_ENV } from '../python/fixtures/clients.js';
import { cached, oci, toml } from '../support/config.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, writeLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const MiB = 1024 * 1024;
const WHEEL = 'big-1.0-py3-none-any.whl';
/** Another cold wheel of the same project, for the failure case. */
const WHEEL_2 = 'big-2.0-py3-none-any.whl';

let work: string;
let wheel: string;
let wheel2: string;
let pypi: PypiServer;
let pyProxy: FaultProxy;
let registry: Distribution;
let ociProxy: FaultProxy;
let server: Velodex;
let host: string;
const craneEnv = (): Record<string, string> => ({ HOME: work, DOCKER_CONFIG: join(work, '.docker') });

beforeAll(async () => {
  work = tempDir('velodex-shared-fetches-');
  const files = join(work, 'packages');
  await run('mkdir', ['-p', files]);
  wheel = await makeBigWheel(files, 24 * MiB);
  wheel2 = await makeBigWheel(files, 8 * MiB, '2.0');
  pypi = await startPypiserver(files);
  pyProxy = await FaultProxy.start(pypi.url);
  registry = await startDistribution(work, null);
  ociProxy = await FaultProxy.start(registry.url);
  server = await startVelodex({
    args: ['--workers', '2'],
    config: toml(cached('pypi', `${pyProxy.url}/simple/`), oci.cached('cache', ociProxy.url, { route: 'cache' })),
  });
  host = `127.0.0.1:${server.port}`;
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await pyProxy?.close();
  await pypi?.stop();
  await ociProxy?.close();
  await registry?.stop();
});

interface RequestLine {
  pid: number;
  reqId: string;
  url: string;
}

/** The requests velodex logged whose URL contains `part`, with the pid of the worker that took each. */
function requestsFor(part: string): RequestLine[] {
  const out: RequestLine[] = [];
  for (const line of server.logs().split('\n')) {
    if (!line.includes('"incoming request"')) continue;
    const entry = JSON.parse(line) as { pid: number; reqId: string; req: { url: string } };
    if (entry.req.url.includes(part)) out.push({ pid: entry.pid, reqId: entry.reqId, url: entry.req.url });
  }
  return out;
}

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

function pipDownload(dest: string, spec = 'big==1.0') {
  return run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--only-binary', ':all:', '--index-url', `${server.url}/root/pypi/simple/`, '--dest', dest, spec], {
    env: CLEAN_ENV,
    allowFailure: true,
    timeoutMs: 180_000,
  });
}

/** Whole-file GETs of `filename` the upstream saw (range probes for its metadata aside). */
function wholeFetches(filename: string): number {
  return pyProxy.seen.filter((r) => r.method === 'GET' && r.path.endsWith(`/${filename}`) && r.range === undefined).length;
}

async function seed(repo: string, image: Image): Promise<void> {
  const layout = writeLayout(join(work, `seed-${repo}`), [{ tag: 'v1', item: image }]);
  await run(tool('crane'), ['push', '--insecure', layout, `${registry.host}/${repo}:v1`], { env: craneEnv(), timeoutMs: 120_000 });
}

function curl(url: string, out: string, reqId: string) {
  return run(tool('curl'), ['-sS', '--fail', '-o', out, '-H', `x-request-id: ${reqId}`, url], { allowFailure: true, timeoutMs: 120_000 });
}

/**
 * Makes sure both workers have a client waiting on `url` (whose requests' URLs contain `part`):
 * when every request so far reached one worker, curl asks again on fresh connections, which the
 * kernel hands to the workers in turn, until one reaches the other. Returns those downloads.
 */
async function onBothWorkers(url: string, part: string, expected: string): Promise<Array<Promise<boolean>>> {
  const extra: Array<Promise<boolean>> = [];
  for (let i = 0; new Set(requestsFor(part).map((r) => r.pid)).size < 2; i++) {
    if (i === 4) throw new Error(`four fresh connections all reached one worker: ${JSON.stringify(requestsFor(part))}`);
    const id = `${part.slice(-12)}-extra-${i}`;
    const out = join(work, id);
    extra.push(curl(url, out, id).then((r) => r.code === 0 && sha256File(out) === expected));
    await until(() => requestsFor(part).some((r) => r.reqId === id), 30_000, () => `no log line for ${id}`);
  }
  return extra;
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

describe('two workers fetch each cold file once', () => {
  it('six pip downloads of a cold wheel through both workers make one upstream fetch of the page and of the file', async () => {
    const stalls = pyProxy.stalledCount();
    pyProxy.on((p) => p.endsWith(`/${WHEEL}`), { kind: 'stall', afterBytes: 2 * MiB });
    const dests = Array.from({ length: 6 }, (_, i) => join(work, `pip-${i}`));
    const pips = dests.map((dest) => pipDownload(dest));
    await pyProxy.stalled(stalls + 1);
    // Every pip asked for the file before the upstream goes on.
    await until(() => requestsFor(`/${WHEEL}`).length >= 6, 60_000, () => `file requests so far: ${JSON.stringify(requestsFor(`/${WHEEL}`))}`);
    const digest = sha256File(wheel);
    const extra = await onBothWorkers(`${server.url}/root/pypi/files/${digest}/${WHEEL}`, `/${WHEEL}`, digest);
    expect(new Set(requestsFor(`/${WHEEL}`).map((r) => r.pid)).size).toBe(2);
    pyProxy.clear();
    pyProxy.release();
    const results = await Promise.all(pips);
    for (const r of results) expect(r.code, r.stderr).toBe(0);
    expect(await Promise.all(extra)).toEqual(extra.map(() => true));
    for (const dest of dests) expect(sha256File(join(dest, WHEEL))).toBe(sha256File(wheel));
    expect(wholeFetches(WHEEL)).toBe(1);
    expect(pypi.count('/simple/big/')).toBe(1);
  }, 240_000);

  it('four crane pulls of a cold image through both workers make one upstream GET per blob and for the tag', async () => {
    const image = buildImage({ seed: 'shared-crane', layers: 2, bigFileSize: 16 * MiB });
    await seed('team/app', image);
    const layer = image.layers.at(-1)!.descriptor.digest;
    const stalls = ociProxy.stalledCount();
    ociProxy.on(`/v2/team/app/blobs/${layer}`, { kind: 'stall', afterBytes: 2 * MiB });
    const dirs = Array.from({ length: 4 }, (_, i) => join(work, `crane-${i}`));
    const pulls = dirs.map((dir) =>
      run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `${host}/cache/team/app:v1`, dir], { env: craneEnv(), allowFailure: true, timeoutMs: 180_000 }),
    );
    await ociProxy.stalled(stalls + 1);
    await until(() => requestsFor(`/blobs/${layer}`).length >= 4, 60_000, () => `layer requests so far: ${JSON.stringify(requestsFor(`/blobs/${layer}`))}`);
    // crane opens several connections per pull, in the same order each time: all four layer
    // downloads may well have reached one worker.
    const extra = await onBothWorkers(`${server.url}/v2/cache/team/app/blobs/${layer}`, `/blobs/${layer}`, layer.slice('sha256:'.length));
    expect(new Set(requestsFor(`/blobs/${layer}`).map((r) => r.pid)).size).toBe(2);
    ociProxy.clear();
    ociProxy.release();
    const results = await Promise.all(pulls);
    for (const r of results) expect(r.code, r.stderr).toBe(0);
    expect(await Promise.all(extra)).toEqual(extra.map(() => true));
    for (const dir of dirs) expect(layoutMismatches(readLayout(dir), allBlobs(image))).toEqual([]);
    const gets = ociProxy.requests.filter((r) => r.startsWith('GET /v2/team/app/'));
    for (const blob of [image.config, ...image.layers]) expect(gets.filter((r) => r === `GET /v2/team/app/blobs/${blob.descriptor.digest}`), blob.descriptor.digest).toHaveLength(1);
    expect(gets.filter((r) => r === 'GET /v2/team/app/manifests/v1')).toHaveLength(1);
  }, 240_000);
});

describe('failures reach the clients of every worker', () => {
  it('a leader killed mid-transfer fails the other worker\'s clients, which never fetch on their own; the restarted server fetches anew', async () => {
    const image = buildImage({ seed: 'shared-killed', layers: 1, bigFileSize: 16 * MiB });
    await seed('team/killed', image);
    const layer = image.layers[0]!;
    const path = `/v2/team/killed/blobs/${layer.descriptor.digest}`;
    const url = `${server.url}/v2/cache/team/killed/blobs/${layer.descriptor.digest}`;
    const stalls = ociProxy.stalledCount();
    ociProxy.on(path, { kind: 'stall', afterBytes: 2 * MiB });
    const leading = curl(url, join(work, 'killed-lead'), 'killed-lead');
    await ociProxy.stalled(stalls + 1);
    const pidOf = (id: string) => requestsFor('/blobs/').find((r) => r.reqId === id)?.pid;
    const leader = pidOf('killed-lead')!;
    // Followers on fresh connections: the kernel spreads them over both workers.
    const followers = Array.from({ length: 4 }, (_, i) => ({ id: `killed-follow-${i}`, out: join(work, `killed-follow-${i}`) }));
    const follows = followers.map((f) => curl(url, f.out, f.id));
    // Each follower is receiving the bytes the leader has staged so far.
    await until(() => followers.every((f) => sizeOf(f.out) > 0), 60_000, () => `follower sizes: ${followers.map((f) => sizeOf(f.out)).join(', ')}`);
    const across = followers.filter((f) => pidOf(f.id) !== leader);
    expect(across.length).toBeGreaterThan(0);
    process.kill(leader, 'SIGKILL');
    const results = await Promise.all(follows);
    for (const [i, r] of results.entries()) {
      // A short body, never a whole-looking one: curl knows the length and says the transfer broke.
      expect(r.code, `follower ${i}: ${r.stderr}`).not.toBe(0);
      expect(sizeOf(followers[i]!.out)).toBeLessThan(layer.bytes.length);
    }
    expect((await leading).code).not.toBe(0);
    // Nobody fetched again on their own while the leader was dying.
    expect(ociProxy.count(path)).toBe(1);
    await until(() => server.logs().includes('worker restarted and listening'), 30_000, () => 'the killed worker was not restarted');
    ociProxy.clear();
    ociProxy.dropStalled();
    const again = join(work, 'killed-again');
    expect((await curl(url, again, 'killed-again')).code).toBe(0);
    expect(sha256File(again)).toBe(layer.descriptor.digest.slice('sha256:'.length));
    expect(ociProxy.count(path)).toBe(2);
  }, 240_000);

  it('an upstream that dies mid-transfer fails every download on both workers; nothing is stored; pip then gets the file', async () => {
    const digest = sha256File(wheel2);
    const url = `${server.url}/root/pypi/files/${digest}/${WHEEL_2}`;
    // The page first, so that the file's URL is known to the index.
    expect((await fetch(`${server.url}/root/pypi/simple/big/`)).status).toBe(200);
    const stalls = pyProxy.stalledCount();
    pyProxy.on((p) => p.endsWith(`/${WHEEL_2}`), { kind: 'stall', afterBytes: 2 * MiB });
    // curl, not pip: pip would retry a broken download, and the retry hides what the first try saw.
    const clients = Array.from({ length: 4 }, (_, i) => ({ id: `dying-${i}`, out: join(work, `dying-${i}`) }));
    const downloads = [curl(url, clients[0]!.out, clients[0]!.id)];
    await pyProxy.stalled(stalls + 1);
    for (const c of clients.slice(1)) downloads.push(curl(url, c.out, c.id));
    await until(() => clients.every((c) => sizeOf(c.out) > 0), 60_000, () => `sizes: ${clients.map((c) => sizeOf(c.out)).join(', ')}`);
    expect(new Set(requestsFor(`/${WHEEL_2}`).map((r) => r.pid)).size).toBe(2);
    pyProxy.clear();
    pyProxy.dropStalled();
    for (const [i, r] of (await Promise.all(downloads)).entries()) {
      expect(r.code, `client ${i}`).not.toBe(0);
      expect(sizeOf(clients[i]!.out)).toBeLessThan(statSync(wheel2).size);
    }
    expect(wholeFetches(WHEEL_2)).toBe(1);
    const stored = join(server.dataDir, 'store', 'blobs', 'sha256', digest.slice(0, 2), digest);
    expect(sizeOf(stored)).toBe(0);
    const retry = await pipDownload(join(work, 'dying-retry'), 'big==2.0');
    expect(retry.code, retry.stderr).toBe(0);
    expect(sha256File(join(work, 'dying-retry', WHEEL_2))).toBe(digest);
    expect(wholeFetches(WHEEL_2)).toBe(2);
    expect(sizeOf(stored)).toBe(statSync(wheel2).size);
  }, 240_000);
});
