/**
 * One velodex server with two worker processes on the fs backend acts as one server: the kernel
 * hands each new connection to the next worker, so real clients (twine processes, crane, the OCI
 * conformance suite) and raw requests that each open a connection of their own reach both. What
 * one worker acknowledges the other reads; concurrent uploads through both all land (the fs
 * compare-and-swap holds across processes); a chunked OCI upload whose every verb reaches another
 * worker completes; `/+stats`, `/+status` and `/metrics` count the whole server whichever worker
 * answers; a webhook goes out once; a killed worker is replaced while the other serves; SIGTERM
 * lets an in-flight download finish. Always on fs: sharing one data dir is what workers add.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVING_V8_FLAGS } from '../../registry/src/workers/v8-flags.js';
import { Receiver, until } from '../events/receiver.js';
import { runV111 } from '../oci/conformance-support.js';
import { hosted, oci, toml } from '../support/config.js';
import { allBlobs, buildImage, layoutMismatches, pseudoRandom, readLayout, writeLayout } from '../support/oci-image.js';
import { CLI, tool } from '../support/paths.js';
import { buildProject } from '../python/fixtures/projects.js';
import { alive } from '../support/dockerd.js';
import { rawRequest } from '../support/raw-http.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'workers-token-71c3';
const AUTH = basicAuth(TOKEN);
const MiB = 1024 * 1024;

let server: Velodex;
const receiver = new Receiver();

beforeAll(async () => {
  await receiver.start();
  server = await startVelodex({
    args: ['--workers', '2'],
    config: toml(
      hosted('rel', { token: TOKEN, volatile: true, webhooks: [{ url: `${receiver.url}/hook`, secret: 'workers-hook-secret' }] }),
      oci.hosted('oci', { token: TOKEN }),
    ),
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await receiver.stop();
});

/** The pids of the processes that logged "Server listening": the workers (the primary listens on nothing). */
function workerPids(s: Velodex): number[] {
  const pids = new Set<number>();
  for (const line of s.logs().split('\n')) {
    if (line.includes('"Server listening at')) pids.add((JSON.parse(line) as { pid: number }).pid);
  }
  return [...pids];
}

/** The pid of the worker that served the request with id `reqId`, from its log line. */
function pidOf(s: Velodex, reqId: string): number | undefined {
  for (const line of s.logs().split('\n')) {
    if (line.includes(`"reqId":"${reqId}"`)) return (JSON.parse(line) as { pid: number }).pid;
  }
  return undefined;
}

/** A request on a connection of its own (so the kernel picks the worker), tagged with a request id. */
function fresh(path: string, method = 'GET', headers: Record<string, string> = {}, body?: Buffer) {
  return rawRequest(server.url, path, method, { connection: 'close', ...headers }, { timeoutMs: 30_000, ...(body === undefined ? {} : { body }) });
}

function twine(files: string[]) {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/rel/`, '-u', '__token__', '-p', TOKEN, ...files], {
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

async function simpleJson(project: string): Promise<{ files: { filename: string }[]; versions: string[] }> {
  const res = await fetch(`${server.url}/root/rel/simple/${project}/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
  expect(res.status).toBe(200);
  return (await res.json()) as { files: { filename: string }[]; versions: string[] };
}

