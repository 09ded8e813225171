/**
 * The cached role and the virtual blend against real upstreams, driven by real clients:
 * pypiserver (PEP 503 HTML, no sizes, no metadata siblings) behind a fault proxy, and a second
 * velodex (PEP 691 JSON with every field) as upstream. pip and uv install through the cached and
 * the virtual route, cold then warm with the upstream stopped; concurrent installs share one
 * upstream fetch per page and file; corrupted or cut transfers fail the client and cache nothing;
 * a private project in the hosted member shadows the public one.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cached, hosted, toml, virtual } from '../support/config.js';
import { storeProbe } from '../support/store-probe.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv, requestedPaths } from './fixtures/clients.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';

const TOKEN = 'cached-suite-token';
const JSON_ACCEPT = { accept: 'application/vnd.pypi.simple.v1+json' };

let pypi: PypiServer;
let proxy: FaultProxy;
let server: Velodex;
let alpha1: BuiltProject;
let alpha11: BuiltProject;
let beta: BuiltProject;
let gamma: BuiltProject;
let delta: BuiltProject;
let privateAlpha: BuiltProject;

const sha256File = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
/** Whether the server's store holds a blob (read the way the server reads it). */
const stored = async (digest: string) => (await storeProbe(server.dataDir)).has(digest);
/**
 * Waits until the server has stored a file a client just downloaded: the last byte reaches the
 * client as the digest is checked, and the file is published right after, so on a busy machine
 * the client can finish first.
 */
const storedSoon = (digest: string) => until(`sha256 ${digest} stored`, async () => ((await stored(digest)) ? true : undefined), { timeoutMs: 30_000 });

function config(upstream: string): string {
  return toml(
    hosted('hosted', { token: TOKEN }),
    cached('pypi', `${upstream}/simple/`),
    virtual('dev', ['hosted', 'pypi'], { uploadTarget: 'hosted' }),
    virtual('readonly', ['pypi']),
    cached('down', 'http://127.0.0.1:9/simple/'),
  );
}

function pipDownload(index: string, spec: string, allowFailure = false) {
  const dest = tempDir('velodex-dl-');
  return run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--only-binary', ':all:', '--index-url', index, '--dest', dest, spec], {
    env: CLEAN_ENV,
    allowFailure,
  });
}

beforeAll(async () => {
  [alpha1, alpha11, beta, gamma, delta, privateAlpha] = await Promise.all([
    buildProject('alpha', '1.0.0'),
    buildProject('alpha', '1.1.0'),
    buildProject('beta', '2.0.0'),
    buildProject('gamma', '1.0.0'),
    buildProject('delta', '3.0.0'),
    buildProject('alpha', '0.1.0', { variant: 'private' }),
  ]);
  const dir = tempDir('velodex-upstream-');
  for (const p of [alpha1, alpha11, beta, gamma, delta]) {
    copyFileSync(p.wheel, join(dir, p.wheelFilename));
    copyFileSync(p.sdist, join(dir, p.sdistFilename));
  }
  pypi = await startPypiserver(dir);
  proxy = await FaultProxy.start(pypi.url);
  server = await startVelodex({ config: config(proxy.url) });
}, 300_000);

afterAll(async () => {
  await server?.stop();
  await proxy?.close();
  await pypi?.stop();
});

