/**
 * Yank, un-yank, delete, restore and promote on hosted indexes, through the real server with
 * real uploads: what pip then installs, what the Simple pages and downloads show, every status of
 * the spec's error table for these paths with its body, and concurrent mutations and uploads of
 * one project that both land.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// `hosted` names the hosted index's URL below.
import { cached, hosted as hostedIndex, toml, virtual } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { projectRecord } from './fixtures/store.js';
import { postUpload, sha256File } from './fixtures/upload-client.js';
import { detail, get, listed, write } from './mutations-client.js';

const TOKEN = 'release-token';
const SCRATCH_TOKEN = 'scratch-token';
const STAGING_TOKEN = 'staging-token';
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

let server: Velodex;
let hosted: string;
let alpha10: BuiltProject;
let alpha11: BuiltProject;
let alpha12: BuiltProject;
let alpha20: BuiltProject;
let gammaA: BuiltProject;
let gammaB: BuiltProject;

async function upload(route: string, token: string, ...files: string[]): Promise<void> {
  for (const file of files) {
    const res = await postUpload({ url: `${server.url}/${route}/`, token, file });
    if (res.status !== 200) throw new Error(`upload of ${file} to ${route}: ${res.status} ${res.body}`);
  }
}

beforeAll(async () => {
  [alpha10, alpha11, alpha12, alpha20, gammaA, gammaB] = await Promise.all([
    buildProject('alpha', '1.0'),
    buildProject('alpha', '1.1'),
    buildProject('alpha', '1.2'),
    buildProject('alpha', '2.0'),
    buildProject('gamma', '1.0', { variant: 'staging build' }),
    buildProject('gamma', '1.0', { variant: 'release build' }),
  ]);
  server = await startVelodex({
    config: toml(
      hostedIndex('hosted', { token: TOKEN }),
      hostedIndex('scratch', { token: SCRATCH_TOKEN, volatile: true }),
      hostedIndex('staging', { token: STAGING_TOKEN }),
      hostedIndex('locked'),
      cached('mirror', 'http://127.0.0.1:9/simple/'),
      virtual('view', ['hosted']),
    ),
  });
  hosted = `${server.url}/root/hosted`;
  await upload('root/hosted', TOKEN, alpha10.wheel, alpha10.sdist, alpha11.wheel, alpha11.sdist, gammaB.wheel);
  await upload('root/scratch', SCRATCH_TOKEN, alpha10.wheel, alpha10.sdist, alpha11.wheel);
  await upload('root/staging', STAGING_TOKEN, alpha20.wheel, alpha20.sdist, gammaA.wheel);
});

afterAll(async () => {
  await server?.stop();
});

/** What pip would install for `requirement` from `index` (a dry run with a JSON report). */
async function pipPicks(index: string, requirement: string): Promise<string> {
  const res = await run(tool('pip'), ['install', '--dry-run', '--quiet', '--report', '-', '--no-cache-dir', '--index-url', index, requirement], { env: CLEAN_ENV });
  const report = JSON.parse(res.stdout) as { install: { metadata: { name: string; version: string } }[] };
  return report.install.map((i) => `${i.metadata.name}==${i.metadata.version}`).join(' ');
}