describe('two workers, one server', () => {
  it('starts two workers under one primary and prints the banner once', async () => {
    // The banner goes to stderr, which may reach the test a moment after the JSON line on stdout.
    await until(() => server.logs().includes('velodex listening on '), 5_000, () => 'no banner on stderr');
    const logs = server.logs();
    expect(workerPids(server)).toHaveLength(2);
    expect(workerPids(server)).not.toContain(server.pid);
    expect(logs.split('\n').filter((l) => l.includes('"velodex listening"'))).toHaveLength(1);
    // stdout and stderr share the test's buffer, so the banner is counted, not matched by line.
    expect(logs.split('velodex listening on ').length - 1).toBe(1);
    expect(logs).toContain(`velodex listening on ${server.url} (${join(server.dataDir, 'velodex.toml')}; 2 worker processes)`);
  });

  it('starts each worker with the serving V8 flags, which the primary was not given', () => {
    const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    expect(argv(server.pid)).not.toContain('--no-memory-reducer');
    for (const pid of workerPids(server)) expect(argv(pid)).toEqual(expect.arrayContaining([...SERVING_V8_FLAGS]));
  });

  it('new connections reach both workers', async () => {
    const served = new Set<number>();
    for (let i = 0; i < 8; i++) {
      const id = `spread-${i}`;
      expect((await fresh('/root/rel/simple/', 'GET', { 'x-request-id': id })).status).toBe(200);
      await until(() => pidOf(server, id) !== undefined, 5_000, () => `no log line for ${id}`);
      served.add(pidOf(server, id)!);
    }
    expect([...served].sort()).toEqual(workerPids(server).sort());
  });

  it('eight twine processes upload at once through both workers, and every file lands', async () => {
    const projects = await Promise.all(Array.from({ length: 8 }, (_, i) => buildProject('wk-many', `1.${i}`)));
    const results = await Promise.all(projects.map((p) => twine([p.wheel, p.sdist])));
    for (const r of results) expect(r.code).toBe(0);
    // Read several times on fresh connections: both workers must agree.
    for (let i = 0; i < 4; i++) {
      const page = await simpleJson('wk-many');
      expect(page.versions.sort()).toEqual(projects.map((p) => p.version).sort());
      expect(page.files).toHaveLength(16);
    }
    const list = await fresh('/root/rel/simple/', 'GET', { accept: 'application/vnd.pypi.simple.v1+json' });
    expect((JSON.parse(list.body) as { projects: { name: string }[] }).projects.map((p) => p.name)).toContain('wk-many');
  }, 180_000);

  it('a webhook goes out once per upload, not once per worker', async () => {
    const before = receiver.at('/hook').length;
    const p = await buildProject('wk-hooked', '1.0');
    expect((await twine([p.wheel])).code).toBe(0);
    await receiver.waitFor('/hook', before + 1);
    // Both workers scan the outbox; give the other one time to (wrongly) send it again.
    await new Promise((r) => setTimeout(r, 3_000));
    const forThis = receiver.at('/hook').filter((d) => JSON.stringify(d.json).includes('wk-hooked'));
    expect(forThis).toHaveLength(1);
  }, 60_000);

  it('a chunked OCI upload whose every request reaches another worker completes', async () => {
    const repo = 'root/oci/workers/chunked';
    const data = pseudoRandom('workers-chunked', 3 * MiB + 123);
    const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
    const pids = new Set<number>();
    const tagged = async (n: string, path: string, method: string, headers: Record<string, string>, body?: Buffer) => {
      const res = await fresh(path, method, { authorization: AUTH, 'x-request-id': n, ...headers }, body);
      await until(() => pidOf(server, n) !== undefined, 5_000, () => `no log line for ${n}`);
      pids.add(pidOf(server, n)!);
      return res;
    };
    const open = await tagged('chunk-post', `/v2/${repo}/blobs/uploads/`, 'POST', {});
    expect(open.status).toBe(202);
    let location = open.headers.location as string;
    const cuts = [0, MiB, 2 * MiB, data.length];
    for (let i = 0; i + 1 < cuts.length; i++) {
      const part = data.subarray(cuts[i], cuts[i + 1]);
      const res = await tagged(`chunk-patch-${i}`, location, 'PATCH', { 'content-type': 'application/octet-stream', 'content-range': `${cuts[i]}-${cuts[i + 1]! - 1}` }, part);
      expect(res.status, res.body).toBe(202);
      expect(res.headers.range).toBe(`0-${cuts[i + 1]! - 1}`);
      location = res.headers.location as string;
    }
    const status = await tagged('chunk-status', location, 'GET', {});
    expect(status.status).toBe(204);
    expect(status.headers.range).toBe(`0-${data.length - 1}`);
    const put = await tagged('chunk-put', `${location}${location.includes('?') ? '&' : '?'}digest=${digest}`, 'PUT', {});
    expect(put.status, put.body).toBe(201);
    expect(pids.size).toBe(2);
    for (let i = 0; i < 2; i++) {
      const got = await fetch(`${server.url}/v2/${repo}/blobs/${digest}`, { headers: { authorization: AUTH } });
      expect(got.status).toBe(200);
      expect(createHash('sha256').update(Buffer.from(await got.arrayBuffer())).digest('hex')).toBe(digest.slice(7));
    }
  }, 60_000);

  it('crane pushes and pulls an image through both workers', async () => {
    const work = tempDir('velodex-workers-crane-');
    const image = buildImage({ seed: 'workers-crane', layers: 3, bigFileSize: 2 * MiB });
    const src = writeLayout(join(work, 'src'), [{ tag: 'v1', item: image }]);
    const env = { HOME: work, DOCKER_CONFIG: join(work, '.docker') };
    const host = `127.0.0.1:${server.port}`;
    await run(tool('crane'), ['auth', 'login', host, '-u', '__token__', '--password-stdin'], { env, input: TOKEN });
    await run(tool('crane'), ['push', '--insecure', src, `${host}/root/oci/workers/app:v1`], { env, timeoutMs: 120_000 });
    await run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `${host}/root/oci/workers/app:v1`, join(work, 'pulled')], { env, timeoutMs: 120_000 });
    expect(layoutMismatches(readLayout(join(work, 'pulled')), allBlobs(image))).toEqual([]);
  }, 180_000);

  it('passes the OCI conformance suite with its requests spread over both workers', async () => {
    await runV111(server.url, 'root/oci', TOKEN);
  }, 600_000);

  it('/+stats, /+status and /metrics count the whole server, whichever worker answers', async () => {
    const project = 'wk-counted';
    const p = await buildProject(project, '1.0');
    expect((await twine([p.wheel])).code).toBe(0);
    const statsOf = async () => {
      const res = await fresh(`/+stats?index=root/rel&project=${project}`);
      expect(res.status).toBe(200);
      return JSON.parse(res.body) as { totals: { pages: number; downloads: number; uploads: number }; files: Record<string, { downloads: number }> };
    };
    const before = await statsOf();
    const N = 10;
    for (let i = 0; i < N; i++) expect((await fresh(`/root/rel/simple/${project}/`)).status).toBe(200);
    const wheelSha = createHash('sha256').update(readFileSync(p.wheel)).digest('hex');
    for (let i = 0; i < N; i++) expect((await fresh(`/root/rel/files/${wheelSha}/${p.wheelFilename}`)).status).toBe(200);
    // Four reads, on fresh connections, so both workers answer: the same whole-server numbers.
    for (let i = 0; i < 4; i++) {
      const after = await statsOf();
      expect(after.totals.pages - before.totals.pages).toBe(N);
      expect(after.totals.downloads - before.totals.downloads).toBe(N);
      expect(after.files[p.wheelFilename]?.downloads).toBe(N);
      expect(after.totals.uploads).toBe(1);
    }
    const status = JSON.parse((await fresh('/+status')).body) as { workers: number; requests: { total: number } };
    expect(status.workers).toBe(2);
    const metricsRes = await fresh('/metrics');
    expect(metricsRes.status).toBe(200);
    const downloads = /^velodex_index_downloads_total\{index="root\/rel"[^}]*\} (\d+)$/m.exec(metricsRes.body);
    expect(Number(downloads?.[1])).toBeGreaterThanOrEqual(N);
    const requests = Number(/^velodex_requests_total (\d+)$/m.exec(metricsRes.body)?.[1]);
    expect(requests).toBeGreaterThanOrEqual(status.requests.total);
    const lint = await run(tool('promtool'), ['check', 'metrics'], { input: metricsRes.body, allowFailure: true });
    expect(lint.code, lint.stdout + lint.stderr).toBe(0);
  }, 120_000);

  it('a killed worker is replaced, and the other serves meanwhile', async () => {
    const [victim, survivor] = workerPids(server) as [number, number];
    process.kill(victim, 'SIGKILL');
    // Once the primary has seen the death (a connection handed over in the instant before is
    // lost: node:cluster's limit, docs/operations.md), every request until the replacement
    // listens goes to the live worker.
    await until(() => server.logs().includes('worker exited; restarting it'), 10_000, () => 'the primary did not see the worker die');
    for (let i = 0; i < 6; i++) expect((await fresh('/root/rel/simple/')).status).toBe(200);
    await until(() => server.logs().includes('worker restarted and listening'), 20_000, () => 'no replacement worker');
    const now = workerPids(server).filter((p) => p !== victim);
    expect(now).toContain(survivor);
    expect(now).toHaveLength(2);
    const list = await fresh('/root/rel/simple/', 'GET', { accept: 'application/vnd.pypi.simple.v1+json' });
    expect(list.status).toBe(200);
  }, 60_000);
});

