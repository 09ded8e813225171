/**
 * Accounting and quotas with real clients, on the run's backend (VELODEX_TEST_STORAGE), one
 * server: twine uploads and crane pushes into hosted indexes with `quota_bytes`. What each index
 * holds shows in `/+status`, `/+stats` and `/metrics`, and equals what the store holds for it.
 * An upload that would cross the quota is refused (twine: 413 with the quota in its message; crane:
 * DENIED), nothing of it is stored, the refusal is counted; after a delete and a collection the
 * quota is free again and the same upload goes through. An upload that fails (a wrong digest)
 * never counts.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { admin, gc, hosted, oci, toml } from '../support/config.js';
import { buildImage, writeLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { storeProbe, type StoreProbe } from '../support/store-probe.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'quota-token-8e21';
const ADMIN = 'quota-admin-4b7c';
/** Room for three of the test's wheels with their metadata (about 1.5 KiB each), not four. */
const PY_QUOTA = 5 * 1024;
/** Room for one of the test's images (about 1.6 MiB), not two. */
const OCI_QUOTA = 2.5 * 1024 * 1024;

let server: Velodex;
let probe: StoreProbe;
let work: string;
let env: Record<string, string>;

interface Stored {
  bytes: number;
  objects: number;
}
interface StatusDoc {
  stored: Stored & { counted_at: string | null };
  gc: { last_run: { result: string; bytes_deleted: number } | null };
  indexes: Array<{ name: string; stored: Stored | null; quota_bytes: number | null }>;
}

beforeAll(async () => {
  server = await startVelodex({
    config: toml(
      hosted('py', { token: TOKEN, volatile: true, quota: PY_QUOTA }),
      oci.hosted('images', { route: 'team/images', token: TOKEN, quota: '2.5MiB' }),
      hosted('open', { token: TOKEN }),
      gc({ enabled: false, grace: 1, lease: '3s' }),
      admin(ADMIN),
    ),
  });
  probe = await storeProbe(server.dataDir);
  work = tempDir('velodex-quota-');
  env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  await crane(['auth', 'login', host(), '-u', '__token__', '--password-stdin'], TOKEN);
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

const host = () => `127.0.0.1:${server.port}`;
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function crane(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env, input, allowFailure, timeoutMs: 180_000 });
}

function twine(route: string, files: string[], allowFailure = false): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/${route}/`, '-u', '__token__', '-p', TOKEN, ...files], {
    env: { NO_COLOR: '1', COLUMNS: '200' },
    allowFailure,
  });
}

async function status(): Promise<StatusDoc> {
  const res = await fetch(`${server.url}/+status`);
  expect(res.status).toBe(200);
  return (await res.json()) as StatusDoc;
}

function storedOf(doc: StatusDoc, name: string): Stored {
  const entry = doc.indexes.find((ix) => ix.name === name);
  if (!entry?.stored) throw new Error(`no stored figures for ${name}`);
  return entry.stored;
}

/** The figures once the writes have been flushed (every 2 s): waits until they stop changing over two flushes. */
async function settled(name: string): Promise<Stored> {
  let last = storedOf(await status(), name);
  for (let i = 0; i < 20; i++) {
    await wait(4500);
    const now = storedOf(await status(), name);
    if (now.bytes === last.bytes && now.objects === last.objects) return now;
    last = now;
  }
  throw new Error(`the figures of ${name} never settled`);
}

/** Sum of the sizes of the stored blobs with these digests. */
async function storedBytes(hexes: Iterable<string>): Promise<Stored> {
  let bytes = 0;
  let objects = 0;
  for (const hex of new Set(hexes)) {
    const body = await probe.blob(hex);
    if (!body) continue;
    for await (const chunk of body) bytes += (chunk as Buffer).length;
    objects += 1;
  }
  return { bytes, objects };
}

async function pythonDigests(project: string): Promise<string[]> {
  const record = await probe.doc<{ files: Record<string, { sha256: string; metadataSha256?: string }> }>(`python/py/projects/${project}`);
  return Object.values(record?.files ?? {}).flatMap((f) => [f.sha256, ...(f.metadataSha256 ? [f.metadataSha256] : [])]);
}

async function collect(): Promise<void> {
  const res = await fetch(`${server.url}/+admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } });
  expect(res.status).toBe(200);
}

