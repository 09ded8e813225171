/**
 * What a cached index knows about its files beyond the upstream page:
 *
 * - pypiserver (PEP 503 HTML, no sizes) behind a fault proxy: once a file is stored its size is
 *   in the PEP 691 and legacy JSON (the page cache re-renders), and `max-file-size` judges files
 *   the page gives no size for by their stored size or the upstream's Content-Length, with pip
 *   refused before any byte is downloaded or stored;
 * - a PEP 691 JSON upstream (test/roles/origin.ts) with `gpg-sig` and a `versions` list: the
 *   `.asc` is served through and cached, and legacy JSON lists every version the page lists.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeProbe } from '../support/store-probe.js';
import { generatedDigest, Origin } from '../roles/origin.js';
import { cached, toml } from '../support/config.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshUvVenv } from './fixtures/clients.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';

const JSON_ACCEPT = { accept: 'application/vnd.pypi.simple.v1+json' };
/** Below the size of every built file. */
const LIMIT = 100;

interface PageFile {
  filename: string;
  url: string;
  hashes: { sha256: string };
  size?: number;
  yanked: boolean | string;
  'gpg-sig'?: boolean;
}
interface Page {
  name: string;
  versions: string[];
  files: PageFile[];
}
interface LegacyFile {
  filename: string;
  size: number | null;
  has_sig: boolean;
}

let pypi: PypiServer;
let proxy: FaultProxy;
let origin: Origin;
let server: Velodex;
let alpha: BuiltProject;
let gamma: BuiltProject;
let delta: BuiltProject;

const sha256File = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const stored = async (digest: string) => (await storeProbe(server.dataDir)).has(digest);
const route = (index: string) => `${server.url}/root/${index}`;

async function page(index: string, project: string): Promise<Page> {
  const res = await fetch(`${route(index)}/simple/${project}/`, { headers: JSON_ACCEPT });
  expect(res.status).toBe(200);
  return (await res.json()) as Page;
}

async function legacy(index: string, project: string): Promise<Record<string, LegacyFile[]>> {
  const res = await fetch(`${route(index)}/${project}/json`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { releases: Record<string, LegacyFile[]> }).releases;
}

/** The page once `check` holds (a streamed download ends just before its bytes are stored). */
async function pageWhen(index: string, project: string, check: (p: Page) => boolean): Promise<Page> {
  let last = await page(index, project);
  for (let i = 0; i < 50 && !check(last); i++) {
    await new Promise((r) => setTimeout(r, 100));
    last = await page(index, project);
  }
  return last;
}

const ORIGIN_FILES = { '1.0': 'sigpkg-1.0-py3-none-any.whl', '1.1': 'sigpkg-1.1-py3-none-any.whl' } as const;
/** Served as a document: chunked, with no Content-Length. */
const CHUNKY = { filename: 'chunky-1.0-py3-none-any.whl', body: 'chunky bytes '.repeat(40) };
const CHUNKY_SHA = createHash('sha256').update(CHUNKY.body).digest('hex');
const SIGNATURE = '-----BEGIN PGP SIGNATURE-----\n\niQEzBAABCAAdFiEE\n=abcd\n-----END PGP SIGNATURE-----\n';

function originPage(): string {
  const file = (filename: string, extra: object) => {
    const size = origin.files.get(`/files/${filename}`)!;
    return { filename, url: `../../files/${filename}`, hashes: { sha256: generatedDigest(`/files/${filename}`, size) }, 'requires-python': null, size, ...extra };
  };
  return JSON.stringify({
    meta: { 'api-version': '1.4' },
    name: 'sigpkg',
    // 1.1 has only a yanked file; 2.0 has no file at all.
    versions: ['1.0', '1.1', '2.0'],
    files: [file(ORIGIN_FILES['1.0'], { 'gpg-sig': true, yanked: false }), file(ORIGIN_FILES['1.1'], { 'gpg-sig': false, yanked: 'broken' })],
  });
}

