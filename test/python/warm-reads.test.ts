/**
 * What a warm Simple page or download costs the store, counted (never timed): velodex's app in
 * process over the run's backend, its stores wrapped by `countedStores`, in front of a small real
 * upstream. A warm hosted page and a warm cached page each make one round trip to the store, a
 * warm download of a hosted file two (its record, then its bytes). Two apps over one store stand
 * for two processes: an override document written through one, where the other had read none, is
 * what the other serves on its next request.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreCalls } from '../../registry/src/storage/counted.js';
import { cached, hosted, toml, virtual } from '../support/config.js';
import { costOf, startCountedApp, stopCountedApp, type CountedApp } from '../support/counted-app.js';
import { Origin } from '../roles/origin.js';
import { tempDir } from '../support/velodex.js';
import { buildProject } from './fixtures/projects.js';
import { postUpload } from './fixtures/upload-client.js';
import { detail, write } from './mutations-client.js';
import { serverStores } from '../support/store-probe.js';

const sha256Of = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

const TOKEN = 'warm-token';
const SIMPLE_JSON = 'application/vnd.pypi.simple.v1+json';
const A_SHA = 'a'.repeat(64);
const B_SHA = 'b'.repeat(64);

type Process = CountedApp;

function configText(upstream: string): string {
  return toml(hosted('local', { token: TOKEN }), cached('mirror', `${upstream}/simple/`), virtual('dev', ['local', 'mirror'], { uploadTarget: 'local' }));
}

async function startProcess(dataDir: string, name: string, upstream: string): Promise<Process> {
  return startCountedApp(dataDir, name, configText(upstream));
}

const stop = stopCountedApp;

/** The store calls of one page request, after it has been answered 200. */
function pageCost(p: Process, path: string): Promise<StoreCalls> {
  return costOf(p, () => fetch(`${p.url}${path}`, { headers: { accept: SIMPLE_JSON } }));
}

/** A PEP 691 page of `project` with one wheel, with or without its size. */
function upstreamPage(origin: Origin, project: string, sha: string, size: number | null): string {
  const filename = `${project}-1.0-py3-none-any.whl`;
  return JSON.stringify({
    meta: { 'api-version': '1.0' },
    name: project,
    files: [{ filename, url: `${origin.url}/files/${filename}`, hashes: { sha256: sha }, ...(size === null ? {} : { size }) }],
  });
}

