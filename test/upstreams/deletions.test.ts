/**
 * `upstream_deletions`, with real clients: one pypiserver and one Distribution registry as the
 * upstreams of four cached indexes (Python and OCI, `keep` and `follow`), TTLs of one second so
 * each pull after a delete revalidates. A project whose file is removed from pypiserver's folder
 * is still installed by pip through `keep` and gone through `follow`; a tag whose manifest is
 * deleted from the registry is still pulled whole by crane through `keep` and gone through
 * `follow`. The kept copies are marked in `/+status`, counted once in `/metrics` and `/+stats`
 * (`kept_after_upstream_delete`) and told once to a webhook receiver, however often they are
 * pulled again; once the upstream has them again, the mark goes.
 */
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cached, oci, toml } from '../support/config.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, writeLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { Receiver } from '../events/receiver.js';
import { CLEAN_ENV } from '../python/fixtures/clients.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';

const TTL_SECS = 1;
const REPO = 'team/app';

const receiver = new Receiver();
let work: string;
let packages: string;
let pypi: PypiServer;
let registry: Distribution;
let server: Velodex;
let project: BuiltProject;
let image: Image;
let layout: string;

const craneEnv = () => ({ HOME: work, DOCKER_CONFIG: join(work, 'docker') });
const crane = (args: string[], allowFailure = false) => run(tool('crane'), [...args, '--insecure'], { env: craneEnv(), timeoutMs: 120_000, allowFailure });
const pastTtl = () => new Promise((r) => setTimeout(r, TTL_SECS * 1000 + 300));

beforeAll(async () => {
  work = tempDir('velodex-deletions-');
  packages = join(work, 'packages');
  mkdirSync(packages);
  project = await buildProject('gone-upstream', '1.0.0');
  copyFileSync(project.wheel, join(packages, project.wheelFilename));
  await receiver.start();
  mkdirSync(join(work, 'registry'));
  [pypi, registry] = await Promise.all([startPypiserver(packages), startDistribution(join(work, 'registry'), null)]);
  const hook = (path: string) => [{ url: `${receiver.url}${path}`, events: ['kept_after_upstream_delete' as const] }];
  server = await startVelodex({
    config: toml(
      cached('py-keep', `${pypi.url}/simple/`, { ttlSecs: TTL_SECS, upstreamDeletions: 'keep', webhooks: hook('/py-keep') }),
      cached('py-follow', `${pypi.url}/simple/`, { ttlSecs: TTL_SECS, webhooks: hook('/py-follow') }),
      oci.cached('oci-keep', registry.url, { route: 'oci-keep', ttlSecs: TTL_SECS, upstreamDeletions: 'keep', webhooks: hook('/oci-keep') }),
      oci.cached('oci-follow', registry.url, { route: 'oci-follow', ttlSecs: TTL_SECS, upstreamDeletions: 'follow', webhooks: hook('/oci-follow') }),
    ),
  });
  image = buildImage({ seed: 'deletions', layers: 2, bigFileSize: 64 * 1024 });
  layout = writeLayout(join(work, 'layout'), [{ tag: 'v1', item: image }]);
  writeFileSync(join(work, 'auth.json'), '{}');
  await crane(['push', layout, `${registry.host}/${REPO}:v1`]);
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await Promise.all([pypi?.stop(), registry?.stop(), receiver.stop()]);
});

function pipDownload(index: string, allowFailure = false) {
  const dest = tempDir('velodex-dl-');
  return run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--index-url', `${server.url}/root/${index}/simple/`, '--dest', dest, 'gone-upstream==1.0.0'], {
    env: CLEAN_ENV,
    allowFailure,
  });
}

/** crane pulls the tag through `route`; the layout it wrote holds every blob of the image. */
async function cranePull(route: string): Promise<void> {
  const out = join(tempDir('velodex-crane-'), 'out');
  await crane(['pull', '--format', 'oci', `127.0.0.1:${server.port}/${route}/${REPO}:v1`, out]);
  expect(layoutMismatches(readLayout(out), allBlobs(image))).toEqual([]);
}

interface KeptStatus {
  upstream_deletions: string | null;
  kept_after_upstream_delete: { count: number; newest: Array<{ name: string; since: string }> } | null;
}

async function keptOf(index: string): Promise<KeptStatus> {
  const doc = (await (await fetch(`${server.url}/+status`)).json()) as { indexes: Array<KeptStatus & { name: string }> };
  return doc.indexes.find((ix) => ix.name === index)!;
}

/** The `kept_after_upstream_delete` counter in `/metrics` of the index at `route`. */
async function keptCounter(route: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('velodex_index_kept_after_upstream_delete_total{') && l.includes(`index="${route}"`));
  return Number(line?.split(' ').at(-1) ?? 'NaN');
}