describe('yank and un-yank', () => {
  it('yanks one version with a reason from the query; pip skips it unless pinned', async () => {
    const res = await write('PUT', `${hosted}/alpha/1.1/yank?reason=broken%20import`, { token: TOKEN });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ project: 'alpha', version: '1.1', action: 'yank', changed: 2, files: [alpha11.sdistFilename, alpha11.wheelFilename].sort() });

    const page = await detail(`${hosted}/simple/`, 'alpha');
    const state = Object.fromEntries(page.files.map((f) => [f.filename, f.yanked]));
    expect(state).toEqual({
      [alpha10.wheelFilename]: false,
      [alpha10.sdistFilename]: false,
      [alpha11.wheelFilename]: 'broken import',
      [alpha11.sdistFilename]: 'broken import',
    });
    const html = await get(`${hosted}/simple/alpha/`, 'text/html');
    expect(html.text).toContain(`data-yanked="broken import">${alpha11.wheelFilename}<`);
    const legacy = await get(`${hosted}/alpha/1.1/json`, 'application/json');
    expect(legacy.json).toMatchObject({ info: { yanked: true, yanked_reason: 'broken import' } });

    // A real install into a fresh environment takes the newest version that is not yanked ...
    const venv = join(tempDir('velodex-venv-'), 'venv');
    await run(tool('python'), ['-m', 'venv', venv]);
    const installed = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${hosted}/simple/`, 'alpha'], { env: CLEAN_ENV });
    expect(installed.stdout).toMatch(/Successfully installed alpha-1\.0\b/);
    // ... and a pinned requirement still gets the yanked one (PEP 592), with pip's warning.
    const pinned = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${hosted}/simple/`, 'alpha==1.1'], { env: CLEAN_ENV });
    expect(pinned.stdout + pinned.stderr).toMatch(/yanked/i);
    expect(pinned.stdout).toMatch(/Successfully installed alpha-1\.1\b/);
  });

  it('yanking again changes nothing and says so', async () => {
    const res = await write('PUT', `${hosted}/alpha/1.1/yank`, { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ action: 'yank', changed: 0, files: [] });
    expect((await detail(`${hosted}/simple/`, 'alpha')).files.find((f) => f.filename === alpha11.wheelFilename)?.yanked).toBe('broken import');
  });

  it('un-yanks with DELETE .../yank; pip picks the version again', async () => {
    const res = await write('DELETE', `${hosted}/alpha/1.1/yank`, { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ project: 'alpha', version: '1.1', action: 'unyank', changed: 2 });
    expect((await detail(`${hosted}/simple/`, 'alpha')).files.every((f) => f.yanked === false)).toBe(true);
    expect(await pipPicks(`${hosted}/simple/`, 'alpha')).toBe('alpha==1.1');
  });

  it('yanks a whole project, taking the reason from a JSON body; a text body works too', async () => {
    const res = await write('PUT', `${hosted}/Alpha/yank`, { token: TOKEN, body: JSON.stringify({ reason: 'superseded' }), contentType: 'application/json' });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ project: 'alpha', action: 'yank', changed: 4 });
    expect(res.json).not.toHaveProperty('version');
    const page = await detail(`${hosted}/simple/`, 'alpha');
    expect(page.files.map((f) => f.yanked)).toEqual(['superseded', 'superseded', 'superseded', 'superseded']);
    // Every file yanked: pip finds nothing unpinned.
    const none = await run(tool('pip'), ['install', '--dry-run', '--no-cache-dir', '--index-url', `${hosted}/simple/`, 'alpha'], { env: CLEAN_ENV, allowFailure: true });
    expect(none.code).not.toBe(0);

    expect((await write('DELETE', `${hosted}/alpha/yank`, { token: TOKEN })).json).toMatchObject({ changed: 4 });
    const text = await write('PUT', `${hosted}/alpha/1.0/yank/`, { token: TOKEN, body: 'CVE-2099-0001\n', contentType: 'text/plain' });
    expect(text.json).toMatchObject({ changed: 2 });
    expect((await detail(`${hosted}/simple/`, 'alpha')).files.find((f) => f.filename === alpha10.wheelFilename)?.yanked).toBe('CVE-2099-0001');
    expect((await write('DELETE', `${hosted}/alpha/1.0/yank`, { token: TOKEN })).json).toMatchObject({ changed: 2 });
  });

  it('matches versions by PEP 440 normalisation', async () => {
    const res = await write('PUT', `${hosted}/alpha/1.1.0/yank`, { token: TOKEN });
    expect(res.json).toMatchObject({ version: '1.1.0', changed: 2 });
    expect((await write('DELETE', `${hosted}/alpha/v1.1/yank`, { token: TOKEN })).json).toMatchObject({ changed: 2 });
  });
});

