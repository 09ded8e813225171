/**
 * The cached role's less travelled paths, against pypiserver (PEP 503 HTML, no metadata siblings,
 * range support) behind fault proxies:
 *
 * - a wheel's PEP 658 sibling is built from its METADATA read by HTTP ranges, without the wheel
 *   being downloaded or stored;
 * - `upstream_concurrency = 1` with the one slot held by a stalled download: another request
 *   waits the 30 s window and gets 429 with `Retry-After`; the held download still completes;
 * - a zipped egg the upstream lists with a sha256 downloads byte-identically, without a sibling;
 * - inspecting a listed but not yet stored file fetches it once, stores it, then inspects it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRanged } from '../../registry/src/roles/upstream-range.js';
import { UpstreamError as RangeReadError } from '../../registry/src/roles/upstream-error.js';
import { UpstreamClient } from '../../registry/src/roles/upstream.js';
import { storeProbe } from '../support/store-probe.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const CLEAN_ENV = {
  PIP_CONFIG_FILE: '/dev/null',
  PIP_DISABLE_PIP_VERSION_CHECK: '1',
  PIP_NO_INPUT: '1',
  PYTHON_KEYRING_BACKEND: 'keyring.backends.null.Keyring',
};
const JSON_ACCEPT = { accept: 'application/vnd.pypi.simple.v1+json' };

const BIG = 'bigwheel-1.0.0-py3-none-any.whl';
const SMALL = 'smallwheel-1.0.0-py3-none-any.whl';
const SLOW_A = 'slowa-1.0.0-py3-none-any.whl';
const PLAIN = 'plainwheel-1.0.0-py3-none-any.whl';
const EGG = 'eggy-1.0-py3.11.egg';
const EGG2 = 'eggy-2.0-py3.11.egg';

/** Writes the artifacts with Python's zipfile: wheels (METADATA last, after any payload) and eggs. */
const MAKE_ARTIFACTS = `
import os, sys, zipfile
out = sys.argv[1]
def wheel(name, version, payload=b''):
    fn = os.path.join(out, f'{name}-{version}-py3-none-any.whl')
    di = f'{name}-{version}.dist-info'
    with zipfile.ZipFile(fn, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr(f'{name}/__init__.py', 'VALUE = 1\\n')
        if payload:
            z.writestr(zipfile.ZipInfo(f'{name}/data.bin'), payload, compress_type=zipfile.ZIP_STORED)
        z.writestr(f'{di}/METADATA', f'Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\nSummary: test wheel {name}\\n\\nA description.\\n')
        z.writestr(f'{di}/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')
        z.writestr(f'{di}/RECORD', '')
def egg(version):
    with zipfile.ZipFile(os.path.join(out, f'eggy-{version}-py3.11.egg'), 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('EGG-INFO/PKG-INFO', f'Metadata-Version: 1.1\\nName: eggy\\nVersion: {version}\\n')
        z.writestr('EGG-INFO/top_level.txt', 'eggy\\n')
        z.writestr('eggy/__init__.py', 'X = 1\\n')
wheel('bigwheel', '1.0.0', os.urandom(1536 * 1024))
wheel('smallwheel', '1.0.0')
wheel('slowa', '1.0.0', os.urandom(256 * 1024))
wheel('slowb', '1.0.0')
wheel('plainwheel', '1.0.0', os.urandom(512 * 1024))
egg('1.0')
egg('2.0')
`;

let dir: string;
let pypi: PypiServer;
let proxy: FaultProxy;
let slowProxy: FaultProxy;
let server: Velodex;