describe('cached index pages', () => {
  it('serves the upstream page as our own, files content-addressed, metadata advertised for wheels', async () => {
    const res = await fetch(`${server.url}/root/pypi/simple/alpha/`, { headers: JSON_ACCEPT });
    expect(res.status).toBe(200);
    expect(res.headers.get('vary')).toBe('Accept');
    const doc = (await res.json()) as {
      meta: { 'api-version': string };
      versions: string[];
      files: { filename: string; url: string; hashes: Record<string, string>; 'core-metadata': unknown; 'requires-python': string | null }[];
    };
    expect(doc.meta['api-version']).toBe('1.4');
    expect(doc.versions).toEqual(['1.0.0', '1.1.0']);
    const wheel = doc.files.find((f) => f.filename === alpha11.wheelFilename)!;
    expect(wheel.hashes.sha256).toBe(sha256File(alpha11.wheel));
    expect(wheel.url).toBe(`../../files/${sha256File(alpha11.wheel)}/${alpha11.wheelFilename}`);
    expect(wheel['core-metadata']).toBe(true);
    expect(doc.files.find((f) => f.filename === alpha11.sdistFilename)!['core-metadata']).toBe(false);

    const html = await (await fetch(`${server.url}/root/pypi/simple/alpha/`)).text();
    expect(html).toContain(`href="../../files/${sha256File(alpha1.wheel)}/${alpha1.wheelFilename}#sha256=${sha256File(alpha1.wheel)}"`);
    expect(html).toContain('data-core-metadata="true"');

    const legacy = (await (await fetch(`${server.url}/root/pypi/alpha/json`)).json()) as { info: { version: string }; releases: Record<string, unknown[]> };
    expect(legacy.info.version).toBe('1.1.0');
    expect(Object.keys(legacy.releases)).toEqual(['1.0.0', '1.1.0']);
  });

  it('serves a fresh page without asking the upstream again', async () => {
    const before = proxy.count('/simple/alpha/');
    await fetch(`${server.url}/root/pypi/simple/alpha/`, { headers: JSON_ACCEPT });
    await fetch(`${server.url}/root/pypi/simple/alpha/`);
    expect(proxy.count('/simple/alpha/')).toBe(before);
  });

  it('answers 404 for a project the upstream does not have, and the project list from the upstream', async () => {
    expect((await fetch(`${server.url}/root/pypi/simple/no-such-project/`)).status).toBe(404);
    const list = (await (await fetch(`${server.url}/root/pypi/simple/`, { headers: JSON_ACCEPT })).json()) as { projects: { name: string }[] };
    expect(list.projects.map((p) => p.name)).toEqual(expect.arrayContaining(['alpha', 'beta', 'gamma', 'delta']));
  });

  it('answers 502 with a clear message when the upstream is down and nothing is cached', async () => {
    const res = await fetch(`${server.url}/root/down/simple/anything/`);
    expect(res.status).toBe(502);
    const body = (await res.json()) as { message: string };
    // The upstream as scheme and host, the path a fingerprint (a path may carry a token).
    expect(body.message).toMatch(/nothing is cached: upstream http:\/\/127\.0\.0\.1:9\/\.\.\.#[0-9a-f]{8}: connection failed/);
  });

  it('refuses writes: 405 on a cached route and on a virtual route without an upload target', async () => {
    for (const route of ['root/pypi', 'root/readonly']) {
      const res = await fetch(`${server.url}/${route}/`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`__token__:${TOKEN}`).toString('base64')}` } });
      expect(res.status).toBe(405);
      // The upload URL takes nothing else, and the index takes no writes: nothing is allowed.
      expect(res.headers.get('allow')).toBe('');
    }
  });
});

describe('installing through the cached index', () => {
  it('pip resolves from PEP 658 siblings without downloading a wheel', async () => {
    const mark = server.logs().length;
    const res = await run(tool('pip'), ['install', '--dry-run', '--quiet', '--report', '-', '--no-cache-dir', '--index-url', `${server.url}/root/pypi/simple/`, 'beta'], {
      env: CLEAN_ENV,
    });
    const report = JSON.parse(res.stdout) as { install: { metadata: { name: string; version: string } }[] };
    expect(report.install.map((i) => `${i.metadata.name}==${i.metadata.version}`).sort()).toEqual(['alpha==1.1.0', 'beta==2.0.0']);
    const paths = requestedPaths(server, mark);
    expect(paths.filter((p) => p.endsWith('.whl.metadata')).length).toBe(2);
    expect(paths.filter((p) => p.endsWith('.whl') || p.endsWith('.tar.gz'))).toEqual([]);
    // The sibling is the wheel's own METADATA.
    const meta = await (await fetch(`${server.url}/root/pypi/files/${sha256File(beta.wheel)}/${beta.wheelFilename}.metadata`)).text();
    expect(meta).toMatch(/^Metadata-Version: .*\nName: beta\nVersion: 2\.0\.0/m);
  });

  it('pip installs beta with alpha cold, and stores what it fetched', async () => {
    const venv = await freshPipVenv();
    const res = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${server.url}/root/pypi/simple/`, 'beta'], { env: CLEAN_ENV });
    expect(res.stdout).toMatch(/Successfully installed alpha-1\.1\.0 beta-2\.0\.0/);
    expect(await stored(sha256File(beta.wheel))).toBe(true);
    expect(await stored(sha256File(alpha11.wheel))).toBe(true);
  });

  it('uv pip installs through the cached index', async () => {
    const dir = join(tempDir('velodex-cuv-'), 'venv');
    await run(tool('uv'), ['venv', '--quiet', '--python', tool('python'), dir], { env: CLEAN_ENV });
    const res = await run(tool('uv'), ['pip', 'install', '--python', join(dir, 'bin', 'python'), '--index-url', `${server.url}/root/pypi/simple/`, 'beta'], {
      env: CLEAN_ENV,
    });
    expect(res.stderr).toContain('+ beta==2.0.0');
    expect(res.stderr).toContain('+ alpha==1.1.0');
  });

  it('serves a range of a stored file like a hosted one', async () => {
    const res = await fetch(`${server.url}/root/pypi/files/${sha256File(beta.wheel)}/${beta.wheelFilename}`, { headers: { range: 'bytes=0-3' } });
    expect(res.status).toBe(206);
    expect(Buffer.from(await res.arrayBuffer()).toString('latin1')).toBe('PK\u0003\u0004');
    expect((await fetch(`${server.url}/root/pypi/files/${'0'.repeat(64)}/${beta.wheelFilename}`)).status).toBe(404);
  });

  it('ten concurrent downloads of a cold project make one upstream fetch per page and per file', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, () => pipDownload(`${server.url}/root/pypi/simple/`, 'gamma')));
    for (const r of results) expect(r.stdout).toContain(gamma.wheelFilename);
    expect(proxy.count('/simple/gamma/')).toBe(1);
    // One whole-file GET (a range probe for the metadata sibling aside).
    const fileFetches = proxy.seen.filter((r) => r.path.endsWith(`/${gamma.wheelFilename}`) && r.range === undefined);
    expect(fileFetches).toHaveLength(1);
  });
});

