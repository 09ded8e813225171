/**
 * Search across every index and ecosystem, with real clients on a real server: twine uploads to a
 * hosted and a private index, pip through a cached index of a pypiserver upstream, crane pushes to
 * a hosted OCI index (with annotations set by `crane mutate`) and crane pulls through a cached OCI
 * index of another velodex. Searches find them by exact name, prefix, name words and summary, in
 * the documented JSON schema; before and after a yank and a delete; a private index only with its
 * token; a virtual index's policy hides a denied name through its route; a restart with another
 * policy (a second config on the same store) hides it everywhere. Every write is made through one
 * process and searched through another on the same store (fs: two worker processes; s3: two
 * servers on one bucket), polling no longer than the freshness bound allows.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3StorageToml, sharedMinio, testBackend } from '../support/backend.js';
import { cached, hosted, oci, search, toml, virtual } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject } from '../python/fixtures/projects.js';

const TOKEN = 'search-upload-token-7c1d2e';
const VAULT = 'search-vault-token-91ab3f';
/** `[search] refresh_secs` of these servers; a search on the other process must see a write within it (plus the reads). */
const REFRESH_SECS = 0.5;
/** The most a poll waits: the bound with room for a loaded machine (CI has two cores). */
const BOUND_MS = 15_000;

interface Result {
  ecosystem: string;
  index: string;
  route: string;
  from?: string;
  name: string;
  version?: string;
  yanked?: boolean;
  tags?: string[];
  title?: string;
  summary?: string;
  source?: string;
  keywords?: string[];
  requires_python?: string;
  match: 'exact' | 'prefix' | 'name' | 'text';
  score: number;
  browse: string;
}
interface Answer {
  query: string;
  complete: boolean;
  total: number;
  truncated: boolean;
  page: number;
  per_page: number;
  pages: number;
  results: Result[];
}

let upstream: PypiServer;
let upstreamOci: Velodex;
/** Writes go through `a`, searches through `b`: another process on the same store. */
let a: Velodex;
let b: Velodex;
let servers: Velodex[] = [];
let storage: string | undefined;
let work: string;
let craneEnv: Record<string, string>;

function config(extra: { denyOnHosted?: string[] } = {}): string {
  return toml(
    hosted('hosted', { token: TOKEN, volatile: true, ...(extra.denyOnHosted ? { policy: { denyProjects: extra.denyOnHosted } } : {}) }),
    hosted('vault', { token: VAULT, read: 'token' }),
    cached('pypi', `${upstream.url}/simple/`),
    virtual('dev', ['hosted', 'pypi'], { uploadTarget: 'hosted', policy: { denyProjects: ['evil-*'] } }),
    oci.hosted('images', { route: 'team/images', token: TOKEN }),
    oci.cached('hub', upstreamOci.url, { route: 'hub' }),
    search({ refreshSecs: REFRESH_SECS }),
  );
}

async function startPair(text: string): Promise<void> {
  if (testBackend() === 's3') {
    storage ??= s3StorageToml(sharedMinio());
    a = await startVelodex({ config: text, storage });
    b = await startVelodex({ config: text, storage });
    servers = [a, b];
  } else {
    // One data dir, two worker processes: each keeps its own search index.
    const dataDir = a?.dataDir;
    a = await startVelodex({ config: text, env: { VELODEX_WORKERS: '2' }, ...(dataDir ? { dataDir } : {}) });
    b = a;
    servers = [a];
  }
}

async function searchAt(server: Velodex, path: string, auth?: string): Promise<{ status: number; body: Answer & { error?: string; parameter?: string } }> {
  const res = await fetch(`${server.url}${path}`, auth ? { headers: { authorization: auth } } : {});
  return { status: res.status, body: (await res.json()) as Answer & { error?: string; parameter?: string } };
}

