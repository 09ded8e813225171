/**
 * Ordered upstreams of a cached Python index, with real clients: two pypiserver upstreams, each
 * behind a fault proxy that counts what it is asked. pip and uv install while the first upstream
 * is killed, answers 429 (with Retry-After and Docker Hub's ratelimit figures), answers 503, and
 * hangs past its timeout: every install succeeds from the second, and the requests each upstream
 * saw are counted. A project only the second has is found with `failover_on_404` and not without;
 * a file whose page came from the first is fetched from the second when the first dies.
 * `/+status` and `/metrics` show each upstream's health and the pull-limit figures.
 *
 * Every scenario has an index of its own (the same two upstreams), so one scenario's backoff is
 * not the next one's.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { cachedFrom, toml, type UpstreamOptions } from '../support/config.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshUvVenv } from '../python/fixtures/clients.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';

const SCENARIOS = ['killed', 'limited', 'failing', 'hanging'] as const;

let first: PypiServer;
let second: PypiServer;
let p1: FaultProxy;
let p2: FaultProxy;
let server: Velodex;
const built = new Map<string, BuiltProject>();

const project = (name: string): BuiltProject => built.get(name)!;
const page = (name: string) => `/simple/${name}/`;
const file = (name: string) => `/packages/${project(name).wheelFilename}`;
/** Whole GETs of `path` (pip's metadata is read first by ranges of the same URL: not counted). */
const wholeGets = (proxy: FaultProxy, path: string) => proxy.seen.filter((r) => r.method === 'GET' && r.path === path && r.range === undefined).length;

beforeAll(async () => {
  const names = [...SCENARIOS.flatMap((s) => [`${s}-pip`, `${s}-uv`]), 'shared', 'moved', 'only-second'];
  for (const p of await Promise.all(names.map((n) => buildProject(n, '1.0.0')))) built.set(p.name, p);
  const dir1 = tempDir('velodex-up1-');
  const dir2 = tempDir('velodex-up2-');
  for (const name of names) {
    // The same wheel, byte for byte, on both; `only-second` on the second alone.
    if (name !== 'only-second') copyFileSync(project(name).wheel, join(dir1, project(name).wheelFilename));
    copyFileSync(project(name).wheel, join(dir2, project(name).wheelFilename));
  }
  [first, second] = await Promise.all([startPypiserver(dir1), startPypiserver(dir2)]);
  [p1, p2] = await Promise.all([FaultProxy.start(first.url), FaultProxy.start(second.url)]);
  const both = (o: Partial<UpstreamOptions> = {}): UpstreamOptions[] => [
    { url: `${p1.url}/simple/`, timeout: 2, ...o },
    { url: `${p2.url}/simple/` },
  ];
  server = await startVelodex({
    config: toml(
      ...SCENARIOS.map((s) => cachedFrom(s, both())),
      cachedFrom('files', both()),
      cachedFrom('fallthrough', both({ failoverOn404: true })),
      cachedFrom('strict', both()),
    ),
  });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await Promise.all([p1?.close(), p2?.close()]);
  await Promise.all([first?.stop(), second?.stop()]);
});

function pipDownload(index: string, spec: string, allowFailure = false) {
  return run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--index-url', `${server.url}/root/${index}/simple/`, '--dest', tempDir('velodex-dl-'), spec], {
    env: CLEAN_ENV,
    allowFailure,
  });
}

async function uvInstall(index: string, spec: string) {
  const venv = await freshUvVenv();
  return run(tool('uv'), ['pip', 'install', '--python', join(venv, 'bin', 'python'), '--index-url', `${server.url}/root/${index}/simple/`, spec], { env: CLEAN_ENV });
}

/** Installs `<scenario>-pip` with pip and `<scenario>-uv` with uv through the scenario's index. */
async function installBoth(scenario: string): Promise<void> {
  const pip = await pipDownload(scenario, `${scenario}-pip`);
  expect(pip.stdout).toContain(project(`${scenario}-pip`).wheelFilename);
  const uv = await uvInstall(scenario, `${scenario}-uv`);
  expect(uv.stderr).toContain(`+ ${scenario}-uv==1.0.0`);
}

/** What each upstream was asked for `name`: its page and its file. */
function asked(name: string) {
  return { first: [p1.count(page(name)), wholeGets(p1, file(name))], second: [p2.count(page(name)), wholeGets(p2, file(name))] };
}

interface StatusUpstream {
  url: string;
  state: string;
  online: boolean;
  retry_at: string | null;
  last_error: { kind: string } | null;
  rate_limited_total: number;
  rate_limit: { limit: number | null; remaining: number | null; window_secs: number | null } | null;
  username: { configured: boolean };
}

async function upstreamsOf(index: string): Promise<{ summary: string; upstreams: StatusUpstream[] }> {
  const doc = (await (await fetch(`${server.url}/+status`)).json()) as { indexes: Array<{ name: string; upstream: { summary: string }; upstreams: StatusUpstream[] }> };
  const entry = doc.indexes.find((ix) => ix.name === index)!;
  return { summary: entry.upstream.summary, upstreams: entry.upstreams };
}