describe('delete and restore', () => {
  it('refuses to delete uploads on an index that is not volatile (403) and changes nothing', async () => {
    const res = await write('DELETE', `${hosted}/alpha/1.0/`, { token: TOKEN });
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ statusCode: 403, message: expect.stringMatching(/index hosted is not volatile/) as unknown });
    expect((await detail(`${hosted}/simple/`, 'alpha')).files).toHaveLength(4);
  });

  it('deletes one version on a volatile index: gone from the page, its download 404s', async () => {
    const scratch = `${server.url}/root/scratch`;
    const before = await detail(`${scratch}/simple/`, 'alpha');
    const wheel = before.files.find((f) => f.filename === alpha10.wheelFilename);
    expect(wheel).toBeDefined();
    expect((await fetch(new URL(wheel!.url, `${scratch}/simple/alpha/`))).status).toBe(200);

    const res = await write('DELETE', `${scratch}/alpha/1.0/`, { token: SCRATCH_TOKEN });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ project: 'alpha', version: '1.0', action: 'delete', changed: 2, files: [alpha10.sdistFilename, alpha10.wheelFilename].sort() });

    const after = await detail(`${scratch}/simple/`, 'alpha');
    expect(after.files.map((f) => f.filename)).toEqual([alpha11.wheelFilename]);
    expect(after.versions).toEqual(['1.1']);
    expect((await fetch(new URL(wheel!.url, `${scratch}/simple/alpha/`))).status).toBe(404);
    expect(await pipPicks(`${scratch}/simple/`, 'alpha')).toBe('alpha==1.1');
    // Deleting again: nothing matches that version any more.
    expect((await write('DELETE', `${scratch}/alpha/1.0/`, { token: SCRATCH_TOKEN })).status).toBe(404);
  });

  it('restore has nothing to restore for uploaded files (changed 0)', async () => {
    const res = await write('PUT', `${server.url}/root/scratch/alpha/restore`, { token: SCRATCH_TOKEN });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ project: 'alpha', action: 'restore', changed: 0, files: [] });
  });

  it('deleting a whole project removes it from the project list', async () => {
    const scratch = `${server.url}/root/scratch`;
    const res = await write('DELETE', `${scratch}/alpha`, { token: SCRATCH_TOKEN });
    expect(res.json).toMatchObject({ action: 'delete', changed: 1 });
    expect(await listed(`${scratch}/simple/`)).toEqual([]);
    expect((await get(`${scratch}/simple/alpha/`)).status).toBe(404);
    expect(await projectRecord(server.dataDir, 'alpha', 'scratch')).toBeNull();
    // The same filename may be uploaded again afterwards.
    await upload('root/scratch', SCRATCH_TOKEN, alpha10.wheel);
    expect((await detail(`${scratch}/simple/`, 'alpha')).files.map((f) => f.filename)).toEqual([alpha10.wheelFilename]);
  });
});

describe('promote', () => {
  it('copies a release from the staging route into this route, once', async () => {
    const url = `${hosted}/alpha/2.0/promote?from=root/staging`;
    const res = await write('PUT', url, { token: TOKEN });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ project: 'alpha', version: '2.0', action: 'promote', from: 'root/staging', changed: 2, files: [alpha20.sdistFilename, alpha20.wheelFilename].sort() });
    const page = await detail(`${hosted}/simple/`, 'alpha');
    expect(page.versions).toContain('2.0');
    const wheel = page.files.find((f) => f.filename === alpha20.wheelFilename);
    expect(wheel?.hashes.sha256).toBe(await sha256File(alpha20.wheel));
    const download = await fetch(new URL(wheel!.url, `${hosted}/simple/alpha/`));
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).length).toBe(wheel!.size);
    expect(await pipPicks(`${hosted}/simple/`, 'alpha')).toBe('alpha==2.0');

    // Same bytes already there: no change. A leading slash in `from` is fine.
    const again = await write('PUT', `${hosted}/alpha/2.0/promote?from=/root/staging/`, { token: TOKEN });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ changed: 0, files: [] });
  });

  it('answers 409 when the target holds the filename with other bytes, and promotes nothing', async () => {
    const before = await projectRecord(server.dataDir, 'gamma');
    const res = await write('PUT', `${hosted}/gamma/1.0/promote?from=root/staging`, { token: TOKEN });
    expect(res.status).toBe(409);
    expect(res.json).toMatchObject({ statusCode: 409, message: expect.stringMatching(new RegExp(`${gammaA.wheelFilename} already exists in index hosted with different content`)) as unknown });
    expect(await projectRecord(server.dataDir, 'gamma')).toEqual(before);
  });

  it('answers 400 for a missing or bad from, 404 when the source has no such release', async () => {
    const missing = await write('PUT', `${hosted}/alpha/2.0/promote`, { token: TOKEN });
    expect(missing.status).toBe(400);
    expect(missing.json).toMatchObject({ message: expect.stringMatching(/needs \?from=<route>/) as unknown });
    const empty = await write('PUT', `${hosted}/alpha/2.0/promote?from=`, { token: TOKEN });
    expect(empty.status).toBe(400);
    const unknown = await write('PUT', `${hosted}/alpha/2.0/promote?from=root/nowhere`, { token: TOKEN });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({ message: expect.stringMatching(/not the route of a Python index/) as unknown });
    const itself = await write('PUT', `${hosted}/alpha/2.0/promote?from=root/hosted`, { token: TOKEN });
    expect(itself.status).toBe(400);

    const noVersion = await write('PUT', `${hosted}/alpha/9.9/promote?from=root/staging`, { token: TOKEN });
    expect(noVersion.status).toBe(404);
    expect(noVersion.json).toMatchObject({ message: expect.stringMatching(/root\/staging has no uploaded files of alpha 9\.9/) as unknown });
    const noProject = await write('PUT', `${hosted}/nothing/1.0/promote?from=root/staging`, { token: TOKEN });
    expect(noProject.status).toBe(404);
    // A cached route has no uploaded records at all.
    const cached = await write('PUT', `${hosted}/alpha/2.0/promote?from=root/mirror`, { token: TOKEN });
    expect(cached.status).toBe(404);
  });

  it('authenticates against the target route, not the source', async () => {
    const res = await write('PUT', `${hosted}/alpha/2.0/promote?from=root/staging`, { token: STAGING_TOKEN });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
  });
});