/** Polls `path` on `b` until `ok` holds of the answer (at most BOUND_MS); returns it and how long it took. */
async function until(path: string, ok: (a: Answer) => boolean, auth?: string): Promise<{ answer: Answer; ms: number }> {
  const started = Date.now();
  let last: Answer | undefined;
  while (Date.now() - started < BOUND_MS) {
    const { status, body } = await searchAt(b, path, auth);
    expect(status).toBe(200);
    last = body;
    if (body.complete && ok(body)) return { answer: body, ms: Date.now() - started };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no answer to ${path} within ${BOUND_MS} ms; last: ${JSON.stringify(last)}`);
}

const names = (answer: Answer) => answer.results.map((r) => `${r.index}:${r.name}`);
const matches = (answer: Answer) => answer.results.map((r) => `${r.name}:${r.match}`).join();

async function twine(index: string, token: string, files: string[]): Promise<void> {
  await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${a.url}/root/${index}/`, '-u', '__token__', '-p', token, ...files], { env: { NO_COLOR: '1' } });
}

async function crane(args: string[], input?: string): Promise<string> {
  return (await run(tool('crane'), args, { env: craneEnv, ...(input !== undefined ? { input } : {}) })).stdout;
}

beforeAll(async () => {
  const mirrored = await buildProject('search-mirror-lib', '3.0', { classifiers: ['Topic :: Software Development :: Libraries'] });
  const upstreamDir = tempDir('velodex-search-upstream-');
  copyFileSync(mirrored.wheel, join(upstreamDir, mirrored.wheelFilename));
  upstream = await startPypiserver(upstreamDir);
  upstreamOci = await startVelodex({ config: toml(oci.hosted('up', { route: 'up', token: TOKEN })) });
  await startPair(config());
  work = tempDir('velodex-search-crane-');
  craneEnv = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  for (const s of [upstreamOci, a]) await crane(['auth', 'login', `127.0.0.1:${s.port}`, '-u', '__token__', '--password-stdin'], TOKEN);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled([...servers.map((s) => s.stop()), upstreamOci?.stop(), upstream?.stop()]);
});