const bytesOf = (name: string) => readFileSync(join(dir, name));
const sha256Of = (name: string) => createHash('sha256').update(bytesOf(name)).digest('hex');
const stored = async (digest: string) => (await storeProbe(server.dataDir)).has(digest);
/** Stored within a few seconds (a streamed download ends just before its bytes are published). */
async function storedSoon(digest: string): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    if (await stored(digest)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
/** Upstream requests (through `p`) for the file `name`. */
const fileRequests = (p: FaultProxy, name: string) => p.seen.filter((r) => r.path.endsWith(`/${name}`));

beforeAll(async () => {
  dir = tempDir('velodex-extra-upstream-');
  await run(tool('python'), ['-c', MAKE_ARTIFACTS, dir]);
  pypi = await startPypiserver(dir);
  proxy = await FaultProxy.start(pypi.url);
  slowProxy = await FaultProxy.start(pypi.url);
  server = await startVelodex({
    config: `
[[index]]
name = "pypi"
route = "root/pypi"
cached = "${proxy.url}/simple/"

[[index]]
name = "noranges"
route = "root/noranges"
cached = "${proxy.url}/simple/"

[[index]]
name = "virt"
route = "root/virt"
members = ["pypi"]

[[index]]
name = "slow"
route = "root/slow"
cached = "${slowProxy.url}/simple/"
upstream_concurrency = 1
`,
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await proxy?.close();
  await slowProxy?.close();
  await pypi?.stop();
});

describe('PEP 658 sibling built by range requests', () => {
  it('pip resolves from the sibling; the upstream sees only small range requests and the wheel is not stored', async () => {
    const res = await run(
      tool('pip'),
      ['install', '--dry-run', '--quiet', '--report', '-', '--no-cache-dir', '--index-url', `${server.url}/root/pypi/simple/`, 'bigwheel'],
      { env: CLEAN_ENV },
    );
    const report = JSON.parse(res.stdout) as { install: { metadata: { name: string; version: string } }[] };
    expect(report.install.map((i) => `${i.metadata.name}==${i.metadata.version}`)).toEqual(['bigwheel==1.0.0']);

    const size = bytesOf(BIG).length;
    const seen = fileRequests(proxy, BIG);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    // No full GET: every request for the wheel asked for a range, and together only a small part.
    expect(seen.every((r) => r.range !== undefined)).toBe(true);
    const fetched = seen.reduce((sum, r) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(r.range ?? '');
      expect(m).not.toBeNull();
      return sum + Number(m![2]) - Number(m![1]) + 1;
    }, 0);
    expect(fetched).toBeLessThan(size / 4);
    // pypiserver has no siblings, and the page did not advertise one: none was asked for.
    expect(proxy.seen.some((r) => r.path.endsWith('.metadata'))).toBe(false);
    expect(await stored(sha256Of(BIG))).toBe(false);

    // The sibling is the wheel's METADATA, stored and served from the store from now on.
    const before = seen.length;
    const meta = await fetch(`${server.url}/root/pypi/files/${sha256Of(BIG)}/${BIG}.metadata`);
    expect(meta.status).toBe(200);
    expect(await meta.text()).toBe('Metadata-Version: 2.1\nName: bigwheel\nVersion: 1.0.0\nSummary: test wheel bigwheel\n\nA description.\n');
    expect(fileRequests(proxy, BIG)).toHaveLength(before);
  });

  it('falls back to the whole wheel (verified and stored) when the upstream does not answer a range with 206', async () => {
    // The range probe gets a plain 200: no range support, so the wheel is fetched whole.
    proxy.on((p) => p.endsWith(`/${PLAIN}`), { kind: 'status', status: 200, body: 'not a range' }, 1);
    const digest = sha256Of(PLAIN);
    const meta = await fetch(`${server.url}/root/noranges/files/${digest}/${PLAIN}.metadata`);
    expect(meta.status).toBe(200);
    expect(await meta.text()).toMatch(/^Metadata-Version: 2\.1\nName: plainwheel\nVersion: 1\.0\.0\n/);
    expect(fileRequests(proxy, PLAIN).map((r) => r.range)).toEqual(['bytes=0-0', undefined]);
    expect(await stored(digest)).toBe(true);
  });
});

describe('zipped eggs', () => {
  it('downloads an egg the upstream lists with a sha256, byte for byte; it has no metadata sibling', async () => {
    const digest = sha256Of(EGG);
    const page = (await (await fetch(`${server.url}/root/pypi/simple/eggy/`, { headers: JSON_ACCEPT })).json()) as {
      files: { filename: string; hashes: { sha256: string }; 'core-metadata': unknown }[];
    };
    const egg = page.files.find((f) => f.filename === EGG)!;
    expect(egg.hashes.sha256).toBe(digest);
    expect(egg['core-metadata']).toBe(false);
    const html = await (await fetch(`${server.url}/root/pypi/simple/eggy/`)).text();
    const link = html.split('\n').find((l) => l.includes(`>${EGG}<`))!;
    expect(link).toContain(`#sha256=${digest}`);
    expect(link).not.toContain('core-metadata');

    const res = await fetch(`${server.url}/root/pypi/files/${digest}/${EGG}`);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytesOf(EGG))).toBe(true);
    expect(await storedSoon(digest)).toBe(true);
    expect((await fetch(`${server.url}/root/pypi/files/${digest}/${EGG}.metadata`)).status).toBe(404);
  });
});