describe('refusals', () => {
  const paths: [string, 'PUT' | 'DELETE', string][] = [
    ['yank', 'PUT', 'alpha/1.0/yank'],
    ['un-yank', 'DELETE', 'alpha/1.0/yank'],
    ['delete', 'DELETE', 'alpha/1.0/'],
    ['restore', 'PUT', 'alpha/restore'],
    ['promote', 'PUT', 'alpha/2.0/promote?from=root/staging'],
  ];

  it.each(paths)('%s: 401 without credentials and with a wrong token, with a Basic challenge', async (_name, method, path) => {
    for (const token of [null, 'wrong']) {
      const res = await write(method, `${hosted}/${path}`, { token });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
      expect(res.json).toMatchObject({ statusCode: 401, message: expect.stringMatching(token ? /token is wrong/ : /authentication required/) as unknown });
    }
  });

  it.each(paths)('%s: 405 on a cached index and on a virtual index without an upload target', async (_name, method, path) => {
    for (const route of ['root/mirror', 'root/view']) {
      const res = await write(method, `${server.url}/${route}/${path}`, { token: TOKEN });
      expect(res.status).toBe(405);
      // Only the path's reads remain: a one- or two-segment path is also a (404) read; a
      // longer one takes no read at all, an empty Allow.
      expect(res.headers.get('allow')).toBe(path.split('?')[0]!.replace(/\/$/, '').split('/').length <= 2 ? 'GET, HEAD' : '');
      expect(res.json).toMatchObject({ statusCode: 405, message: 'this index does not accept writes' });
    }
  });

  it.each(paths)('%s: 403 on a hosted index without an upload token', async (_name, method, path) => {
    const res = await write(method, `${server.url}/root/locked/${path}`, { token: TOKEN });
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ statusCode: 403, message: expect.stringMatching(/uploads are disabled/) as unknown });
  });

  it('404 for an unknown project or version', async () => {
    const project = await write('PUT', `${hosted}/nothing-here/yank`, { token: TOKEN });
    expect(project.status).toBe(404);
    expect(project.json).toMatchObject({ statusCode: 404, message: expect.stringMatching(/project "nothing-here" not found/) as unknown });
    const version = await write('DELETE', `${hosted}/alpha/7.7/yank`, { token: TOKEN });
    expect(version.status).toBe(404);
    expect(version.json).toMatchObject({ message: expect.stringMatching(/has no version "7\.7"/) as unknown });
  });

  it('reads keep working on paths that share a shape with a mutation', async () => {
    expect((await write('PUT', `${hosted}/simple/`, { token: TOKEN })).status).toBe(405);
    expect((await get(`${hosted}/simple/alpha/`)).status).toBe(200);
    expect((await get(`${hosted}/alpha/json`, 'application/json')).status).toBe(200);
  });
});

describe('concurrency', () => {
  it('concurrent yanks and uploads of one project all land', async () => {
    const results = await Promise.all([
      postUpload({ url: `${hosted}/`, token: TOKEN, file: alpha12.wheel }),
      write('PUT', `${hosted}/alpha/1.0/yank?reason=a`, { token: TOKEN }),
      postUpload({ url: `${hosted}/`, token: TOKEN, file: alpha12.sdist }),
      write('PUT', `${hosted}/alpha/1.1/yank?reason=b`, { token: TOKEN }),
      write('PUT', `${hosted}/alpha/2.0/yank?reason=c`, { token: TOKEN }),
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const record = await projectRecord(server.dataDir, 'alpha');
    const yanked = Object.fromEntries(Object.values(record!.files).map((f) => [f.filename, f.yanked ?? false]));
    expect(yanked).toEqual({
      [alpha10.wheelFilename]: 'a',
      [alpha10.sdistFilename]: 'a',
      [alpha11.wheelFilename]: 'b',
      [alpha11.sdistFilename]: 'b',
      [alpha20.wheelFilename]: 'c',
      [alpha20.sdistFilename]: 'c',
      [alpha12.wheelFilename]: false,
      [alpha12.sdistFilename]: false,
    });
    expect(await pipPicks(`${hosted}/simple/`, 'alpha')).toBe('alpha==1.2');
  });
});