describe('upstream faults', () => {
  it('corrupted bytes: pip fails, nothing is cached, the rejection is logged; the next clean request works', async () => {
    const digest = sha256File(delta.wheel);
    // Every fetch is corrupted (the metadata sibling, built from the wheel, fetches it too).
    proxy.on((p) => p.endsWith(`/${delta.wheelFilename}`), { kind: 'corrupt' });
    const bad = await pipDownload(`${server.url}/root/pypi/simple/`, 'delta', true);
    proxy.clear();
    expect(bad.code).not.toBe(0);
    expect(await stored(digest)).toBe(false);
    expect(server.logs()).toMatch(/"event":"rejected"/);
    const good = await pipDownload(`${server.url}/root/pypi/simple/`, 'delta');
    expect(good.stdout).toContain(delta.wheelFilename);
    await storedSoon(digest);
  });

  it('an upstream that dies mid-transfer fails the download cleanly; a retry works', async () => {
    const digest = sha256File(alpha1.wheel);
    proxy.on((p) => p.endsWith(`/${alpha1.wheelFilename}`), { kind: 'drop', afterBytes: 500 });
    const bad = await pipDownload(`${server.url}/root/pypi/simple/`, 'alpha==1.0.0', true);
    proxy.clear();
    expect(bad.code).not.toBe(0);
    expect(await stored(digest)).toBe(false);
    const good = await pipDownload(`${server.url}/root/pypi/simple/`, 'alpha==1.0.0');
    expect(good.stdout).toContain(alpha1.wheelFilename);
    await storedSoon(digest);
  });
});