describe('a cached Python index with two upstreams', () => {
  it('asks the first while it answers, and never the second', async () => {
    const res = await pipDownload('strict', 'shared');
    expect(res.stdout).toContain(project('shared').wheelFilename);
    expect(asked('shared')).toEqual({ first: [1, 1], second: [0, 0] });
    expect(await upstreamsOf('strict')).toMatchObject({ summary: '2/2 online', upstreams: [{ state: 'online' }, { state: 'online' }] });
  });

  it('installs from the second while the first is killed', async () => {
    await p1.kill();
    try {
      await installBoth('killed');
    } finally {
      await p1.revive();
    }
    // A dead upstream sees nothing; the second is asked once per page and file.
    expect(asked('killed-pip')).toEqual({ first: [0, 0], second: [1, 1] });
    expect(asked('killed-uv')).toEqual({ first: [0, 0], second: [1, 1] });
    const { summary, upstreams } = await upstreamsOf('killed');
    expect(summary).toBe('1/2 online');
    expect(upstreams[0]).toMatchObject({ url: displayUrl(`${p1.url}/simple/`), state: 'backing_off', online: false, last_error: { kind: 'connect' } });
    expect(upstreams[1]).toMatchObject({ state: 'online', online: true, last_error: null });
  });

  it('installs from the second while the first answers 429, and leaves the first alone for its Retry-After', async () => {
    const limited = (path: string) => path.includes('/limited-');
    p1.on(limited, { kind: 'status', status: 429, headers: { 'retry-after': '120', 'ratelimit-limit': '100;w=21600', 'ratelimit-remaining': '0;w=21600' } });
    try {
      await installBoth('limited');
    } finally {
      p1.clear();
    }
    // One 429 for pip's page; for its file and everything of uv's the first is not asked at all.
    expect(asked('limited-pip')).toEqual({ first: [1, 0], second: [1, 1] });
    expect(asked('limited-uv')).toEqual({ first: [0, 0], second: [1, 1] });
    const { summary, upstreams } = await upstreamsOf('limited');
    expect(summary).toBe('1/2 online');
    expect(upstreams[0]).toMatchObject({ state: 'rate_limited', online: false, rate_limited_total: 1, rate_limit: { limit: 100, remaining: 0, window_secs: 21600 } });
    // Retry-After: 120 s from the 429, not the 10 s of a failure's backoff.
    expect(Date.parse(upstreams[0]!.retry_at!) - Date.now()).toBeGreaterThan(60_000);
    expect(upstreams[1]).toMatchObject({ state: 'online', rate_limit: null });

    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    // The upstream label is the URL as every surface shows it (no credentials, no path).
    const labels = (url: string) => `{index="root/limited",ecosystem="python",role="cached",upstream="${displayUrl(url)}"}`;
    expect(metrics).toContain(`velodex_upstream_online${labels(`${p1.url}/simple/`)} 0`);
    expect(metrics).toContain(`velodex_upstream_online${labels(`${p2.url}/simple/`)} 1`);
    expect(metrics).toContain(`velodex_upstream_ratelimit_remaining${labels(`${p1.url}/simple/`)} 0`);
    expect(metrics).toContain(`velodex_upstream_ratelimit_limit${labels(`${p1.url}/simple/`)} 100`);
    expect(metrics).toContain(`velodex_upstream_ratelimit_window_seconds${labels(`${p1.url}/simple/`)} 21600`);
    expect(metrics).toContain(`velodex_upstream_rate_limited_total${labels(`${p1.url}/simple/`)} 1`);
  });

  it('installs from the second while the first answers 503', async () => {
    p1.on((path) => path.includes('/failing-'), { kind: 'status', status: 503 });
    try {
      await installBoth('failing');
    } finally {
      p1.clear();
    }
    expect(asked('failing-pip')).toEqual({ first: [1, 0], second: [1, 1] });
    // After the 503 the first backs off (10 s): uv's install, right after, goes to the second first.
    expect(asked('failing-uv').second).toEqual([1, 1]);
    expect(asked('failing-uv').first[1]).toBe(0);
    expect((await upstreamsOf('failing')).upstreams[0]).toMatchObject({ last_error: { kind: 'status' }, rate_limited_total: 0 });
  });

  it('installs from the second while the first hangs past its timeout', async () => {
    p1.on((path) => path.includes('/hanging-'), { kind: 'stall' });
    try {
      await installBoth('hanging');
    } finally {
      p1.clear();
      p1.release();
    }
    expect(asked('hanging-pip')).toEqual({ first: [1, 0], second: [1, 1] });
    expect(asked('hanging-uv').second).toEqual([1, 1]);
    expect((await upstreamsOf('hanging')).upstreams[0]).toMatchObject({ state: 'backing_off', last_error: { kind: 'timeout' } });
  });

  it('fetches a file from the second when the first, whose page is cached, dies', async () => {
    const before = asked('moved');
    // The page comes from the first and is stored (fresh for cache_ttl_secs)...
    const pageRes = await fetch(`${server.url}/root/files/simple/moved/`);
    expect(pageRes.status).toBe(200);
    await p1.kill();
    try {
      // ...so pip's page is served from the store, and the file, which the first cannot send, comes
      // from the second: its page lists the same filename with the same sha256.
      const res = await pipDownload('files', 'moved');
      expect(res.stdout).toContain(project('moved').wheelFilename);
    } finally {
      await p1.revive();
    }
    const after = asked('moved');
    expect([after.first[0]! - before.first[0]!, after.first[1]! - before.first[1]!]).toEqual([1, 0]);
    expect([after.second[0]! - before.second[0]!, after.second[1]! - before.second[1]!]).toEqual([1, 1]);
  });

  it('finds a project only the second has with failover_on_404, and not without', async () => {
    const found = await pipDownload('fallthrough', 'only-second');
    expect(found.stdout).toContain(project('only-second').wheelFilename);
    expect(asked('only-second')).toEqual({ first: [1, 0], second: [1, 1] });

    const refused = await pipDownload('strict', 'only-second', true);
    expect(refused.code).not.toBe(0);
    // The first's 404 is the answer: the second is not asked.
    expect(asked('only-second')).toEqual({ first: [2, 0], second: [1, 1] });
  });
});
