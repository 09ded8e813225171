/**
 * Cache budgets with real clients, on the run's backend (VELODEX_TEST_STORAGE), one server: a
 * cached Python index of pypiserver and a cached OCI index of the distribution registry (behind a
 * counting proxy), each with a `max_bytes` smaller than what pip and crane pull through it, and
 * eviction every 2 s. Every pull succeeds; after an eviction pass the files and blobs the index
 * still holds fit the budget (pages, manifests and metadata, never evicted, come on top); the
 * least recently downloaded went first; an evicted file is fetched from the upstream again on its
 * next request (the upstream's own log shows the second fetch), one still held is not.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { cached, gc, oci, toml } from '../support/config.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { buildImage, writeLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run, type RunResult } from '../support/run.js';
import { storeProbe, type StoreProbe } from '../support/store-probe.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

/** Each test wheel carries this much data (pages and metadata are well under 1 KiB each). */
const PAYLOAD = 64 * 1024;
/** Room for two of the test's wheels with the pages and metadata of all six, not for three wheels. */
const PY_BUDGET = 160 * 1024;
/** Room for one of the test's images (a 1.5 MiB layer each), not three. */
const OCI_BUDGET = 2 * 1024 * 1024;
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

let work: string;
let pypi: PypiServer;
let registry: Distribution;
let proxy: FaultProxy;
let server: Velodex;
let probe: StoreProbe;
let env: Record<string, string>;
const projects: BuiltProject[] = [];
const images: Image[] = [];

interface Stored {
  bytes: number;
  objects: number;
}

beforeAll(async () => {
  work = tempDir('velodex-budget-');
  env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  const packages = join(work, 'packages');
  mkdirSync(packages);
  for (let i = 1; i <= 6; i++) {
    const p = await buildProject(`budget-lib${i}`, '1.0', { payloadBytes: PAYLOAD });
    copyFileSync(p.wheel, join(packages, p.wheelFilename));
    projects.push(p);
  }
  pypi = await startPypiserver(packages);
  registry = await startDistribution(work, null);
  proxy = await FaultProxy.start(registry.url);
  for (let i = 0; i < 3; i++) {
    const image = buildImage({ seed: `budget-${i}`, layers: 2 });
    await run(tool('crane'), ['push', writeLayout(join(work, `seed-${i}`), [{ tag: 'v1', item: image }]), `${registry.host}/budget/app${i}:v1`, '--insecure'], { env });
    images.push(image);
  }
  server = await startVelodex({
    config: toml(
      cached('pypi', `${pypi.url}/simple/`, { maxBytes: PY_BUDGET }),
      oci.cached('hub', proxy.url, { route: 'hub', maxBytes: '2MiB' }),
      gc({ enabled: false, evictEvery: '2s' }),
    ),
  });
  probe = await storeProbe(server.dataDir);
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await proxy?.close();
  await registry?.stop();
  await pypi?.stop();
});

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function pipDownload(p: BuiltProject): Promise<RunResult> {
  const dest = tempDir('velodex-budget-dl-');
  return run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '-d', dest, '--index-url', `${server.url}/root/pypi/simple/`, `${p.name}==${p.version}`], { env: CLEAN_ENV });
}

async function stored(name: string): Promise<Stored> {
  const doc = (await (await fetch(`${server.url}/+status`)).json()) as { indexes: Array<{ name: string; stored: Stored }> };
  return doc.indexes.find((ix) => ix.name === name)!.stored;
}

/** Whether `holder` still holds the digest (its holds document in the store). */
async function holds(hex: string, holder: string): Promise<boolean> {
  const doc = await probe.doc<{ holders: string[] }>(`holds/${hex.slice(0, 2)}/${hex}`);
  return doc?.holders.includes(holder) ?? false;
}

/** Polls `check` until it holds: eviction passes run every 2 s, slower on a loaded machine. */
async function eventually(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 60; i++) {
    if (await check()) return;
    await wait(1000);
  }
  throw new Error(`never happened: ${what}`);
}

async function evicted(route: string): Promise<number> {
  const stats = (await (await fetch(`${server.url}/+stats`)).json()) as { indexes: Record<string, { counters: { evicted: number } }> };
  return stats.indexes[route]!.counters.evicted;
}