describe('how many workers', () => {
  const checkConfig = (env: Record<string, string>, args: string[] = []) => {
    const file = join(tempDir('velodex-workers-config-'), 'v.toml');
    const { FILE_WORKERS: inFile, ...vars } = env;
    writeFileSync(file, `${inFile ? `workers = ${inFile}\n` : ''}[[index]]\nname = "h"\nroute = "root/h"\nhosted = true\n`);
    // Empty is unset: whatever the machine running the tests has set must not decide.
    return run(process.execPath, [CLI, 'check-config', file, ...args], { allowFailure: true, env: { KUBERNETES_SERVICE_HOST: '', VELODEX_WORKERS: '', ...vars } });
  };

  it('auto is one per core on a machine, and one in a Kubernetes pod', async () => {
    expect((await checkConfig({})).stdout).toContain(`workers: ${availableParallelism()} (auto: one per core)`);
    expect((await checkConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1' })).stdout).toContain('workers: 1 (auto: in a Kubernetes pod, replicas scale instead)');
  });

  it('the flag beats the environment, which beats the file', async () => {
    expect((await checkConfig({ FILE_WORKERS: '3' })).stdout).toContain('workers: 3 (set)');
    expect((await checkConfig({ FILE_WORKERS: '3', VELODEX_WORKERS: '2' })).stdout).toContain('workers: 2 (set)');
    expect((await checkConfig({ FILE_WORKERS: '3', VELODEX_WORKERS: '2' }, ['--workers', '4'])).stdout).toContain('workers: 4 (set)');
  });

  it('a count that is not one is refused with the fix', async () => {
    const env = await checkConfig({ VELODEX_WORKERS: 'many' });
    expect(env.code).toBe(78);
    expect(env.stderr).toContain('config: VELODEX_WORKERS: "many" is not a number of workers (fix: use auto or an integer from 1 to 64)');
    const flag = await checkConfig({}, ['--workers', '0']);
    expect(flag.code).toBe(78);
    expect(flag.stderr).toContain('--workers: "0" is not a number of workers');
    const file = await checkConfig({ FILE_WORKERS: '"lots"' });
    expect(file.code).toBe(78);
    expect(file.stderr).toContain('workers');
  });
});

describe('stopping', () => {
  it('SIGTERM lets a download in flight finish, then every process exits', async () => {
    const s = await startVelodex({ args: ['--workers', '2'] });
    const token = readFileSync(join(s.dataDir, 'upload-token'), 'utf8').trim();
    const repo = 'root/oci/stop/big';
    const data = pseudoRandom('workers-stop', 64 * MiB);
    const hex = createHash('sha256').update(data).digest('hex');
    const push = await fetch(`${s.url}/v2/${repo}/blobs/uploads/?digest=sha256:${hex}`, { method: 'POST', body: data, headers: { authorization: basicAuth(token), 'content-type': 'application/octet-stream' } });
    expect(push.status).toBe(201);
    const pids = workerPids(s);
    const res = await fetch(`${s.url}/v2/${repo}/blobs/sha256:${hex}`, { headers: { authorization: basicAuth(token) } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = await reader.read();
    process.kill(s.pid, 'SIGTERM');
    const hash = createHash('sha256').update(first.value!);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      hash.update(value);
    }
    expect(hash.digest('hex')).toBe(hex);
    await s.stop();
    expect(s.logs()).toContain('velodex stopped');
    for (const pid of [s.pid, ...pids]) expect(alive(pid)).toBe(false);
  }, 120_000);

  it('a worker that cannot listen stops the server with its reason', async () => {
    const first = await startVelodex();
    const res = await run(process.execPath, [CLI, 'serve', '--workers', '2', '--port', String(first.port), '--data-dir', tempDir()], { allowFailure: true, timeoutMs: 30_000 });
    await first.stop();
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`cannot listen on 127.0.0.1:${first.port}: another program uses that port`);
  }, 60_000);
});

