/**
 * `/+status` and `/+stats` as real traffic flows through one server (the embedded default: a
 * hosted Python index and a hosted OCI index): twine uploads, pip installs (PEP 658 metadata,
 * then the wheel), a yank, crane pushes and pulls. Counters are asserted exactly where the
 * clients' requests are deterministic. A restart keeps what `/+status` reads from the store and
 * resets `/+stats`, as the spec says.
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverStores } from '../support/store-probe.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { basicAuth, defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv } from '../python/fixtures/clients.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';

type Counters = Record<string, number>;
interface Status {
  version: string;
  serial: number;
  started_at: string;
  requests: { total: number; by_status: Record<string, number> };
  rate_limit: { enabled: boolean; allowed: Record<string, number>; denied: Record<string, number> };
  indexes: Array<{ name: string; route: string; serial: number; details?: { projects: number; files: number; source: string } }>;
  recent_uploads?: Array<{ time: string; index: string; project: string; version?: string; filename: string }>;
}

let server: Velodex;
let token: string;
let alpha: BuiltProject;
let work: string;
const dataDir = tempDir('velodex-observe-');

async function getJson<T>(path: string, status = 200): Promise<T> {
  const res = await fetch(`${server.url}${path}`);
  const body = await res.text();
  expect(res.status, body).toBe(status);
  return JSON.parse(body) as T;
}
const status = (details = false) => getJson<Status>(details ? '/+status?details=admin' : '/+status');
const entry = (s: Status, name: string) => s.indexes.find((i) => i.name === name)!;
const indexStats = (route: string) => getJson<{ totals: Counters; projects: Record<string, Counters> }>(`/+stats?index=${route}`);
const projectStats = (route: string, project: string) =>
  getJson<{ totals: Counters; files: Record<string, { downloads: number; metadata: number; bytes: number }> }>(`/+stats?index=${route}&project=${encodeURIComponent(project)}`);

function crane(args: string[], input?: string) {
  return run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, input, timeoutMs: 180_000 });
}

beforeAll(async () => {
  alpha = await buildProject('alpha', '1.0');
  work = tempDir('velodex-observe-clients-');
  server = await startVelodex({ dataDir });
  token = defaultToken(server);
});

afterAll(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('/+status and /+stats under real clients', () => {
  it('start at zero with the package version', async () => {
    const s = await status();
    expect(s.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(s.serial).toBe(0);
    // The limiter is off by default: its counters stay at zero (spec, Limits 3).
    expect(s.rate_limit).toEqual({ enabled: false, allowed: { read: 0, download: 0, write: 0, admin: 0 }, denied: { read: 0, download: 0, write: 0, admin: 0 } });
    const stats = await getJson<{ totals: Counters; indexes: Record<string, { counters: Counters }> }>('/+stats');
    expect(Object.values(stats.totals).every((n) => n === 0)).toBe(true);
    expect(Object.keys(stats.indexes).sort()).toEqual(['root/hosted', 'root/oci']);
  });

  it('count one twine upload: uploads 1, serial 1, one project with one file and it is the recent upload', async () => {
    await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, alpha.wheel]);
    const stats = await indexStats('root/hosted');
    expect(stats.totals.uploads).toBe(1);
    expect(stats.projects.alpha?.uploads).toBe(1);
    const s = await status(true);
    expect(s.serial).toBe(1);
    // The first admin request builds each hosted index's summary by one scan; later ones read it.
    expect(entry(s, 'hosted').details).toMatchObject({ projects: 1, files: 1, source: 'scan' });
    expect(entry(s, 'oci').details).toMatchObject({ projects: 0, files: 0, source: 'scan' });
    expect(s.recent_uploads).toEqual([expect.objectContaining({ index: 'hosted', project: 'alpha', version: '1.0', filename: alpha.wheelFilename })]);
  });

  it('count one pip install: one page, one metadata hit and one download of the wheel', async () => {
    const venv = await freshPipVenv();
    await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${server.url}/root/hosted/simple/`, 'alpha'], { env: CLEAN_ENV });
    const p = await projectStats('root/hosted', 'Alpha');
    expect(p.totals).toMatchObject({ pages: 1, downloads: 1, metadata: 1, uploads: 1 });
    const file = p.files[alpha.wheelFilename]!;
    expect(file).toMatchObject({ downloads: 1, metadata: 1 });
    const metadata = await (await fetch(`${server.url}/root/hosted/files/${createHash('sha256').update(readFileSync(alpha.wheel)).digest('hex')}/${alpha.wheelFilename}.metadata`)).arrayBuffer();
    // The fetch above is counted too: one more metadata hit and its bytes.
    const after = (await projectStats('root/hosted', 'alpha')).files[alpha.wheelFilename]!;
    expect(after.metadata).toBe(2);
    expect(after.bytes).toBe(file.bytes + metadata.byteLength);
    expect(file.bytes).toBe(statSync(alpha.wheel).size + metadata.byteLength);
  });

  it('count a yank as a write of the index (serial) without changing the file count', async () => {
    const res = await fetch(`${server.url}/root/hosted/alpha/1.0/yank`, { method: 'PUT', headers: { authorization: basicAuth(token) } });
    expect(res.status).toBe(200);
    const s = await status(true);
    expect(s.serial).toBe(2);
    expect(entry(s, 'hosted')).toMatchObject({ serial: 2, details: { projects: 1, files: 1, source: 'summary' } });
  });

  it('count a crane push as one upload (the manifest) and a crane pull as downloads of each blob', async () => {
    await crane(['auth', 'login', `127.0.0.1:${server.port}`, '-u', '__token__', '--password-stdin'], token);
    const image = buildImage({ seed: 'observe', layers: 2, bigFileSize: 4096 });
    const src = writeLayout(join(work, 'src'), [{ tag: 'v1', item: image }]);
    const ref = `127.0.0.1:${server.port}/root/oci/team/app:v1`;
    await crane(['push', src, ref]);
    const pushed = await indexStats('root/oci');
    expect(pushed.totals).toMatchObject({ uploads: 1, downloads: 0 });
    expect(pushed.projects['team/app']?.uploads).toBe(1);

    await crane(['pull', '--format', 'oci', ref, join(work, 'pull')]);
    const p = await projectStats('root/oci', 'team/app');
    const blobs = [image.config, ...image.layers];
    expect(p.totals.downloads).toBe(blobs.length);
    expect(p.totals.pages).toBeGreaterThanOrEqual(1);
    for (const b of blobs) expect(p.files[b.descriptor.digest]).toEqual({ downloads: 1, metadata: 0, bytes: b.descriptor.size });

    const s = await status(true);
    expect(s.serial).toBe(3);
    expect(entry(s, 'oci').details).toMatchObject({ projects: 1, files: 1, source: 'summary' });
    expect(s.recent_uploads?.[0]).toMatchObject({ index: 'oci', project: 'team/app', version: 'v1', filename: image.manifest.descriptor.digest });
  });

  it('answer 404 for an unknown index route or project, with the reason', async () => {
    const route = await fetch(`${server.url}/+stats?index=no/such`);
    expect(route.status).toBe(404);
    expect(((await route.json()) as { message: string }).message).toMatch(/no index has the route "no\/such"/);
    const project = await fetch(`${server.url}/+stats?index=root/hosted&project=nothing-here`);
    expect(project.status).toBe(404);
    expect(((await project.json()) as { message: string }).message).toMatch(/no usage of project "nothing-here"/);
    expect((await fetch(`${server.url}/+stats?project=alpha`)).status).toBe(400);
    // Hostile queries get a 400 or a 404 with a reason, never a 500.
    for (const q of ['index=%ZZ', 'index=root/hosted&project=%', 'index[]=a', 'index=root/hosted&project=%00', `index=${'a'.repeat(3000)}`, 'index=a&index=b']) {
      const res = await fetch(`${server.url}/+stats?${q}`);
      expect([400, 404], q).toContain(res.status);
      expect(((await res.json()) as { message: string }).message.length).toBeGreaterThan(0);
    }
    for (const q of ['details=admin&details=admin', 'details=ADMIN', 'verbose=1']) expect((await fetch(`${server.url}/+status?${q}`)).status, q).toBe(400);
  });

  it('keep serial, counts and recent uploads through a restart, while the usage counters start again', async () => {
    const before = await status(true);
    await server.stop();
    server = await startVelodex({ dataDir });
    const after = await status(true);
    expect(after.serial).toBe(before.serial);
    expect(after.indexes.map((i) => i.details)).toEqual(before.indexes.map((i) => i.details));
    expect(after.recent_uploads).toEqual(before.recent_uploads);
    expect(after.started_at > before.started_at).toBe(true);
    const stats = await getJson<{ totals: Counters }>('/+stats');
    expect(Object.values(stats.totals).every((n) => n === 0)).toBe(true);
    expect((await fetch(`${server.url}/+stats?index=root/hosted&project=alpha`)).status).toBe(404);
  });

  it('rebuild a lost summary from the store by one scan on the next admin request', async () => {
    const before = await status(true);
    await server.stop();
    // As a store written before summaries existed: no summary for the OCI index.
    const { meta } = await serverStores(dataDir);
    expect(await meta.delete('observe/summary/oci')).toBe(true);
    server = await startVelodex({ dataDir });
    const after = await status(true);
    expect(entry(after, 'oci').details).toMatchObject({ projects: 1, files: 1, source: 'scan' });
    expect(after.recent_uploads).toEqual(before.recent_uploads);
    // The lost summary's serial cannot be recounted: only the other indexes' part remains.
    expect(after.serial).toBe(before.serial - entry(before, 'oci').serial);
  });
});