describe('the virtual blend', () => {
  it('uploads through the virtual route land in the hosted member; the private project shadows the public one', async () => {
    await run(
      tool('twine'),
      ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/root/dev/`, '-u', '__token__', '-p', TOKEN, privateAlpha.wheel, privateAlpha.sdist],
      { env: CLEAN_ENV },
    );
    const hosted = (await (await fetch(`${server.url}/root/hosted/simple/alpha/`, { headers: JSON_ACCEPT })).json()) as { versions: string[] };
    expect(hosted.versions).toEqual(['0.1.0']);
    const virtual = (await (await fetch(`${server.url}/root/dev/simple/alpha/`, { headers: JSON_ACCEPT })).json()) as { versions: string[]; files: { filename: string }[] };
    expect(virtual.versions).toEqual(['0.1.0']);
    expect(virtual.files.map((f) => f.filename).sort()).toEqual([privateAlpha.sdistFilename, privateAlpha.wheelFilename].sort());
    // A public-only project comes through from the upstream member.
    const betaPage = (await (await fetch(`${server.url}/root/dev/simple/beta/`, { headers: JSON_ACCEPT })).json()) as { versions: string[] };
    expect(betaPage.versions).toEqual(['2.0.0']);
    const list = (await (await fetch(`${server.url}/root/dev/simple/`, { headers: JSON_ACCEPT })).json()) as { projects: { name: string }[] };
    expect(list.projects.map((p) => p.name)).toEqual(expect.arrayContaining(['alpha', 'beta', 'gamma']));
    // The public alpha wheel is not downloadable through the virtual route.
    expect((await fetch(`${server.url}/root/dev/files/${sha256File(alpha11.wheel)}/${alpha11.wheelFilename}`)).status).toBe(404);
    const legacy = (await (await fetch(`${server.url}/root/dev/alpha/json`)).json()) as { info: { version: string } };
    expect(legacy.info.version).toBe('0.1.0');
  });

  it('yank and delete of cached files through the virtual route are overrides on its pages', async () => {
    const auth = { authorization: `Basic ${Buffer.from(`__token__:${TOKEN}`).toString('base64')}` };
    const page = async () =>
      (await (await fetch(`${server.url}/root/dev/simple/gamma/`, { headers: JSON_ACCEPT })).json()) as { files: { filename: string; yanked: unknown }[] };
    expect((await fetch(`${server.url}/root/dev/gamma/1.0.0/yank`, { method: 'PUT', headers: auth })).status).toBe(200);
    expect((await page()).files.every((f) => f.yanked === true)).toBe(true);
    // The cached index itself is unchanged.
    const direct = (await (await fetch(`${server.url}/root/pypi/simple/gamma/`, { headers: JSON_ACCEPT })).json()) as { files: { yanked: unknown }[] };
    expect(direct.files.every((f) => f.yanked === false)).toBe(true);
    expect((await fetch(`${server.url}/root/dev/gamma/1.0.0/yank`, { method: 'DELETE', headers: auth })).status).toBe(200);
    expect((await page()).files.every((f) => f.yanked === false)).toBe(true);
    expect((await fetch(`${server.url}/root/dev/gamma/1.0.0/`, { method: 'DELETE', headers: auth })).status).toBe(200);
    // Hidden files are gone from the page (the project stays, with no files) and from downloads.
    expect((await page()).files).toEqual([]);
    expect((await fetch(`${server.url}/root/dev/files/${sha256File(gamma.wheel)}/${gamma.wheelFilename}`)).status).toBe(404);
    expect((await fetch(`${server.url}/root/dev/gamma/1.0.0/restore`, { method: 'PUT', headers: auth })).status).toBe(200);
    expect((await page()).files.map((f) => f.filename).sort()).toEqual([gamma.sdistFilename, gamma.wheelFilename].sort());
  });

  it('pip installs the private alpha through the virtual route although the public one is newer', async () => {
    const venv = await freshPipVenv();
    const res = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${server.url}/root/dev/simple/`, 'alpha'], { env: CLEAN_ENV });
    expect(res.stdout).toMatch(/Successfully installed alpha-0\.1\.0/);
    const out = await run(join(venv, 'bin', 'python'), ['-c', 'import alpha; print(alpha.VARIANT)']);
    expect(out.stdout.trim()).toBe('private');
  });

  it('uv pip installs beta through the virtual route: public beta, private alpha does not satisfy alpha>=1.0', async () => {
    const dir = join(tempDir('velodex-vuv-'), 'venv');
    await run(tool('uv'), ['venv', '--quiet', '--python', tool('python'), dir], { env: CLEAN_ENV });
    const res = await run(tool('uv'), ['pip', 'install', '--python', join(dir, 'bin', 'python'), '--index-url', `${server.url}/root/dev/simple/`, 'gamma'], {
      env: CLEAN_ENV,
    });
    expect(res.stderr).toContain('+ gamma==1.0.0');
    const fail = await run(tool('uv'), ['pip', 'install', '--python', join(dir, 'bin', 'python'), '--index-url', `${server.url}/root/dev/simple/`, 'beta'], {
      env: CLEAN_ENV,
      allowFailure: true,
    });
    // Shadowing is total: the public alpha 1.1.0 is invisible through this route.
    expect(fail.code).not.toBe(0);
  });
});