describe('a cached Python index with a budget', () => {
  const wheelPath = (p: BuiltProject) => `/packages/${p.wheelFilename}`;

  it('keeps serving pip while it evicts the least recently downloaded wheels down to the budget', async () => {
    for (const p of projects) await pipDownload(p);
    const wheels = projects.map((p) => ({ p, hex: sha(readFileSync(p.wheel)), size: readFileSync(p.wheel).length }));
    const heldWheels = async () => {
      const out = [];
      for (const w of wheels) if (await holds(w.hex, 'python.pypi')) out.push(w);
      return out;
    };
    await eventually('the wheels held fit the budget', async () => (await heldWheels()).reduce((a, w) => a + w.size, 0) <= PY_BUDGET);
    const held = await heldWheels();
    expect(held.reduce((a, w) => a + w.size, 0), 'wheels still held').toBeLessThanOrEqual(PY_BUDGET);
    // The most recently downloaded stays; the oldest went.
    expect(held.map((w) => w.p.name)).toContain(projects.at(-1)!.name);
    expect(held.map((w) => w.p.name)).not.toContain(projects[0]!.name);
    expect(await evicted('root/pypi')).toBeGreaterThanOrEqual(4);
    // Bytes no index holds any more are gone from the store.
    expect(await probe.has(wheels[0]!.hex)).toBe(false);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/velodex_index_evicted_total\{index="root\/pypi"[^}]*\} [1-9]/);
  }, 180_000);

  it('fetches an evicted wheel from the upstream again on its next download, and not one it still holds', async () => {
    const first = projects[0]!;
    const last = projects.at(-1)!;
    // (A first download asks pypiserver twice: a range read of the wheel's tail for its metadata, then the wheel.)
    const firstBefore = pypi.count(wheelPath(first));
    const lastBefore = pypi.count(wheelPath(last));
    expect(firstBefore).toBeGreaterThanOrEqual(1);
    await pipDownload(first);
    expect(pypi.count(wheelPath(first)), "pypiserver's log: the evicted wheel fetched again").toBeGreaterThan(firstBefore);
    await pipDownload(last);
    expect(pypi.count(wheelPath(last)), 'a held wheel is served from the store').toBe(lastBefore);
    expect(await probe.has(sha(readFileSync(first.wheel)))).toBe(true);
  }, 120_000);
});

describe('a cached OCI index with a budget', () => {
  const ref = (i: number) => `127.0.0.1:${server.port}/hub/budget/app${i}:v1`;
  const big = (i: number) => images[i]!.layers.at(-1)!.descriptor.digest;
  const blobPath = (i: number) => `/v2/budget/app${i}/blobs/${big(i)}`;

  it('keeps serving crane while it evicts the least recently pulled blobs down to the budget', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await run(tool('crane'), ['pull', '--format', 'oci', ref(i), join(work, `pulled-${i}`), '--insecure'], { env });
      expect(res.code).toBe(0);
    }
    const heldBytes = async () => {
      let bytes = 0;
      for (const image of images) {
        for (const blob of [image.config, ...image.layers]) {
          if (await holds(blob.descriptor.digest.replace('sha256:', ''), 'oci.hub')) bytes += blob.bytes.length;
        }
      }
      return bytes;
    };
    await eventually('the blobs held fit the budget', async () => (await heldBytes()) <= OCI_BUDGET);
    expect(await holds(big(2).replace('sha256:', ''), 'oci.hub'), 'the last pulled stays').toBe(true);
    expect(await holds(big(0).replace('sha256:', ''), 'oci.hub'), 'the first pulled went').toBe(false);
    expect(await evicted('hub')).toBeGreaterThanOrEqual(1);
    // Manifests are never evicted: they come on top of the budget (the figure follows within a flush).
    await eventually('the figure follows the evictions', async () => (await stored('hub')).bytes <= OCI_BUDGET + 3 * 4096);
  }, 180_000);

  it('pulls an evicted image whole again, its big layer fetched from the upstream a second time', async () => {
    expect(proxy.count(blobPath(0))).toBe(1);
    const res = await run(tool('crane'), ['pull', '--format', 'oci', ref(0), join(work, 'pulled-again'), '--insecure'], { env });
    expect(res.code).toBe(0);
    expect(proxy.count(blobPath(0)), 'the proxy saw the evicted layer fetched again').toBe(2);
    // Stored again (the store's write may finish just after the client has its bytes).
    await expect.poll(() => probe.has(big(0).replace('sha256:', '')), { timeout: 10_000 }).toBe(true);
  }, 120_000);
});
