/**
 * Online garbage collection with real clients, on the run's backend (VELODEX_TEST_STORAGE): two
 * processes on one store (s3: two servers on one bucket prefix; fs: one server with two workers,
 * whose compare-and-swap the workers share), crane pushes and twine uploads, a deleted manifest
 * and a deleted Python release; `velodex gc --dry-run` reports what `velodex gc` then deletes,
 * exactly the unreferenced blobs (counted in the store); an aborted push is collected after the
 * grace period and not before; crane pushes go on while collections run on the other process,
 * and afterwards every tag pulls whole and every version pip-installs; a `velodex gc` killed
 * (kill -9) after its first and second deletion leaves nothing the next run does not finish;
 * `velodex gc --url` has the running server collect and prints its report as a local run does,
 * and exits 1 naming the token when the server refuses it.
 * Python holds per index: a release promoted from one index to another and deleted in the first
 * is held by the second alone after a collection and still installs from it; a hold written by
 * an earlier version (the one legacy holder `python`) stays while a document references it.
 * After a collection every process shows in /+status what the store says each index holds.
 */
import { writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { testBackend, s3StorageToml, sharedMinio } from '../support/backend.js';
import { admin, gc, hosted, oci, toml } from '../support/config.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, writeLayout, type Image } from '../support/oci-image.js';
import { CLI, tool } from '../support/paths.js';
import { freePort } from '../support/pypiserver.js';
import { run, type RunResult } from '../support/run.js';
import { serverStores, storeProbe, type StoreProbe } from '../support/store-probe.js';
import type { HoldsDoc } from '../../registry/src/storage/holds.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'gc-token-51c0';
/** Long enough for a crane push on a busy machine (its blobs before its manifest). */
const GRACE_SECS = 5;
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

interface RecordDoc {
  files: Record<string, { sha256: string; metadataSha256?: string }>;
}

let a: Velodex;
let b: Velodex;
let servers: Velodex[] = [];
let probe: StoreProbe;
let work: string;
let env: Record<string, string>;
/** Every tag pushed and not deleted, and every Python release uploaded and not deleted. */
/** The admin token: the admin action runs only with it. */
const ADMIN = 'gc-admin-token-5d1e7a90';
const tags = new Map<string, Image>();
const releases: BuiltProject[] = [];

beforeAll(async () => {
  const config = toml(
    hosted('py', { token: TOKEN, volatile: true }),
    hosted('py-b', { token: TOKEN, volatile: true }),
    oci.hosted('images', { route: 'team/images', token: TOKEN }),
    gc({ enabled: false, grace: GRACE_SECS, lease: '3s' }),
    admin(ADMIN),
  );
  if (testBackend() === 's3') {
    const storage = s3StorageToml(sharedMinio());
    a = await startVelodex({ config, storage });
    b = await startVelodex({ config, storage });
    servers = [a, b];
  } else {
    a = await startVelodex({ config, env: { VELODEX_WORKERS: '2' } });
    b = a;
    servers = [a];
  }
  probe = await storeProbe(a.dataDir);
  work = tempDir('velodex-gc-');
  env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  await crane(['auth', 'login', host(a), '-u', '__token__', '--password-stdin'], TOKEN);
  await crane(['auth', 'login', host(b), '-u', '__token__', '--password-stdin'], TOKEN);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.stop()));
});

const host = (node: Velodex) => `127.0.0.1:${node.port}`;
const ref = (node: Velodex, tag: string) => `${host(node)}/team/images/app:${tag}`;
const hex = (digest: string) => digest.replace(/^sha256:/, '');
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Past the grace period of everything written so far. */
const pastGrace = () => wait(GRACE_SECS * 1000 + 1500);

function crane(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env, input, allowFailure, timeoutMs: 180_000 });
}

async function push(node: Velodex, tag: string, image: Image): Promise<void> {
  await crane(['push', writeLayout(join(work, `layout-${tag}`), [{ tag, item: image }]), ref(node, tag)]);
  tags.set(tag, image);
}

