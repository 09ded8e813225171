/**
 * What a warm read costs the store, counted (never timed): velodex's app in process over the
 * run's backend, its stores wrapped by `countedStores`. A warm manifest GET (by tag or digest) and
 * a blob HEAD or GET make one round trip to the store (a small blob read before, only its hold). Two apps over one store stand for two processes:
 * a tag moved, or a manifest deleted (and pushed again) through one is what the other serves on its
 * next read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oci, toml } from '../support/config.js';
import { costOf, startCountedApp, stopCountedApp, type CountedApp } from '../support/counted-app.js';
import { basicAuth, tempDir } from '../support/velodex.js';
import { expectOciError, imageManifest, Registry } from './api-support.js';

const REPO = 'root/oci/warm';

/**
 * A hosted index, and a virtual one over it and a cached member whose upstream is never asked
 * (nothing listens there): the hosted member holds every name these tests read, and shadows it.
 */
const CONFIG = toml(
  oci.hosted('hosted', { route: 'root/oci', token: 'token' }),
  oci.cached('mirror', 'http://127.0.0.1:9', { route: 'mirror' }),
  oci.virtual('all', ['mirror', 'hosted'], { route: 'all' }),
);

interface Process extends CountedApp {
  reg: Registry;
}

async function startProcess(dataDir: string, name: string): Promise<Process> {
  const p = await startCountedApp(dataDir, name, CONFIG);
  return { ...p, reg: new Registry(p.url, basicAuth('token')) };
}

const stop = stopCountedApp;

/** Pushes an image (config, one layer, manifest) under `tag`; returns the manifest's digest. */
async function pushImage(reg: Registry, tag: string, seed: string): Promise<string> {
  const config = Buffer.from(`{"seed":"${seed}"}`);
  const layer = Buffer.from(`layer ${seed}`);
  const configHex = await reg.pushBlob(REPO, config);
  const layerHex = await reg.pushBlob(REPO, layer);
  const res = await reg.pushManifest(REPO, tag, imageManifest(configHex, config.length, [{ hex: layerHex, size: layer.length }]));
  expect(res.status, await res.text()).toBe(201);
  return res.headers.get('docker-content-digest') ?? '';
}