/** Waits until the index's status lists `count` kept copies, and returns it. */
function keptCount(index: string, count: number): Promise<KeptStatus> {
  return until(`${index} keeping ${count}`, async () => {
    const s = await keptOf(index);
    return s.kept_after_upstream_delete?.count === count ? s : undefined;
  }, { timeoutMs: 10_000 });
}

describe('a project deleted upstream (pip, pypiserver)', () => {
  it('is still installed through keep, and gone through follow', async () => {
    await pipDownload('py-keep');
    await pipDownload('py-follow');
    rmSync(join(packages, project.wheelFilename));
    await pastTtl();
    // The upstream answers 404 now; keep serves the stored page and wheel, twice.
    await pipDownload('py-keep');
    const gone = await pipDownload('py-follow', true);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr + gone.stdout).toMatch(/No matching distribution found/);
    await pastTtl();
    await pipDownload('py-keep');

    const status = await keptCount('py-keep', 1);
    expect(status.upstream_deletions).toBe('keep');
    expect(status.kept_after_upstream_delete!.newest.map((k) => k.name)).toEqual(['gone-upstream']);
    expect(await keptOf('py-follow')).toMatchObject({ upstream_deletions: 'follow', kept_after_upstream_delete: { count: 0, newest: [] } });
    expect(await keptCounter('root/py-keep')).toBe(1);
    expect(await keptCounter('root/py-follow')).toBe(0);
    const stats = (await (await fetch(`${server.url}/+stats`)).json()) as { indexes: Record<string, { counters: Record<string, number> }> };
    expect(stats.indexes['root/py-keep']?.counters.kept_after_upstream_delete).toBe(1);
    const [delivery] = await receiver.waitFor('/py-keep', 1);
    expect(delivery!.headers['x-velodex-event']).toBe('kept_after_upstream_delete');
    expect(delivery!.json).toMatchObject({ event: 'kept_after_upstream_delete', index: 'py-keep', route: 'root/py-keep', local_index: 'py-keep', project: 'gone-upstream', count: 1 });
    expect(receiver.at('/py-follow')).toEqual([]);
  });

  it('is the upstream copy again once the upstream has it, and the mark goes', async () => {
    copyFileSync(project.wheel, join(packages, project.wheelFilename));
    await pastTtl();
    await pipDownload('py-keep');
    await keptCount('py-keep', 0);
    // Told once, however often it was pulled while kept.
    expect(receiver.at('/py-keep')).toHaveLength(1);
    expect(await keptCounter('root/py-keep')).toBe(1);
  });
});

describe('a tag deleted upstream (crane, Distribution)', () => {
  it('still pulls whole through keep, and is gone through follow', async () => {
    await cranePull('oci-keep');
    await cranePull('oci-follow');
    const digest = (await crane(['digest', `${registry.host}/${REPO}:v1`])).stdout.trim();
    await crane(['delete', `${registry.host}/${REPO}@${digest}`]);
    expect((await crane(['digest', `${registry.host}/${REPO}:v1`], true)).code).not.toBe(0);
    await pastTtl();
    await cranePull('oci-keep');
    const gone = await crane(['pull', '--format', 'oci', `127.0.0.1:${server.port}/oci-follow/${REPO}:v1`, join(tempDir('velodex-crane-'), 'out')], true);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toMatch(/MANIFEST_UNKNOWN|NAME_UNKNOWN|404/);
    await pastTtl();
    await cranePull('oci-keep');

    const status = await keptCount('oci-keep', 1);
    expect(status.upstream_deletions).toBe('keep');
    expect(status.kept_after_upstream_delete!.newest.map((k) => k.name)).toEqual([`${REPO}:v1`]);
    expect((await keptOf('oci-follow')).kept_after_upstream_delete).toEqual({ count: 0, newest: [] });
    expect(await keptCounter('oci-keep')).toBe(1);
    expect(await keptCounter('oci-follow')).toBe(0);
    const [delivery] = await receiver.waitFor('/oci-keep', 1);
    expect(delivery!.json).toMatchObject({
      event: 'kept_after_upstream_delete',
      index: 'oci-keep',
      project: REPO,
      version: 'v1',
      count: 1,
      file: { filename: digest, sha256: digest.slice('sha256:'.length) },
    });
    expect(receiver.at('/oci-follow')).toEqual([]);
  });

  it('is the upstream tag again once the registry has it, and the mark goes', async () => {
    await crane(['push', layout, `${registry.host}/${REPO}:v1`]);
    await pastTtl();
    await cranePull('oci-keep');
    await keptCount('oci-keep', 0);
    expect(receiver.at('/oci-keep')).toHaveLength(1);
    expect(await keptCounter('oci-keep')).toBe(1);
  });
});