describe('with the upstream stopped', () => {
  it('warm installs still succeed through the cached and the virtual route (pip and uv)', async () => {
    await pypi.stop();
    const venv = await freshPipVenv();
    const res = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${server.url}/root/pypi/simple/`, 'beta'], { env: CLEAN_ENV });
    expect(res.stdout).toMatch(/Successfully installed alpha-1\.1\.0 beta-2\.0\.0/);
    const dir = join(tempDir('velodex-wuv-'), 'venv');
    await run(tool('uv'), ['venv', '--quiet', '--python', tool('python'), dir], { env: CLEAN_ENV });
    const uv = await run(tool('uv'), ['pip', 'install', '--python', join(dir, 'bin', 'python'), '--index-url', `${server.url}/root/dev/simple/`, 'gamma'], { env: CLEAN_ENV });
    expect(uv.stderr).toContain('+ gamma==1.0.0');
    // Nothing cached for this one: a clear 502.
    const miss = await fetch(`${server.url}/root/pypi/simple/never-seen/`);
    expect(miss.status).toBe(502);
  });
});

describe('a velodex hosted index as upstream (PEP 691 JSON with every field)', () => {
  let upstream: Velodex;
  let chained: Velodex;

  beforeAll(async () => {
    upstream = await startVelodex({ config: toml(hosted('hosted', { token: TOKEN })) });
    await run(
      tool('twine'),
      ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${upstream.url}/root/hosted/`, '-u', '__token__', '-p', TOKEN, alpha1.wheel, alpha11.wheel, alpha11.sdist, beta.wheel],
      { env: CLEAN_ENV },
    );
    const dataDir = tempDir();
    mkdirSync(dataDir, { recursive: true });
    chained = await startVelodex({
      dataDir,
      config: toml(cached('up', `${upstream.url}/root/hosted/simple/`, { upstreamConcurrency: 4 })),
    });
  }, 120_000);

  afterAll(async () => {
    await chained?.stop();
    await upstream?.stop();
  });

  it('preserves size, upload-time and the core-metadata hash, and pip installs from it', async () => {
    const up = (await (await fetch(`${upstream.url}/root/hosted/simple/alpha/`, { headers: JSON_ACCEPT })).json()) as {
      files: { filename: string; size: number; 'upload-time': string; 'core-metadata': { sha256: string } }[];
    };
    const ours = (await (await fetch(`${chained.url}/root/up/simple/alpha/`, { headers: JSON_ACCEPT })).json()) as typeof up;
    for (const f of up.files) {
      const mine = ours.files.find((g) => g.filename === f.filename)!;
      expect(mine.size).toBe(f.size);
      expect(mine['upload-time']).toBe(f['upload-time']);
      expect(mine['core-metadata']).toEqual(f['core-metadata']);
    }
    const venv = await freshPipVenv();
    const res = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${chained.url}/root/up/simple/`, 'beta'], { env: CLEAN_ENV });
    expect(res.stdout).toMatch(/Successfully installed alpha-1\.1\.0 beta-2\.0\.0/);
  });
});
