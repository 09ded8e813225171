/**
 * `[index.policy]` on Python indexes through the real server: files are uploaded while no policy
 * is set, then the server restarts over the same data with policies (the way a platform team
 * tightens an index), and the project list, detail pages, legacy JSON, downloads, uploads, pip
 * and twine show the rules: deny-projects, allow-projects, max-file-size, min-release-age.
 */
import { statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, toml, type PolicyOptions } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { postUpload, sha256File } from './fixtures/upload-client.js';
import { detail, get, listed, SIMPLE_JSON } from './mutations-client.js';

const TOKEN = 'policy-token';
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', NO_COLOR: '1', COLUMNS: '200' };
const INDEXES = ['hosted', 'fresh', 'allowlist', 'soon'];

let server: Velodex;
let alpha: BuiltProject;
let evil: BuiltProject;
let gamma: BuiltProject;
let limit: number;
let big: { filename: string; path: string };
let small: { filename: string; path: string };
const dataDir = tempDir('velodex-policy-');

function config(policies: Record<string, PolicyOptions>): string {
  return toml(...INDEXES.map((name) => hosted(name, { token: TOKEN, policy: policies[name] })));
}

async function upload(index: string, file: string) {
  return postUpload({ url: `${server.url}/root/${index}/`, token: TOKEN, file });
}

beforeAll(async () => {
  [alpha, evil, gamma] = await Promise.all([buildProject('alpha', '1.0'), buildProject('evil-thing', '1.0'), buildProject('gamma', '1.0')]);
  // Before the policy: everything is accepted.
  server = await startVelodex({ config: config({}), dataDir });
  for (const [index, file] of [
    ['hosted', alpha.wheel],
    ['hosted', alpha.sdist],
    ['hosted', evil.wheel],
    ['fresh', alpha.wheel],
    ['allowlist', alpha.wheel],
    ['allowlist', gamma.wheel],
  ] as const) {
    expect((await upload(index, file)).status).toBe(200);
  }
  await server.stop();

  // The larger of alpha's two files is over max-file-size, the smaller is not.
  const files = [
    { filename: alpha.wheelFilename, path: alpha.wheel },
    { filename: alpha.sdistFilename, path: alpha.sdist },
  ].sort((a, b) => statSync(a.path).size - statSync(b.path).size);
  [small, big] = [files[0]!, files[1]!];
  limit = statSync(small.path).size;
  expect(statSync(big.path).size).toBeGreaterThan(limit);

  server = await startVelodex({
    dataDir,
    config: config({
      hosted: { denyProjects: ['Evil_*'], maxFileSize: limit },
      fresh: { minReleaseAge: '1h' },
      allowlist: { allowProjects: ['alpha', 'be*'] },
      soon: { minReleaseAge: 3, denyProjects: ['evil-*'] },
    }),
  });
});

afterAll(async () => {
  await server?.stop();
});

const url = (index: string) => `${server.url}/root/${index}`;