describe('search', () => {
  it('finds an uploaded project by exact name, prefix, name words and summary, through another process', async () => {
    const [one, two] = await Promise.all([buildProject('search-acme-widgets', '1.0', { classifiers: ['Framework :: Flask'] }), buildProject('search-acme-widgets', '2.0', { classifiers: ['Framework :: Flask'] })]);
    await twine('hosted', TOKEN, [one.wheel, one.sdist, two.wheel, two.sdist]);
    const { answer, ms } = await until('/+search?q=search-acme-widgets', (x) => x.results[0]?.version === '2.0');
    expect(ms).toBeLessThan(BOUND_MS);
    expect(answer).toMatchObject({ query: 'search-acme-widgets', complete: true, total: 1, truncated: false, page: 1, per_page: 20, pages: 1 });
    expect(answer.results[0]).toEqual({
      ecosystem: 'python',
      index: 'hosted',
      route: 'root/hosted',
      name: 'search-acme-widgets',
      version: '2.0',
      summary: 'velodex test project search-acme-widgets',
      requires_python: '>=3.8',
      match: 'exact',
      score: expect.any(Number),
      browse: '/browse?index=hosted&project=search-acme-widgets',
    });
    // PEP 503: any spelling of the name is the exact match.
    // The other process may answer the next request: every check below waits for it too.
    await until('/+search?q=Search_Acme.Widgets', (x) => x.results[0]?.match === 'exact');
    await until('/+search?q=search-acme', (x) => matches(x) === 'search-acme-widgets:prefix');
    await until('/+search?q=widgets', (x) => matches(x) === 'search-acme-widgets:name');
    // Words of the summary and the classifiers.
    await until('/+search?q=flask', (x) => matches(x) === 'search-acme-widgets:text');
    // Through a virtual route its members are searched, under the virtual's route.
    const dev = await until('/root/dev/+search?q=search-acme-widgets', (x) => x.total === 1);
    expect(dev.answer.results[0]).toMatchObject({ index: 'dev', route: 'root/dev', from: 'hosted', name: 'search-acme-widgets' });
  });

  it('follows a yank and a delete made through another process', async () => {
    const yank = await fetch(`${a.url}/root/hosted/search-acme-widgets/2.0/yank`, { method: 'PUT', headers: { authorization: basicAuth(TOKEN) } });
    expect(yank.status).toBe(200);
    await until('/+search?q=search-acme-widgets', (x) => x.results[0]?.version === '1.0');
    for (const version of ['1.0', '2.0']) {
      const del = await fetch(`${a.url}/root/hosted/search-acme-widgets/${version}/`, { method: 'DELETE', headers: { authorization: basicAuth(TOKEN) } });
      expect(del.status).toBe(200);
    }
    const { answer } = await until('/+search?q=search-acme-widgets', (x) => x.total === 0);
    expect(answer.results).toEqual([]);
  });

  it('finds a project pip fetched through a cached index, with its metadata once the wheel is stored', async () => {
    await run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--only-binary', ':all:', '--index-url', `${a.url}/root/pypi/simple/`, '--dest', tempDir('velodex-search-pip-'), 'search-mirror-lib']);
    const { answer } = await until('/+search?q=mirror', (x) => x.results[0]?.summary !== undefined);
    expect(answer.results[0]).toMatchObject({ ecosystem: 'python', index: 'pypi', route: 'root/pypi', name: 'search-mirror-lib', version: '3.0', summary: 'velodex test project search-mirror-lib', match: 'name', browse: '/browse?index=pypi&project=search-mirror-lib' });
    await until('/+search?q=libraries&ecosystem=python', (x) => names(x).join() === 'pypi:search-mirror-lib');
    expect((await searchAt(b, '/+search?q=libraries&ecosystem=oci')).body.total).toBe(0);
  });

  it('finds images pushed with crane (with their annotations) and pulled through a cached index', async () => {
    const pushed = writeLayout(join(work, 'webapp'), [{ tag: 'v1', item: buildImage({ seed: 'search-webapp', layers: 1, bigFileSize: 1024 }) }]);
    const ref = `127.0.0.1:${a.port}/team/images/team/search-webapp`;
    await crane(['push', '--insecure', pushed, `${ref}:v1`]);
    await crane(['mutate', '--insecure', `${ref}:v1`, '--annotation', 'org.opencontainers.image.description=The storefront web application', '--annotation', 'org.opencontainers.image.source=https://git.example/team/webapp', '-t', `${ref}:v2`]);
    const { answer } = await until('/+search?q=storefront', (x) => x.total === 1);
    expect(answer.results[0]).toMatchObject({
      ecosystem: 'oci',
      index: 'images',
      route: 'team/images',
      name: 'team/search-webapp',
      tags: ['v2', 'v1'],
      title: 'search-webapp',
      summary: 'The storefront web application',
      source: 'https://git.example/team/webapp',
      match: 'text',
      browse: '/browse?index=images&repo=team%2Fimages%2Fteam%2Fsearch-webapp',
    });
    await until('/+search?q=team/search-webapp', (x) => x.results[0]?.match === 'exact');
    await until('/team/images/+search?q=webapp', (x) => matches(x) === 'team/search-webapp:name');

    const base = writeLayout(join(work, 'base'), [{ tag: 'v1', item: buildImage({ seed: 'search-baseimage', layers: 1, bigFileSize: 1024 }) }]);
    await crane(['push', '--insecure', base, `127.0.0.1:${upstreamOci.port}/up/library/search-baseimage:v1`]);
    await crane(['pull', '--insecure', '--format', 'oci', `127.0.0.1:${a.port}/hub/up/library/search-baseimage:v1`, join(work, 'pulled')]);
    const pulled = await until('/+search?q=search-baseimage', (x) => x.total === 1);
    expect(pulled.answer.results[0]).toMatchObject({ ecosystem: 'oci', index: 'hub', route: 'hub', name: 'up/library/search-baseimage', tags: ['v1'], title: 'search-baseimage', match: 'name' });
  });

  it('searches a private index only for callers that may read it', async () => {
    const secret = await buildProject('search-vault-thing', '1.0');
    await twine('vault', VAULT, [secret.wheel]);
    const { answer } = await until('/+search?q=search-vault-thing', (x) => x.total === 1, basicAuth(VAULT));
    expect(answer.results[0]).toMatchObject({ index: 'vault', name: 'search-vault-thing' });
    // Every process has it by now (the same search, with the token, found it on both).
    await until('/root/vault/+search?q=search-vault-thing', (x) => x.total === 1, basicAuth(VAULT));
    await until('/+search?q=search-vault-thing', (x) => x.total === 1, basicAuth(VAULT));
    for (let i = 0; i < 4; i++) {
      expect((await searchAt(b, '/+search?q=search-vault-thing')).body.total).toBe(0);
      expect((await searchAt(b, '/+search?q=search-vault-thing', basicAuth('wrong-token'))).body.total).toBe(0);
      expect((await fetch(`${b.url}/root/vault/+search?q=search-vault-thing`)).status).toBe(401);
    }
  });

  it('answers bad input with 400 and what to send instead; /+api names the endpoint', async () => {
    for (const [path, parameter, message] of [
      ['/+search', 'q', /q is required/],
      ['/+search?q=%20%20', 'q', /q is required/],
      [`/+search?q=${'x'.repeat(201)}`, 'q', /at most 200/],
      ['/+search?q=ok&per_page=500', 'per_page', /at most 100/],
      ['/+search?q=ok&page=abc', 'page', /whole number/],
      ['/+search?q=ok&ecosystem=npm', 'ecosystem', /one of oci, python/],
    ] as const) {
      const { status, body } = await searchAt(b, path);
      expect(status, path).toBe(400);
      expect(body.parameter, path).toBe(parameter);
      expect(body.error, path).toMatch(message);
    }
    expect((await searchAt(b, '/+search?q=ok&index=nowhere')).status).toBe(400);
    const api = (await (await fetch(`${b.url}/+api`)).json()) as { urls: Record<string, string>; indexes: { name: string; urls: Record<string, string> }[] };
    expect(api.urls.search).toBe(`${b.url}/+search`);
    expect(api.indexes.find((ix) => ix.name === 'hosted')?.urls.search).toBe(`${b.url}/root/hosted/+search`);
  });

  it('never shows a name the index policy denies: through a virtual route, and after a restart with a new policy', async () => {
    const evil = await buildProject('evil-search-tool', '1.0');
    await twine('hosted', TOKEN, [evil.wheel]);
    await until('/+search?q=evil-search-tool', (x) => names(x).includes('hosted:evil-search-tool'));
    await until('/root/hosted/+search?q=evil-search-tool', (x) => x.total === 1);
    // The virtual index denies evil-*: its route never shows it, though its member does.
    for (let i = 0; i < 4; i++) expect((await searchAt(b, '/root/dev/+search?q=evil-search-tool')).body.total).toBe(0);
    // The same store, served again with a policy on the hosted index itself.
    await Promise.all(servers.map((s) => s.stop()));
    await startPair(config({ denyOnHosted: ['evil-*'] }));
    const after = await until('/+search?q=search', (x) => x.total > 0);
    expect(names(after.answer)).not.toContain('hosted:evil-search-tool');
    // Everything else was rebuilt from the store by the restarted processes.
    await until('/+search?q=mirror', (x) => names(x).join() === 'pypi:search-mirror-lib');
    await until('/+search?q=storefront', (x) => names(x).join() === 'images:team/search-webapp');
    for (let i = 0; i < 4; i++) expect((await searchAt(b, '/+search?q=evil-search-tool')).body.total).toBe(0);
  });
});