describe('warm OCI reads cost one store round trip', () => {
  let dataDir: string;
  let one: Process;
  let two: Process;

  beforeAll(async () => {
    dataDir = tempDir();
    one = await startProcess(dataDir, 'one');
    two = await startProcess(dataDir, 'two');
  });
  afterAll(async () => {
    await stop(one);
    await stop(two);
  });

  it('serves a warm manifest by tag and by digest in one round trip, and a blob HEAD and GET in one', async () => {
    const digest = await pushImage(one.reg, 'v1', 'a');
    const byTag = () => one.reg.fetch(`/v2/${REPO}/manifests/v1`);
    const byDigest = () => one.reg.fetch(`/v2/${REPO}/manifests/${digest}`);
    // Warm up: the first reads learn what a later one may start with.
    await costOf(one, byTag);
    await costOf(one, byDigest);

    const tagCost = await costOf(one, byTag);
    expect(tagCost.rounds, JSON.stringify(tagCost)).toBe(1);
    // The tag map and the index's hold on its bytes: the record is the one served last time (the
    // tag map still names it, tagged at the same time), the bytes come from memory.
    expect(tagCost.calls, JSON.stringify(tagCost)).toEqual({ 'meta.get': 2 });

    const digestCost = await costOf(one, byDigest);
    expect(digestCost.rounds, JSON.stringify(digestCost)).toBe(1);
    expect(digestCost.calls, JSON.stringify(digestCost)).toEqual({ 'meta.get': 2 });

    // Through the virtual index: the check that the hosted member holds the repository (so the
    // cached member is not asked) goes out with the hosted member's reads.
    const viaVirtual = () => one.reg.fetch(`/v2/all/warm/manifests/v1`);
    await costOf(one, viaVirtual);
    const virtualCost = await costOf(one, viaVirtual);
    expect(virtualCost.rounds, JSON.stringify(virtualCost)).toBe(1);
    expect(virtualCost.calls, JSON.stringify(virtualCost)).toEqual({ 'meta.get': 3 });

    const manifest = JSON.parse(await (await byDigest()).text()) as { layers: { digest: string }[] };
    const layer = manifest.layers[0]?.digest ?? '';
    const head = await costOf(one, () => one.reg.fetch(`/v2/${REPO}/blobs/${layer}`, { method: 'HEAD' }));
    expect(head.rounds, JSON.stringify(head)).toBe(1);
    expect(head.calls, JSON.stringify(head)).toEqual({ 'meta.get': 1, 'blobs.stat': 1 });
    // Its size now known (a digest's size never changes), a GET asks for the hold and the bytes at once.
    const get = await costOf(one, () => one.reg.fetch(`/v2/${REPO}/blobs/${layer}`));
    expect(get.rounds, JSON.stringify(get)).toBe(1);
    expect(get.calls, JSON.stringify(get)).toEqual({ 'meta.get': 1, 'blobs.get': 1 });
    // A small blob (a config, a signature) read once is served from memory: only its hold is read.
    const again = await costOf(one, () => one.reg.fetch(`/v2/${REPO}/blobs/${layer}`));
    expect(again.calls, JSON.stringify(again)).toEqual({ 'meta.get': 1 });
    const ranged = await costOf(one, () => one.reg.fetch(`/v2/${REPO}/blobs/${layer}`, { headers: { range: 'bytes=0-3' } }), 206);
    expect(ranged.rounds, JSON.stringify(ranged)).toBe(1);
  });

  it('serves a tag another process moved on the next read, and guesses right again on the read after', async () => {
    const first = await pushImage(one.reg, 'moving', 'b');
    // Process two learns where the tag points.
    for (let i = 0; i < 2; i++) {
      const res = await two.reg.fetch(`/v2/${REPO}/manifests/moving`);
      expect(res.headers.get('docker-content-digest')).toBe(first);
      await res.arrayBuffer();
    }
    const second = await pushImage(one.reg, 'moving', 'c');
    expect(second).not.toBe(first);
    two.counter.reset();
    const res = await two.reg.fetch(`/v2/${REPO}/manifests/moving`);
    expect(res.status).toBe(200);
    expect(res.headers.get('docker-content-digest')).toBe(second);
    await res.arrayBuffer();
    // What it remembered from the last read was wrong: one more round for the new target's record
    // and hold, and one for its bytes, which this process has not read yet.
    const moved = two.counter.snapshot();
    expect(moved.rounds, JSON.stringify(moved)).toBe(3);
    expect(moved.calls, JSON.stringify(moved)).toEqual({ 'meta.get': 4, 'blobs.get': 1 });
    const again = await costOf(two, () => two.reg.fetch(`/v2/${REPO}/manifests/moving`));
    expect(again.rounds).toBe(1);
  });

  it('serves the record of a manifest another process deleted and pushed again under the same tag, not the one it served before', async () => {
    // The same bytes pushed first as an image manifest, then as an image index: a body with no
    // "mediaType" of its own takes the request's Content-Type, which the record keeps.
    const config = Buffer.from('{"seed":"retyped"}');
    const configHex = await one.reg.pushBlob(REPO, config);
    const body = JSON.stringify({ schemaVersion: 2, config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${configHex}`, size: config.length }, layers: [], manifests: [] });
    const first = await one.reg.pushManifest(REPO, 'retyped', body, 'application/vnd.oci.image.manifest.v1+json');
    expect(first.status, await first.text()).toBe(201);
    const digest = first.headers.get('docker-content-digest') ?? '';
    for (let i = 0; i < 2; i++) {
      const res = await two.reg.fetch(`/v2/${REPO}/manifests/retyped`);
      expect(res.headers.get('content-type')).toBe('application/vnd.oci.image.manifest.v1+json');
      await res.arrayBuffer();
    }
    const del = await one.reg.fetch(`/v2/${REPO}/manifests/${digest}`, { method: 'DELETE' });
    expect(del.status, await del.text()).toBe(202);
    const again = await one.reg.pushManifest(REPO, 'retyped', body, 'application/vnd.oci.image.index.v1+json');
    expect(again.status, await again.text()).toBe(201);
    expect(again.headers.get('docker-content-digest')).toBe(digest);
    const res = await two.reg.fetch(`/v2/${REPO}/manifests/retyped`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/vnd.oci.image.index.v1+json');
    await res.arrayBuffer();
  });

  it('serves a tag another process created after this one answered it unknown', async () => {
    for (let i = 0; i < 2; i++) await expectOciError(await two.reg.fetch(`/v2/${REPO}/manifests/late`), 404, 'MANIFEST_UNKNOWN');
    const digest = await pushImage(one.reg, 'late', 'e');
    const res = await two.reg.fetch(`/v2/${REPO}/manifests/late`);
    expect(res.status).toBe(200);
    expect(res.headers.get('docker-content-digest')).toBe(digest);
    await res.arrayBuffer();
  });

  it('stops serving a manifest another process deleted, by tag and by digest', async () => {
    const digest = await pushImage(one.reg, 'doomed', 'd');
    for (const ref of ['doomed', digest]) {
      const res = await two.reg.fetch(`/v2/${REPO}/manifests/${ref}`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const del = await one.reg.fetch(`/v2/${REPO}/manifests/${digest}`, { method: 'DELETE' });
    expect(del.status, await del.text()).toBe(202);
    await expectOciError(await two.reg.fetch(`/v2/${REPO}/manifests/doomed`), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await two.reg.fetch(`/v2/${REPO}/manifests/${digest}`), 404, 'MANIFEST_UNKNOWN');
  });

  it('stops serving a blob another process deleted, and serves it again once pushed again', async () => {
    const bytes = Buffer.from('a blob that comes and goes');
    const hex = await one.reg.pushBlob(REPO, bytes);
    const blob = () => two.reg.fetch(`/v2/${REPO}/blobs/sha256:${hex}`);
    expect(await (await blob()).text()).toBe(bytes.toString());
    const del = await one.reg.fetch(`/v2/${REPO}/blobs/sha256:${hex}`, { method: 'DELETE' });
    expect(del.status, await del.text()).toBe(202);
    await expectOciError(await blob(), 404, 'BLOB_UNKNOWN');
    await one.reg.pushBlob(REPO, bytes);
    expect(await (await blob()).text()).toBe(bytes.toString());
  });
});

describe('with [storage] read_cache_ms, warm OCI reads cost no store round trip', () => {
  let dataDir: string;
  let cachedReads: Process;

  beforeAll(async () => {
    dataDir = tempDir();
    const p = await startCountedApp(dataDir, 'bounded', CONFIG, 60_000);
    cachedReads = { ...p, reg: new Registry(p.url, basicAuth('token')) };
  });
  afterAll(async () => {
    await stop(cachedReads);
  });

  it('serves a warm manifest by tag, through the virtual index, and a small blob from memory', async () => {
    const digest = await pushImage(cachedReads.reg, 'v1', 'bounded');
    const reads = [`/v2/${REPO}/manifests/v1`, `/v2/${REPO}/manifests/${digest}`, '/v2/all/warm/manifests/v1'];
    for (const path of reads) await costOf(cachedReads, () => cachedReads.reg.fetch(path));
    for (const path of reads) {
      const cost = await costOf(cachedReads, () => cachedReads.reg.fetch(path));
      expect(cost, `${path}: ${JSON.stringify(cost)}`).toEqual({ calls: {}, total: 0, rounds: 0 });
    }
    // A tag moved through this process is served at once.
    const moved = await pushImage(cachedReads.reg, 'v1', 'bounded-2');
    const res = await cachedReads.reg.fetch(`/v2/${REPO}/manifests/v1`);
    expect(res.headers.get('docker-content-digest')).toBe(moved);
    await res.arrayBuffer();
  });
});