beforeAll(async () => {
  [alpha, gamma, delta] = await Promise.all([buildProject('alpha', '1.0'), buildProject('gamma', '1.0'), buildProject('delta', '1.0')]);
  const dir = tempDir('velodex-sizes-upstream-');
  for (const p of [alpha, gamma, delta]) {
    copyFileSync(p.wheel, join(dir, p.wheelFilename));
    copyFileSync(p.sdist, join(dir, p.sdistFilename));
    expect(Math.min(statSync(p.wheel).size, statSync(p.sdist).size)).toBeGreaterThan(LIMIT);
  }
  pypi = await startPypiserver(dir);
  proxy = await FaultProxy.start(pypi.url);
  origin = await new Origin().start();
  origin.files.set(`/files/${ORIGIN_FILES['1.0']}`, 2000);
  origin.files.set(`/files/${ORIGIN_FILES['1.1']}`, 2100);
  origin.docs.set(`/files/${ORIGIN_FILES['1.0']}.asc`, { body: SIGNATURE });
  origin.docs.set('/simple/sigpkg/', { body: originPage(), headers: { 'content-type': 'application/vnd.pypi.simple.v1+json' } });
  origin.docs.set(`/files/${CHUNKY.filename}`, { body: CHUNKY.body });
  origin.docs.set('/simple/chunky/', {
    body: JSON.stringify({
      meta: { 'api-version': '1.0' },
      name: 'chunky',
      files: [{ filename: CHUNKY.filename, url: `../../files/${CHUNKY.filename}`, hashes: { sha256: CHUNKY_SHA } }],
    }),
    headers: { 'content-type': 'application/vnd.pypi.simple.v1+json' },
  });
  server = await startVelodex({
    config: toml(
      cached('pypi', `${proxy.url}/simple/`),
      cached('small', `${proxy.url}/simple/`, { policy: { maxFileSize: LIMIT } }),
      cached('origin', `${origin.url}/simple/`),
      cached('originsmall', `${origin.url}/simple/`, { policy: { maxFileSize: LIMIT } }),
    ),
  });
}, 300_000);

afterAll(async () => {
  await server?.stop();
  await proxy?.close();
  await pypi?.stop();
  await origin?.close();
});

describe('sizes the upstream page does not give', () => {
  it('are in the PEP 691 and legacy JSON once the file is stored', async () => {
    const before = await page('pypi', 'alpha');
    const wheel = before.files.find((f) => f.filename === alpha.wheelFilename)!;
    expect(wheel).toBeDefined();
    expect(wheel.size).toBeUndefined();
    const etag = (await fetch(`${route('pypi')}/simple/alpha/`, { headers: JSON_ACCEPT })).headers.get('etag');

    const download = await fetch(new URL(wheel.url, `${route('pypi')}/simple/alpha/`));
    expect(download.status).toBe(200);
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes).toEqual(readFileSync(alpha.wheel));

    const after = await pageWhen('pypi', 'alpha', (p) => p.files.some((f) => f.filename === alpha.wheelFilename && f.size !== undefined));
    expect(after.files.find((f) => f.filename === alpha.wheelFilename)!.size).toBe(bytes.length);
    // The sdist is not stored: still no size.
    expect(after.files.find((f) => f.filename === alpha.sdistFilename)!.size).toBeUndefined();
    expect((await fetch(`${route('pypi')}/simple/alpha/`, { headers: JSON_ACCEPT })).headers.get('etag')).not.toBe(etag);
    const releases = await legacy('pypi', 'alpha');
    expect(releases['1.0']!.find((f) => f.filename === alpha.wheelFilename)!.size).toBe(bytes.length);
    expect(releases['1.0']!.find((f) => f.filename === alpha.sdistFilename)!.size).toBeNull();
  });

  it('let max-file-size judge a stored file by its stored size', async () => {
    const sha = sha256File(alpha.wheel);
    // Stored through the index without a limit.
    expect((await fetch(`${route('pypi')}/files/${sha}/${alpha.wheelFilename}`)).status).toBe(200);
    expect((await pageWhen('pypi', 'alpha', (p) => p.files.every((f) => f.filename !== alpha.wheelFilename || f.size !== undefined))).files).toBeDefined();
    expect(await stored(sha)).toBe(true);

    const denied = await fetch(`${route('small')}/files/${sha}/${alpha.wheelFilename}`);
    expect(denied.status).toBe(403);
    expect(await denied.json()).toEqual({
      action: 'serve',
      project: 'alpha',
      filename: alpha.wheelFilename,
      version: '1.0',
      rule: 'max-file-size',
      field: 'size',
      reason: `${alpha.wheelFilename} is larger than the max-file-size of ${LIMIT} bytes allowed on this index`,
    });
    // Now known to be too large, the file leaves the page; the sdist (size unknown) stays.
    expect((await page('small', 'alpha')).files.map((f) => f.filename)).toEqual([alpha.sdistFilename]);
    expect((await legacy('small', 'alpha'))['1.0']!.map((f) => f.filename)).toEqual([alpha.sdistFilename]);
  });

  it('refuse pip a file whose upstream length is over max-file-size, before it is downloaded or stored', async () => {
    const sha = sha256File(gamma.wheel);
    const target = tempDir('velodex-sizes-pip-');
    const pip = await run(
      tool('pip'),
      ['install', '--no-cache-dir', '--no-deps', '--only-binary', ':all:', '--target', target, '--index-url', `${route('small')}/simple/`, 'gamma'],
      { env: CLEAN_ENV, allowFailure: true },
    );
    expect(pip.code).not.toBe(0);
    const output = pip.stdout + pip.stderr;
    expect(output).toMatch(/403/);
    expect(output).toContain(`${gamma.wheelFilename} is larger than the max-file-size of ${LIMIT} bytes allowed on this index`);
    expect(await stored(sha)).toBe(false);
    // The announced length stands for the size: the page no longer offers the wheel.
    expect((await page('small', 'gamma')).files.map((f) => f.filename)).toEqual([gamma.sdistFilename]);
    const head = await fetch(`${route('small')}/files/${sha}/${gamma.wheelFilename}`, { method: 'HEAD' });
    expect(head.status).toBe(403);
    expect(await stored(sha)).toBe(false);
  });

  it('refuse uv the same way', async () => {
    const venv = await freshUvVenv();
    const uv = await run(
      tool('uv'),
      ['pip', 'install', '--python', join(venv, 'bin', 'python'), '--no-deps', '--only-binary', ':all:', '--index-url', `${route('small')}/simple/`, 'delta'],
      { env: CLEAN_ENV, allowFailure: true },
    );
    expect(uv.code).not.toBe(0);
    expect(uv.stdout + uv.stderr).toMatch(/403/);
    expect(await stored(sha256File(delta.wheel))).toBe(false);
  });
});