describe('what warm Simple pages and downloads cost the store', () => {
  let dataDir: string;
  let origin: Origin;
  let one: Process;
  let two: Process;

  beforeAll(async () => {
    origin = await new Origin().start();
    origin.docs.set('/simple/alpha/', { body: upstreamPage(origin, 'alpha', A_SHA, 1234), headers: { 'content-type': SIMPLE_JSON } });
    origin.docs.set('/simple/unsized/', { body: upstreamPage(origin, 'unsized', B_SHA, null), headers: { 'content-type': SIMPLE_JSON } });
    dataDir = tempDir();
    one = await startProcess(dataDir, 'one', origin.url);
    two = await startProcess(dataDir, 'two', origin.url);
  });
  afterAll(async () => {
    await stop(one);
    await stop(two);
    await origin.close();
  });

  it('serves a warm hosted page with one read of its record', async () => {
    const built = await buildProject('warmhosted', '1.0');
    const up = await postUpload({ url: `${one.url}/root/local/`, token: TOKEN, file: built.wheel });
    expect(up.status, up.body).toBe(200);
    await pageCost(one, '/root/local/simple/warmhosted/');
    const cost = await pageCost(one, '/root/local/simple/warmhosted/');
    expect(cost, JSON.stringify(cost)).toEqual({ calls: { 'meta.get': 1 }, total: 1, rounds: 1 });
  });

  it('serves a warm cached page in one round trip: the stored page and the overrides, read together', async () => {
    await pageCost(one, '/root/mirror/simple/alpha/');
    const cost = await pageCost(one, '/root/mirror/simple/alpha/');
    // The cache record of the upstream page and the (absent) overrides document; the page's bytes
    // and its parsed form are in memory under its digest.
    expect(cost, JSON.stringify(cost)).toEqual({ calls: { 'meta.get': 2 }, total: 2, rounds: 1 });
  });

  it('reads the learnt sizes of a page that gives none in the same round trip', async () => {
    await pageCost(one, '/root/mirror/simple/unsized/');
    const cost = await pageCost(one, '/root/mirror/simple/unsized/');
    expect(cost, JSON.stringify(cost)).toEqual({ calls: { 'meta.get': 3 }, total: 3, rounds: 1 });
  });

  it('serves a warm virtual page with its own overrides read alongside its members', async () => {
    await pageCost(one, '/root/dev/simple/unsized/');
    const cost = await pageCost(one, '/root/dev/simple/unsized/');
    // All in one round: the hosted member's record (absent), the route's overrides (absent), and
    // the cached member's page record, overrides and learnt sizes, read from the store before the
    // hosted member's answer says whether the cached one may answer at all.
    expect(cost, JSON.stringify(cost)).toEqual({ calls: { 'meta.get': 5 }, total: 5, rounds: 1 });
  });

  it('never asks the upstream for a name a hosted member holds, though the store reads start early', async () => {
    const built = await buildProject('warmprivate', '1.0');
    const up = await postUpload({ url: `${one.url}/root/local/`, token: TOKEN, file: built.wheel });
    expect(up.status, up.body).toBe(200);
    for (let i = 0; i < 2; i++) {
      const page = await detail(`${one.url}/root/dev/simple/`, 'warmprivate');
      expect(page.files.map((f) => f.filename)).toEqual([built.wheelFilename]);
    }
    expect(origin.seen.filter((r) => r.path.includes('warmprivate'))).toEqual([]);
    // The hosted record and the route's overrides, and the cached member's page record and
    // overrides, read early and dropped: one round trip.
    const cost = await pageCost(one, '/root/dev/simple/warmprivate/');
    expect(cost, JSON.stringify(cost)).toEqual({ calls: { 'meta.get': 4 }, total: 4, rounds: 1 });
  });

  it('downloads a warm hosted wheel with one read of its record and one of its bytes (the record gives the size); a HEAD asks the store instead of reading', async () => {
    const built = await buildProject('warmfile', '1.0');
    const up = await postUpload({ url: `${one.url}/root/local/`, token: TOKEN, file: built.wheel });
    expect(up.status, up.body).toBe(200);
    const url = `${one.url}/root/local/files/${sha256Of(built.wheel)}/${built.wheelFilename}`;
    await costOf(one, () => fetch(url));
    const get = await costOf(one, () => fetch(url));
    expect(get, JSON.stringify(get)).toEqual({ calls: { 'meta.get': 1, 'blobs.get': 1 }, total: 2, rounds: 2 });
    const head = await costOf(one, () => fetch(url, { method: 'HEAD' }));
    expect(head, JSON.stringify(head)).toEqual({ calls: { 'meta.get': 1, 'blobs.stat': 1 }, total: 2, rounds: 2 });
  });

  it('answers a listed wheel whose bytes are gone from the store with a 404 that no cache keeps, to GET and HEAD alike', async () => {
    const built = await buildProject('lostfile', '1.0');
    const up = await postUpload({ url: `${one.url}/root/local/`, token: TOKEN, file: built.wheel });
    expect(up.status, up.body).toBe(200);
    const sha = sha256Of(built.wheel);
    const url = `${one.url}/root/local/files/${sha}/${built.wheelFilename}`;
    expect((await fetch(url)).status).toBe(200);
    const stores = await serverStores(dataDir);
    expect(await stores.blobs.delete(sha)).toBe(true);
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(url, { method });
      const text = await res.text();
      expect(res.status, `${method}: ${text}`).toBe(404);
      if (method === 'GET') expect(text).toContain(`no file ${sha}/${built.wheelFilename} in index local`);
      expect(res.headers.get('cache-control') ?? '', method).not.toContain('immutable');
      expect(res.headers.get('etag'), method).toBeNull();
    }
  });

  it('sees overrides another process wrote where it had read none, on the next request', async () => {
    // Process one serves the page with no overrides document, twice (so any memory of it is warm).
    for (let i = 0; i < 2; i++) {
      const page = await detail(`${one.url}/root/dev/simple/`, 'alpha');
      expect(page.files.map((f) => f.yanked)).toEqual([false]);
    }
    const yank = await write('PUT', `${two.url}/root/dev/alpha/1.0/yank?reason=broken`, { token: TOKEN });
    expect(yank.status, yank.text).toBe(200);
    expect(yank.json, yank.text).toMatchObject({ changed: 1 });
    const page = await detail(`${one.url}/root/dev/simple/`, 'alpha');
    expect(page.files.map((f) => f.yanked)).toEqual(['broken']);
    // Overrides belong to the route they were written through: the cached index is untouched.
    const mirror = await detail(`${one.url}/root/mirror/simple/`, 'alpha');
    expect(mirror.files.map((f) => f.yanked)).toEqual([false]);
  });
});

describe('with [storage] read_cache_ms, warm Simple pages cost no store round trip', () => {
  let origin: Origin;
  let cachedReads: Process;

  beforeAll(async () => {
    origin = await new Origin().start();
    origin.docs.set('/simple/alpha/', { body: upstreamPage(origin, 'alpha', A_SHA, 1234), headers: { 'content-type': SIMPLE_JSON } });
    cachedReads = await startCountedApp(tempDir(), 'bounded', configText(origin.url), 60_000);
  });
  afterAll(async () => {
    await stop(cachedReads);
    await origin.close();
  });

  it('serves warm hosted, cached and virtual pages from memory, and its own upload at once', async () => {
    const built = await buildProject('warmbounded', '1.0');
    const up = await postUpload({ url: `${cachedReads.url}/root/local/`, token: TOKEN, file: built.wheel });
    expect(up.status, up.body).toBe(200);
    const pages = ['/root/local/simple/warmbounded/', '/root/mirror/simple/alpha/', '/root/dev/simple/alpha/'];
    for (const path of pages) await pageCost(cachedReads, path);
    for (const path of pages) {
      const cost = await pageCost(cachedReads, path);
      expect(cost, `${path}: ${JSON.stringify(cost)}`).toEqual({ calls: {}, total: 0, rounds: 0 });
    }
    const next = await buildProject('warmbounded', '2.0');
    const again = await postUpload({ url: `${cachedReads.url}/root/local/`, token: TOKEN, file: next.wheel });
    expect(again.status, again.body).toBe(200);
    const page = await detail(`${cachedReads.url}/root/local/simple/`, 'warmbounded');
    expect(page.files.map((f) => f.filename).sort()).toEqual([built.wheelFilename, next.wheelFilename].sort());
  });
});