function twine(node: Velodex, files: string[]): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${node.url}/root/py/`, '-u', '__token__', '-p', TOKEN, ...files], {
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

interface Reclaimed {
  holds: number;
  blobs: number;
  bytes: number;
  output: string;
}

/** `velodex gc` with the server's own config file, as an operator runs it. */
async function gcCli(node: Velodex, dryRun: boolean, extraEnv: Record<string, string> = {}): Promise<Reclaimed> {
  const args = [CLI, 'gc', '--config', join(node.dataDir, 'velodex.toml'), '--data-dir', node.dataDir, ...(dryRun ? ['--dry-run'] : [])];
  const res = await run(process.execPath, args, { env: extraEnv });
  return parseReport(res.stdout);
}

function parseReport(output: string): Reclaimed {
  const blobs = /blobs (?:would be )?deleted: (\d+) \((\d+) bytes\)/.exec(output);
  const holds = /holds (?:would be )?released: (\d+)/.exec(output);
  if (!blobs || !holds) throw new Error(`no report in:\n${output}`);
  return { holds: Number(holds[1]), blobs: Number(blobs[1]), bytes: Number(blobs[2]), output };
}

/** `velodex gc --url`: the running server collects; the token from the environment or a file. */
function gcUrl(node: Velodex, dryRun: boolean, token: { env: string } | { file: string }): Promise<RunResult> {
  const args = [CLI, 'gc', '--url', node.url, ...('file' in token ? ['--token-file', token.file] : []), ...(dryRun ? ['--dry-run'] : [])];
  return run(process.execPath, args, { env: 'env' in token ? { VELODEX_ADMIN_TOKEN: token.env } : {}, allowFailure: true });
}

/** A collection inside the running server (the admin action); null while another one runs. */
async function gcAdmin(node: Velodex): Promise<{ blobsDeleted: number } | null> {
  const res = await fetch(`${node.url}/+admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } });
  if (res.status === 409) return null;
  expect(res.status).toBe(200);
  return (await res.json()) as { blobsDeleted: number };
}

/** A collection through the admin action that did run (waits out one already running elsewhere). */
async function gcAdminRun(node: Velodex): Promise<void> {
  for (let i = 0; i < 50; i++) {
    if (await gcAdmin(node)) return;
    await wait(200);
  }
  throw new Error('no collection ran: another one held the lease throughout');
}

/** An aborted push: one blob uploaded (monolithic POST), no manifest naming it. */
async function uploadLoneBlob(node: Velodex, bytes: Buffer): Promise<string> {
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  const res = await fetch(`${node.url}/v2/team/images/app/blobs/uploads/?digest=${digest}`, {
    method: 'POST',
    headers: { authorization: basicAuth(TOKEN), 'content-type': 'application/octet-stream' },
    body: bytes,
  });
  expect(res.status).toBe(201);
  return hex(digest);
}

async function pythonDigests(project: string, index = 'py'): Promise<string[]> {
  const record = await probe.doc<RecordDoc>(`python/${index}/projects/${project}`);
  return Object.values(record?.files ?? {}).flatMap((f) => [f.sha256, ...(f.metadataSha256 ? [f.metadataSha256] : [])]);
}

async function pullEveryTag(node: Velodex): Promise<void> {
  for (const [tag, image] of tags) {
    const dir = join(work, `pull-${tag}-${Date.now()}`);
    await crane(['pull', '--format', 'oci', ref(node, tag), dir]);
    expect(layoutMismatches(readLayout(dir), allBlobs(image)), tag).toEqual([]);
  }
}

async function installEveryVersion(node: Velodex): Promise<void> {
  for (const release of releases) await pipInstall(node, 'root/py', release);
}

async function pipInstall(node: Velodex, route: string, release: BuiltProject): Promise<void> {
  const target = tempDir('velodex-gc-pip-');
  const res = await run(
    tool('pip'),
    ['install', '--no-deps', '--no-cache-dir', '--target', target, '--index-url', `${node.url}/${route}/simple/`, `${release.name}==${release.version}`],
    { env: CLEAN_ENV },
  );
  expect(res.stdout).toContain(`Successfully installed ${release.name}-${release.version}`);
}

/** The holders of `hex` as its holds document lists them (sorted), or null without one. */
async function holdersOf(hex: string): Promise<string[] | null> {
  return (await probe.doc<HoldsDoc>(`holds/${hex.slice(0, 2)}/${hex}`))?.holders ?? null;
}