describe('deny-projects', () => {
  it('omits the project from the JSON and HTML project lists', async () => {
    expect(await listed(`${url('hosted')}/simple/`)).toEqual(['alpha']);
    const html = await get(`${url('hosted')}/simple/`, 'text/html');
    expect(html.text).toContain('>alpha<');
    expect(html.text).not.toContain('evil');
  });

  it('answers the detail page and legacy JSON with 403 and the denial object', async () => {
    const denial = {
      action: 'serve',
      project: 'evil-thing',
      rule: 'deny-projects',
      field: 'name',
      reason: 'project evil-thing matches "Evil_*" in deny-projects of this index',
    };
    for (const accept of [SIMPLE_JSON, 'text/html']) {
      const res = await get(`${url('hosted')}/simple/evil-thing/`, accept);
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      // A Simple answer, if a refusal: its representation still depends on Accept.
      expect(res.headers.get('vary')).toBe('Accept');
      expect(res.json).toEqual(denial);
    }
    const legacy = await get(`${url('hosted')}/evil-thing/json`, 'application/json');
    expect(legacy.status).toBe(403);
    expect(legacy.json).toEqual(denial);
  });

  it('denies a direct download with the file named in the denial', async () => {
    const sha = await sha256File(evil.wheel);
    for (const suffix of ['', '.metadata']) {
      const res = await get(`${url('hosted')}/files/${sha}/${evil.wheelFilename}${suffix}`, '*/*');
      expect(res.status).toBe(403);
      expect(res.json).toMatchObject({ action: 'serve', project: 'evil-thing', filename: evil.wheelFilename, version: '1.0', rule: 'deny-projects' });
    }
    const inspect = await get(`${url('hosted')}/inspect/${sha}/${evil.wheelFilename}`, '*/*');
    expect(inspect.status).toBe(403);
  });

  it('pip does not find the project', async () => {
    const res = await run(tool('pip'), ['install', '-vvv', '--dry-run', '--no-cache-dir', '--index-url', `${url('hosted')}/simple/`, 'evil-thing'], {
      env: CLEAN_ENV,
      allowFailure: true,
    });
    expect(res.code).not.toBe(0);
    expect(res.stdout + res.stderr).toMatch(/403/);
    expect(res.stdout + res.stderr).toMatch(/No matching distribution found for evil-thing/);
  });

  it('refuses uploads of the project with the denial object (action upload), and twine shows it', async () => {
    // (On "hosted" max-file-size would stop the upload first, while it streams.)
    const res = await upload('soon', evil.sdist);
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toEqual({
      action: 'upload',
      project: 'evil-thing',
      filename: evil.sdistFilename,
      version: '1.0',
      rule: 'deny-projects',
      field: 'name',
      reason: 'project evil-thing matches "evil-*" in deny-projects of this index',
    });
    const twine = await run(
      tool('twine'),
      ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${url('soon')}/`, '-u', '__token__', '-p', TOKEN, evil.sdist],
      { allowFailure: true, env: CLEAN_ENV },
    );
    expect(twine.code).not.toBe(0);
    expect(twine.stdout + twine.stderr).toMatch(/403 Forbidden/);
    expect(twine.stdout + twine.stderr).toMatch(/deny-projects/);
  });
});

describe('max-file-size on the read side', () => {
  it('omits the file over the limit from the detail page and legacy JSON', async () => {
    const page = await detail(`${url('hosted')}/simple/`, 'alpha');
    expect(page.files.map((f) => f.filename)).toEqual([small.filename]);
    expect(page.versions).toEqual(['1.0']);
    const legacy = await get(`${url('hosted')}/alpha/json`, 'application/json');
    const releases = (legacy.json as { releases: Record<string, { filename: string }[]> }).releases;
    expect(releases['1.0']?.map((f) => f.filename)).toEqual([small.filename]);
  });

  it('denies its download with the file-level denial', async () => {
    const res = await get(`${url('hosted')}/files/${await sha256File(big.path)}/${big.filename}`, '*/*');
    expect(res.status).toBe(403);
    expect(res.json).toEqual({
      action: 'serve',
      project: 'alpha',
      filename: big.filename,
      version: '1.0',
      rule: 'max-file-size',
      field: 'size',
      reason: `${big.filename} is larger than the max-file-size of ${limit} bytes allowed on this index`,
    });
    expect((await fetch(`${url('hosted')}/files/${await sha256File(small.path)}/${small.filename}`)).status).toBe(200);
  });
});

describe('allow-projects', () => {
  it('lists only allowed projects and denies the others', async () => {
    expect(await listed(`${url('allowlist')}/simple/`)).toEqual(['alpha']);
    const res = await get(`${url('allowlist')}/simple/gamma/`);
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ action: 'serve', project: 'gamma', rule: 'allow-projects', field: 'name' });
    const up = await upload('allowlist', gamma.sdist);
    expect(up.status).toBe(403);
    expect(JSON.parse(up.body)).toMatchObject({ action: 'upload', project: 'gamma', rule: 'allow-projects' });
  });
});

describe('min-release-age', () => {
  it('hides files younger than the age: no files and no versions, download denied', async () => {
    const page = await detail(`${url('fresh')}/simple/`, 'alpha');
    expect(page.files).toEqual([]);
    expect(page.versions).toEqual([]);
    expect(await listed(`${url('fresh')}/simple/`)).toEqual(['alpha']);
    const res = await get(`${url('fresh')}/files/${await sha256File(alpha.wheel)}/${alpha.wheelFilename}`, '*/*');
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ action: 'serve', project: 'alpha', filename: alpha.wheelFilename, version: '1.0', rule: 'min-release-age', field: 'upload-time' });
    expect((res.json as { reason: string }).reason).toMatch(/serves files only once they are 1h old/);
    const pip = await run(tool('pip'), ['install', '--dry-run', '--no-cache-dir', '--index-url', `${url('fresh')}/simple/`, 'alpha'], { env: CLEAN_ENV, allowFailure: true });
    expect(pip.code).not.toBe(0);
  });

  it('serves a file once it is old enough, also where a page was already rendered', async () => {
    expect((await upload('soon', alpha.wheel)).status).toBe(200);
    const fileUrl = `${url('soon')}/files/${await sha256File(alpha.wheel)}/${alpha.wheelFilename}`;
    expect((await detail(`${url('soon')}/simple/`, 'alpha')).files).toEqual([]);
    expect((await get(fileUrl, '*/*')).status).toBe(403);
    const deadline = Date.now() + 15_000;
    let files: string[] = [];
    while (Date.now() < deadline) {
      files = (await detail(`${url('soon')}/simple/`, 'alpha')).files.map((f) => f.filename);
      if (files.length > 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(files).toEqual([alpha.wheelFilename]);
    expect((await fetch(fileUrl)).status).toBe(200);
  });
});