describe('inspecting listed files that are not stored yet', () => {
  it('a wheel on the cached route: fetched once (concurrent requests share it), stored, then listed and previewed', async () => {
    const digest = sha256Of(SMALL);
    expect(await stored(digest)).toBe(false);
    const url = `${server.url}/root/pypi/inspect/${digest}/${SMALL}`;
    const [a, b] = await Promise.all([fetch(url), fetch(url)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const listing = (await a.json()) as { sha256: string; format: string; members: { path: string }[] };
    await b.arrayBuffer();
    expect(listing.sha256).toBe(digest);
    expect(listing.members.map((m) => m.path)).toEqual(expect.arrayContaining(['smallwheel/__init__.py', 'smallwheel-1.0.0.dist-info/METADATA']));
    expect(await stored(digest)).toBe(true);
    expect(fileRequests(proxy, SMALL).map((r) => r.range)).toEqual([undefined]);

    const member = await fetch(`${url}/smallwheel-1.0.0.dist-info/METADATA`);
    expect(member.status).toBe(200);
    expect(await member.text()).toMatch(/^Metadata-Version: 2\.1\nName: smallwheel\n/);
    expect(fileRequests(proxy, SMALL)).toHaveLength(1);
  });

  it('a zipped egg through the virtual route', async () => {
    const digest = sha256Of(EGG2);
    expect(await stored(digest)).toBe(false);
    const res = await fetch(`${server.url}/root/virt/inspect/${digest}/${EGG2}`);
    expect(res.status).toBe(200);
    const listing = (await res.json()) as { format: string; members: { path: string }[] };
    expect(listing.format).toBe('zip');
    expect(listing.members.map((m) => m.path).sort()).toEqual(['EGG-INFO/PKG-INFO', 'EGG-INFO/top_level.txt', 'eggy/__init__.py']);
    expect(await stored(digest)).toBe(true);
    const info = await fetch(`${server.url}/root/virt/inspect/${digest}/${EGG2}/EGG-INFO/PKG-INFO`);
    expect(await info.text()).toBe('Metadata-Version: 1.1\nName: eggy\nVersion: 2.0\n');
    expect(fileRequests(proxy, EGG2)).toHaveLength(1);
  });

  it('a file the index does not list is 404, and nothing is fetched', async () => {
    const res = await fetch(`${server.url}/root/pypi/inspect/${'0'.repeat(64)}/${SMALL}`);
    expect(res.status).toBe(404);
    expect(fileRequests(proxy, SMALL)).toHaveLength(1);
  });
});

describe('upstream_concurrency', () => {
  it('with the only slot held by a stalled download, another upstream fetch waits 30 s and gets 429 with Retry-After', async () => {
    // Warm the page first, so the download needs one upstream fetch: the file.
    expect((await fetch(`${server.url}/root/slow/simple/slowa/`)).status).toBe(200);
    slowProxy.on((p) => p.endsWith(`/${SLOW_A}`), { kind: 'stall', afterBytes: 1000 });
    const held = await fetch(`${server.url}/root/slow/files/${sha256Of(SLOW_A)}/${SLOW_A}`);
    expect(held.status).toBe(200);
    const body = held.arrayBuffer();
    await slowProxy.stalled(1);

    // Another project's page needs the upstream too: no slot frees within the window.
    const denied = await fetch(`${server.url}/root/slow/simple/slowb/`);
    expect(denied.status).toBe(429);
    expect(Number(denied.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(denied.headers.get('content-type')).toMatch(/application\/json/);
    const error = (await denied.json()) as { statusCode: number; message: string };
    expect(error.statusCode).toBe(429);
    expect(error.message).toMatch(/upstream is busy.*retry in \d+ s/);
    expect(slowProxy.count('/simple/slowb/')).toBe(0);

    // The held download finishes once the upstream goes on, and the slot is free again.
    slowProxy.release();
    slowProxy.clear();
    expect(Buffer.from(await body).equals(bytesOf(SLOW_A))).toBe(true);
    expect((await fetch(`${server.url}/root/slow/simple/slowb/`)).status).toBe(200);
  }, 90_000);
});

describe('range reads (unit)', () => {
  const data = Buffer.from('0123456789abcdefghij');
  /** How the test origin answers a range request: properly, with another range, or ignoring it. */
  let mode: 'ok' | 'other-range' | 'ignore' = 'ok';
  let origin: http.Server;
  let client: UpstreamClient;

  beforeAll(async () => {
    origin = http.createServer((req, res) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!m || mode === 'ignore') return void res.writeHead(200, { 'content-length': data.length }).end(data);
      const [start, end] = mode === 'other-range' ? [0, 1] : [Number(m[1]), Number(m[2])];
      res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${data.length}`, 'content-length': end - start + 1 }).end(data.subarray(start, end + 1));
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    client = new UpstreamClient({ baseUrl: `http://127.0.0.1:${(origin.address() as AddressInfo).port}/` });
  });
  afterAll(async () => {
    client?.close();
    origin?.closeAllConnections();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
  });

  const read = async (stream: Readable) => Buffer.concat((await stream.toArray()) as Buffer[]).toString();

  it('reads exact ranges within the budget and refuses whole reads', async () => {
    mode = 'ok';
    const file = (await openRanged(client, 'f', { budget: 10 }))!;
    expect(file.size).toBe(20);
    expect(await read(await file.open({ start: 5, end: 9 }))).toBe('56789');
    await expect(file.open()).rejects.toBeInstanceOf(RangeReadError);
    await expect(file.open({ start: 0, end: 4 })).rejects.toThrow(/more than 10 bytes/);
    expect(await openRanged(client, 'f', { budget: 10, expectedSize: 21 })).toBeNull();
  });

  it('is null when the upstream ignores ranges, and fails a read answered with another range', async () => {
    mode = 'ignore';
    expect(await openRanged(client, 'f', { budget: 100 })).toBeNull();
    mode = 'ok';
    const file = (await openRanged(client, 'f', { budget: 100 }))!;
    mode = 'other-range';
    await expect(file.open({ start: 4, end: 8 })).rejects.toThrow(/not the range asked for/);
  });
});