describe('a file of unknown size whose upstream announces no length', () => {
  it('is cut at max-file-size, then refused by its stored size', async () => {
    expect((await fetch(`${origin.url}/files/${CHUNKY.filename}`)).headers.get('content-length')).toBeNull();
    const url = `${route('originsmall')}/files/${CHUNKY_SHA}/${CHUNKY.filename}`;
    // The client never gets the whole file: the connection is cut (here before the first byte:
    // the upstream's one chunk is already past the limit).
    const got = await fetch(url).then(
      async (res) => (res.status === 200 ? (await res.arrayBuffer()).byteLength : -res.status),
      () => -1,
    );
    expect(got).toBeLessThan(CHUNKY.body.length);
    // The shared fetch went on and stored it; now its size is known and decides.
    const after = await pageWhen('originsmall', 'chunky', (p) => p.files.length === 0);
    expect(after.files).toEqual([]);
    const denied = await fetch(url);
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ rule: 'max-file-size', filename: CHUNKY.filename });
  });
});

describe('a PEP 691 JSON upstream', () => {
  it('legacy JSON lists every version the Simple page lists', async () => {
    const simple = await page('origin', 'sigpkg');
    expect(simple.versions).toEqual(['1.0', '1.1', '2.0']);
    const releases = await legacy('origin', 'sigpkg');
    expect(Object.keys(releases)).toEqual(simple.versions);
    expect(releases['1.1']!.map((f) => f.filename)).toEqual([ORIGIN_FILES['1.1']]);
    expect(releases['2.0']).toEqual([]);
    // The release document of a version without files exists too, empty, by any spelling.
    for (const spelling of ['2.0', '2.0.0']) {
      const res = await fetch(`${route('origin')}/sigpkg/${spelling}/json`);
      expect(res.status, spelling).toBe(200);
      const doc = (await res.json()) as { info: { version: string }; releases: Record<string, unknown[]>; urls: unknown[] };
      expect(doc.info.version).toBe('2.0');
      expect(doc.releases).toEqual({ '2.0': [] });
      expect(doc.urls).toEqual([]);
    }
    expect((await fetch(`${route('origin')}/sigpkg/3.0/json`)).status).toBe(404);
  });

  it('serves the detached signature its page announces, cached after the first fetch', async () => {
    const simple = await page('origin', 'sigpkg');
    const signed = simple.files.find((f) => f.filename === ORIGIN_FILES['1.0'])!;
    const unsigned = simple.files.find((f) => f.filename === ORIGIN_FILES['1.1'])!;
    expect(signed['gpg-sig']).toBe(true);
    expect(unsigned['gpg-sig']).toBe(false);
    expect((await legacy('origin', 'sigpkg'))['1.0']![0]!.has_sig).toBe(true);

    const ascUrl = `${new URL(signed.url, `${route('origin')}/simple/sigpkg/`).href}.asc`;
    for (let i = 0; i < 2; i++) {
      const res = await fetch(ascUrl);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/pgp-signature');
      expect(await res.text()).toBe(SIGNATURE);
    }
    expect(origin.seen.filter((r) => r.path.endsWith('.asc'))).toHaveLength(1);
    // No signature announced: none served (and the upstream is not asked).
    expect((await fetch(`${new URL(unsigned.url, `${route('origin')}/simple/sigpkg/`).href}.asc`)).status).toBe(404);
    expect(origin.seen.filter((r) => r.path.endsWith('.asc'))).toHaveLength(1);
  });
});