/** The bytes and blobs of the store whose holds list a holder `which` accepts. */
async function heldBy(which: (holder: string) => boolean): Promise<{ bytes: number; objects: number }> {
  let bytes = 0;
  let objects = 0;
  for (const d of await probe.blobs()) {
    if (!((await holdersOf(d)) ?? []).some(which)) continue;
    const body = await probe.blob(d);
    for await (const chunk of body ?? []) bytes += (chunk as Buffer).length;
    objects += 1;
  }
  return { bytes, objects };
}

/** What `/+status` of `node` says index `name` holds. */
async function storedOf(node: Velodex, name: string): Promise<{ bytes: number; objects: number } | undefined> {
  const doc = (await (await fetch(`${node.url}/+status`)).json()) as { indexes: Array<{ name: string; stored: { bytes: number; objects: number } }> };
  return doc.indexes.find((ix) => ix.name === name)?.stored;
}

describe('online garbage collection', () => {
  it('reclaims exactly the unreferenced blobs; a dry run reports the same and deletes nothing', async () => {
    const base = buildImage({ seed: 'gc-keep', layers: 2, bigFileSize: 64 * 1024 });
    const gone = buildImage({ seed: 'gc-gone', layers: 2, bigFileSize: 64 * 1024 });
    const other = buildImage({ seed: 'gc-other', layers: 2, bigFileSize: 64 * 1024 });
    await push(a, 'keep', base);
    await push(b, 'gone', gone);
    await push(a, 'other', other);
    const [kept, dropped] = await Promise.all([buildProject('gc-lib', '1.0'), buildProject('gc-lib', '2.0')]);
    await twine(a, [kept.wheel, kept.sdist]);
    await twine(b, [dropped.wheel, dropped.sdist]);
    releases.push(kept);
    const pythonBefore = new Set(await pythonDigests('gc-lib'));

    await pastGrace();
    // Everything is referenced: nothing to reclaim.
    expect((await gcCli(b, true)).blobs).toBe(0);

    await crane(['delete', `${host(a)}/team/images/app@${gone.manifest.descriptor.digest}`]);
    tags.delete('gone');
    const del = await fetch(`${b.url}/root/py/gc-lib/2.0/`, { method: 'DELETE', headers: { authorization: basicAuth(TOKEN) } });
    expect(del.status).toBe(200);
    const pythonAfter = new Set(await pythonDigests('gc-lib'));
    const pythonGone = [...pythonBefore].filter((d) => !pythonAfter.has(d));
    expect(pythonGone.length).toBeGreaterThanOrEqual(2);
    // The manifest's own bytes went with its DELETE; its config and layers are left to the collector.
    const expected = [...[gone.config, ...gone.layers].map((blob) => hex(blob.descriptor.digest)), ...pythonGone].sort();

    const before = await probe.blobs();
    for (const d of expected) expect(before).toContain(d);
    await pastGrace();
    const dry = await gcCli(b, true);
    expect(dry.blobs).toBe(expected.length);
    expect(await probe.blobs()).toEqual(before);

    const real = await gcCli(b, false);
    expect(real.blobs).toBe(expected.length);
    expect(real.bytes).toBe(dry.bytes);
    expect(real.holds).toBe(dry.holds);
    const after = await probe.blobs();
    expect(before.filter((d) => !after.includes(d)).sort()).toEqual(expected);
    expect(after.filter((d) => !before.includes(d))).toEqual([]);
    // A second collection finds nothing more.
    expect((await gcCli(a, false)).blobs).toBe(0);

    // The collection counted what each index holds: every process shows it (within its 2 s refresh).
    const held = await heldBy((holder) => holder.startsWith('oci.images/'));
    const heldPy = await heldBy((holder) => holder === 'python.py');
    for (const node of servers) {
      await expect.poll(() => storedOf(node, 'images'), { timeout: 10_000 }).toEqual(held);
      await expect.poll(() => storedOf(node, 'py'), { timeout: 10_000 }).toEqual(heldPy);
    }

    await pullEveryTag(b);
    await installEveryVersion(a);
  }, 300_000);

  it('collects an aborted push (a blob without its manifest) after the grace period, not before', async () => {
    const lone = await uploadLoneBlob(a, Buffer.from(`an aborted push ${Date.now()}`));
    expect(await probe.has(lone)).toBe(true);
    await gcCli(b, false);
    expect(await probe.has(lone)).toBe(true);
    await pastGrace();
    const report = await gcCli(b, false);
    expect(report.blobs).toBeGreaterThanOrEqual(1);
    expect(await probe.has(lone)).toBe(false);
  }, 120_000);

  it('velodex gc --url: the running server collects, and the lines printed are what it did; a wrong token exits 1', async () => {
    const lone = await uploadLoneBlob(a, Buffer.from(`an aborted push for --url ${Date.now()}`));
    await pastGrace();
    const before = await probe.blobs();

    const dryRun = await gcUrl(a, true, { env: ADMIN });
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toMatch(/^dry run: nothing changed in \d+ ms \(grace 5s\)$/m);
    const dry = parseReport(dryRun.stdout);
    expect(dry.blobs).toBeGreaterThanOrEqual(1);
    expect(await probe.blobs()).toEqual(before);

    const tokenFile = join(work, 'admin-token');
    writeFileSync(tokenFile, `${ADMIN}\n`, { mode: 0o600 });
    const realRun = await gcUrl(a, false, { file: tokenFile });
    expect(realRun.code, realRun.stderr).toBe(0);
    expect(realRun.stdout).toMatch(/^collection finished in \d+ ms \(grace 5s\)$/m);
    expect(realRun.stdout).toMatch(/^stale staged writes removed: \d+; idle upload sessions removed: \d+$/m);
    const real = parseReport(realRun.stdout);
    expect(real).toMatchObject({ blobs: dry.blobs, bytes: dry.bytes, holds: dry.holds });
    // What it printed is what the server did to the store: those blobs, the lone one among them.
    const after = await probe.blobs();
    const deleted = before.filter((d) => !after.includes(d));
    expect(deleted.length).toBe(real.blobs);
    expect(deleted).toContain(lone);
    expect(after.filter((d) => !before.includes(d))).toEqual([]);

    const refused = await gcUrl(a, true, { env: 'not-the-admin-token' });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/refused the admin token \(401: the admin token is wrong\); check --token-file or VELODEX_ADMIN_TOKEN/);
    const closed = await freePort();
    const unreachable = await run(process.execPath, [CLI, 'gc', '--url', `http://127.0.0.1:${closed}`, '--dry-run'], { env: { VELODEX_ADMIN_TOKEN: ADMIN }, allowFailure: true });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain(`cannot reach http://127.0.0.1:${closed}: ECONNREFUSED`);
  }, 120_000);

  it('pushes through one process while collections run on the other: every tag pulls whole, every version installs', async () => {
    let collecting = true;
    let runs = 0;
    const collector = (async () => {
      while (collecting) {
        if (await gcAdmin(b)) runs += 1;
        // On s3 the command line collects too, beside the other process's pushes.
        if (testBackend() === 's3' && collecting) await gcCli(b, false).catch(() => undefined);
        await wait(200);
      }
    })();
    try {
      for (let i = 0; i < 6; i++) {
        const image = buildImage({ seed: `gc-loop-${i}`, layers: 2, bigFileSize: 32 * 1024 });
        await push(a, `loop-${i}`, image);
        // Some garbage for the collections to take meanwhile: an image pushed and deleted again.
        const scrap = buildImage({ seed: `gc-scrap-${i}`, layers: 1, bigFileSize: 16 * 1024 });
        await push(a, `scrap-${i}`, scrap);
        await crane(['delete', `${host(a)}/team/images/app@${scrap.manifest.descriptor.digest}`]);
        tags.delete(`scrap-${i}`);
        const release = await buildProject('gc-loop', `1.${i}`);
        await twine(a, [release.wheel, release.sdist]);
        releases.push(release);
      }
    } finally {
      collecting = false;
      await collector;
    }
    expect(runs).toBeGreaterThan(0);
    await pastGrace();
    await gcCli(b, false);
    await pullEveryTag(a);
    await pullEveryTag(b);
    await installEveryVersion(b);
  }, 600_000);

  for (const pauseAfter of [1, 2]) {
    it(`a collection killed (kill -9) after deletion ${pauseAfter} is finished by the next run; nothing referenced is lost`, async () => {
      const scraps = [0, 1, 2].map((i) => buildImage({ seed: `gc-kill-${pauseAfter}-${i}`, layers: 1, bigFileSize: 8 * 1024 }));
      for (const [i, scrap] of scraps.entries()) {
        await push(a, `kill-${pauseAfter}-${i}`, scrap);
        await crane(['delete', `${host(a)}/team/images/app@${scrap.manifest.descriptor.digest}`]);
        tags.delete(`kill-${pauseAfter}-${i}`);
      }
      const garbage = scraps.flatMap((s) => [s.config, ...s.layers]).map((blob) => hex(blob.descriptor.digest));
      await pastGrace();

      const child = spawn(process.execPath, [CLI, 'gc', '--config', join(b.dataDir, 'velodex.toml'), '--data-dir', b.dataDir], {
        env: { ...process.env, VELODEX_TEST_GC_PAUSE_AFTER: String(pauseAfter) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes('gc test pause')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`gc exited (${code}) before pausing:\n${output}`)));
      });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
      const left: string[] = [];
      for (const d of garbage) if (await probe.has(d)) left.push(d);
      // Killed midway: some of it deleted, the rest still there.
      expect(left.length).toBeGreaterThan(0);
      expect(left.length).toBeLessThan(garbage.length);

      // Its lease runs out ([gc] lease = 3s); the next run finishes the work.
      await wait(3500);
      await gcCli(b, false);
      for (const d of garbage) expect(await probe.has(d), d).toBe(false);
      await pullEveryTag(a);
    }, 180_000);
  }

  it('Python holds per index: promoted to py-b and deleted in py, a release is held by py-b alone and installs from it; a legacy hold stays while referenced', async () => {
    const promoted = await buildProject('gc-promo', '1.0');
    const legacy = await buildProject('gc-legacy', '1.0');
    await twine(a, [promoted.wheel, promoted.sdist]);
    await twine(b, [legacy.wheel, legacy.sdist]);
    const promote = await fetch(`${b.url}/root/py-b/gc-promo/1.0/promote?from=root/py`, { method: 'PUT', headers: { authorization: basicAuth(TOKEN) } });
    expect(promote.status).toBe(200);
    const promotedDigests = await pythonDigests('gc-promo', 'py-b');
    expect(promotedDigests.length).toBeGreaterThanOrEqual(3);
    // The upload held for py, the promotion for its target py-b.
    for (const d of promotedDigests) expect(await holdersOf(d), d).toEqual(['python.py', 'python.py-b']);

    // An earlier version's hold: only the legacy holder, taken long ago.
    const legacyDigests = await pythonDigests('gc-legacy');
    const stores = await serverStores(a.dataDir);
    for (const d of legacyDigests) {
      const key = `holds/${d.slice(0, 2)}/${d}`;
      const current = await stores.meta.get<HoldsDoc>(key);
      const doc: HoldsDoc = { holders: ['python'], touched: { python: Date.now() - 3600_000 } };
      await stores.meta.put<HoldsDoc>(key, doc, current?.version ?? null);
    }

    const del = await fetch(`${a.url}/root/py/gc-promo/1.0/`, { method: 'DELETE', headers: { authorization: basicAuth(TOKEN) } });
    expect(del.status).toBe(200);
    await pastGrace();
    await gcAdminRun(b);
    for (const d of promotedDigests) {
      expect(await holdersOf(d), d).toEqual(['python.py-b']);
      expect(await probe.has(d), d).toBe(true);
    }
    for (const d of legacyDigests) {
      expect(await holdersOf(d), d).toEqual(['python']);
      expect(await probe.has(d), d).toBe(true);
    }
    await pipInstall(a, 'root/py-b', promoted);
    await pipInstall(b, 'root/py', legacy);

    // Unreferenced, the legacy hold goes like any other.
    const gone = await fetch(`${a.url}/root/py/gc-legacy/1.0/`, { method: 'DELETE', headers: { authorization: basicAuth(TOKEN) } });
    expect(gone.status).toBe(200);
    await gcAdminRun(a);
    for (const d of legacyDigests) {
      expect(await holdersOf(d), d).toBeNull();
      expect(await probe.has(d), d).toBe(false);
    }
  }, 180_000);
});