/** A per-index series of /metrics; `index` is the route, as every per-index series is labelled. */
async function metric(name: string, index: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`index="${index}"`));
  if (!line) throw new Error(`no ${name} for ${index} in /metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('a hosted Python index with a quota', () => {
  const built: BuiltProject[] = [];

  it('counts what it holds, and refuses the upload that would cross the quota with 413 and the quota in the message', async () => {
    for (let i = 1; i <= 6; i++) built.push(await buildProject('quota-lib', `${i}.0`));
    const wheelSize = statSync(built[0]!.wheel).size;
    let accepted = 0;
    let refused: RunResult | null = null;
    for (const p of built) {
      const res = await twine('root/py', [p.wheel], true);
      if (res.code !== 0) {
        refused = res;
        break;
      }
      accepted += 1;
      // The figures a quota is judged by are kept by the writes, flushed every 2 s.
      await settled('py');
    }
    expect(accepted, `wheels of ${wheelSize} bytes under a quota of ${PY_QUOTA}`).toBeGreaterThanOrEqual(2);
    expect(refused, 'an upload past the quota was accepted').not.toBeNull();
    expect(refused!.stdout + refused!.stderr).toMatch(/413/);
    expect(refused!.stdout + refused!.stderr).toMatch(/quota/);

    // Exactly what the store holds for the index's files, and within the quota.
    const stored = await settled('py');
    expect(stored).toEqual(await storedBytes(await pythonDigests('quota-lib')));
    expect(stored.bytes).toBeLessThanOrEqual(PY_QUOTA);
    expect(stored.objects).toBe(accepted * 2);
    // Nothing of the refused upload was stored.
    const next = built[accepted]!;
    expect(await probe.has(sha(readFileSync(next.wheel)))).toBe(false);

    // The refusal's JSON names the quota (the form twine sent, posted again).
    const form = new FormData();
    for (const [k, v] of Object.entries({ ':action': 'file_upload', name: 'quota-lib', version: next.version, filetype: 'bdist_wheel', pyversion: 'py3', metadata_version: '2.1' })) form.append(k, v);
    form.append('content', new Blob([readFileSync(next.wheel)]), next.wheelFilename);
    const again = await fetch(`${server.url}/root/py/`, { method: 'POST', headers: { authorization: basicAuth(TOKEN) }, body: form });
    expect(again.status).toBe(413);
    expect(again.statusText).toMatch(/quota/);
    expect(await again.json()).toMatchObject({ reason: 'quota', quota: { index: 'py', quota_bytes: PY_QUOTA, held_bytes: stored.bytes } });

    // Counted: /+stats and /metrics.
    const stats = (await (await fetch(`${server.url}/+stats`)).json()) as { indexes: Record<string, { counters: { quota_refused: number }; stored: Stored }> };
    expect(stats.indexes['root/py']!.counters.quota_refused).toBeGreaterThanOrEqual(1);
    expect(stats.indexes['root/py']!.stored).toEqual(stored);
    expect(await metric('velodex_index_quota_refused_total', 'root/py')).toBeGreaterThanOrEqual(1);
    expect(await metric('velodex_index_stored_bytes', 'root/py')).toBe(stored.bytes);
    expect(await metric('velodex_index_limit_bytes', 'root/py')).toBe(PY_QUOTA);
  }, 240_000);

  it('is free again after a delete and a collection: the refused upload then goes through', async () => {
    const before = await settled('py');
    const del = await fetch(`${server.url}/root/py/quota-lib/1.0/`, { method: 'DELETE', headers: { authorization: basicAuth(TOKEN) } });
    expect(del.status).toBeLessThan(300);
    await wait(1500); // past the grace period of 1 s
    await collect();
    const after = await settled('py');
    expect(after.bytes).toBeLessThan(before.bytes);
    const doc = await status();
    expect(doc.stored.counted_at).not.toBeNull();
    expect(doc.gc.last_run?.result).toBe('ok');
    // A version refused before is accepted now.
    const pending = built.filter((p) => p.version !== '1.0');
    const heldHexes = new Set(await pythonDigests('quota-lib'));
    const waiting = pending.find((p) => !heldHexes.has(sha(readFileSync(p.wheel))));
    expect(waiting, 'a version that was refused').toBeDefined();
    await twine('root/py', [waiting!.wheel]);
    expect(await probe.has(sha(readFileSync(waiting!.wheel)))).toBe(true);
  }, 120_000);

  it('an index without a quota takes what it is given', async () => {
    const p = await buildProject('open-lib', '1.0');
    await twine('root/open', [p.wheel, p.sdist]);
    expect((await settled('open')).objects).toBe(3);
  }, 120_000);
});

describe('a hosted OCI index with a quota', () => {
  const ref = (tag: string) => `${host()}/team/images/app:${tag}`;
  let first: Image;

  it('takes one image, refuses the next with DENIED and the quota, and stores nothing of it', async () => {
    first = buildImage({ seed: 'quota-one', layers: 2 });
    await crane(['push', writeLayout(join(work, 'one'), [{ tag: 'one', item: first }]), ref('one')]);
    const stored = await settled('images');
    const expected = await storedBytes([first.config.descriptor.digest, ...first.layers.map((l) => l.descriptor.digest), first.manifest.descriptor.digest].map((d) => d.replace('sha256:', '')));
    expect(stored).toEqual(expected);
    expect(stored.bytes).toBeLessThanOrEqual(OCI_QUOTA);

    const second = buildImage({ seed: 'quota-two', layers: 2 });
    const res = await crane(['push', writeLayout(join(work, 'two'), [{ tag: 'two', item: second }]), ref('two')], undefined, true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/DENIED/);
    expect(res.stderr).toMatch(/quota/);
    const big = second.layers.at(-1)!.descriptor.digest.replace('sha256:', '');
    expect(await probe.has(big)).toBe(false);
    expect(await metric('velodex_index_quota_refused_total', 'team/images')).toBeGreaterThanOrEqual(1);
    expect((await settled('images')).bytes).toBeLessThanOrEqual(OCI_QUOTA);
  }, 240_000);

  it('a failed upload (a wrong digest) never counts', async () => {
    const before = await settled('images');
    const bytes = Buffer.alloc(4096, 7);
    const wrong = `sha256:${'0'.repeat(64)}`;
    const res = await fetch(`${server.url}/v2/team/images/app/blobs/uploads/?digest=${wrong}`, {
      method: 'POST',
      headers: { authorization: basicAuth(TOKEN), 'content-type': 'application/octet-stream' },
      body: bytes,
    });
    expect(res.status).toBe(400);
    expect(await settled('images')).toEqual(before);
  }, 60_000);

  it('is free again after the image is deleted and collected: the refused push then goes through', async () => {
    await crane(['delete', `${host()}/team/images/app@${first.manifest.descriptor.digest}`]);
    await wait(1500);
    await collect();
    expect((await settled('images')).objects).toBe(0);
    const second = buildImage({ seed: 'quota-two', layers: 2 });
    await crane(['push', writeLayout(join(work, 'two-again'), [{ tag: 'two', item: second }]), ref('two')]);
    const res = await crane(['manifest', ref('two')]);
    expect(res.stdout).toContain(second.config.descriptor.digest);
    // The registry's total counts each blob once.
    const doc = await status();
    expect(doc.stored.bytes).toBeGreaterThanOrEqual(storedOf(doc, 'images').bytes);
  }, 240_000);
});
