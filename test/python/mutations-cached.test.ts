/**
 * Mutations of cached files through a virtual route with an upload target: yank and delete set
 * per-index overrides (no `volatile` needed, the cached data is untouched), restore and un-yank
 * take them back, while uploaded files of the same route keep the hosted rules. The upstream is a
 * second velodex serving PEP 691 JSON.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { cached, hosted, toml, virtual } from '../support/config.js';
import { startVelodex, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { postUpload } from './fixtures/upload-client.js';
import { detail, write } from './mutations-client.js';

const TOKEN = 'dev-token';
const UP_TOKEN = 'upstream-token';
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

let upstream: Velodex;
let server: Velodex;
let alpha10: BuiltProject;
let alpha11: BuiltProject;
let beta: BuiltProject;
let dev: string;

beforeAll(async () => {
  [alpha10, alpha11, beta] = await Promise.all([buildProject('alpha', '1.0'), buildProject('alpha', '1.1'), buildProject('beta', '1.0')]);
  upstream = await startVelodex({ config: toml(hosted('up', { token: UP_TOKEN })) });
  for (const file of [alpha10.wheel, alpha10.sdist, alpha11.wheel, alpha11.sdist]) {
    expect((await postUpload({ url: `${upstream.url}/root/up/`, token: UP_TOKEN, file })).status).toBe(200);
  }
  server = await startVelodex({
    config: toml(
      hosted('local', { token: TOKEN }),
      cached('mirror', `${upstream.url}/root/up/simple/`),
      virtual('dev', ['local', 'mirror'], { uploadTarget: 'local' }),
    ),
  });
  dev = `${server.url}/root/dev`;
  expect((await postUpload({ url: `${dev}/`, token: TOKEN, file: beta.wheel })).status).toBe(200);
});

afterAll(async () => {
  await server?.stop();
  await upstream?.stop();
});

const yankState = async (index: string) => Object.fromEntries((await detail(`${index}/simple/`, 'alpha')).files.map((f) => [f.filename, f.yanked]));

describe('cached files through a virtual route', () => {
  it('yank overrides the cached files of this route only', async () => {
    const res = await write('PUT', `${dev}/alpha/1.1/yank?reason=do%20not%20use`, { token: TOKEN });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ project: 'alpha', version: '1.1', action: 'yank', changed: 2 });
    expect(await yankState(dev)).toMatchObject({ [alpha11.wheelFilename]: 'do not use', [alpha10.wheelFilename]: false });
    // The cached index itself (and its stored data) is untouched.
    expect(await yankState(`${server.url}/root/mirror`)).toMatchObject({ [alpha11.wheelFilename]: false });
    const pip = await run(tool('pip'), ['install', '--dry-run', '--quiet', '--report', '-', '--no-cache-dir', '--index-url', `${dev}/simple/`, 'alpha'], { env: CLEAN_ENV });
    expect((JSON.parse(pip.stdout) as { install: { metadata: { version: string } }[] }).install[0]?.metadata.version).toBe('1.0');

    expect((await write('PUT', `${dev}/alpha/1.1/yank`, { token: TOKEN })).json).toMatchObject({ changed: 0 });
    expect((await write('DELETE', `${dev}/alpha/1.1/yank`, { token: TOKEN })).json).toMatchObject({ action: 'unyank', changed: 2 });
    expect(await yankState(dev)).toMatchObject({ [alpha11.wheelFilename]: false });
  });

  it('delete hides cached files without volatile; restore shows them again', async () => {
    const before = await detail(`${dev}/simple/`, 'alpha');
    const wheel11 = before.files.find((f) => f.filename === alpha11.wheelFilename)!;
    const del = await write('DELETE', `${dev}/alpha/1.1/`, { token: TOKEN });
    expect(del.status, del.text).toBe(200);
    expect(del.json).toMatchObject({ action: 'delete', changed: 2 });
    const hidden = await detail(`${dev}/simple/`, 'alpha');
    expect(hidden.versions).toEqual(['1.0']);
    expect(hidden.files.map((f) => f.filename)).not.toContain(alpha11.wheelFilename);
    expect((await fetch(new URL(wheel11.url, `${dev}/simple/alpha/`))).status).toBe(404);

    const restore = await write('PUT', `${dev}/alpha/1.1/restore`, { token: TOKEN });
    expect(restore.json).toMatchObject({ action: 'restore', changed: 2 });
    expect((await detail(`${dev}/simple/`, 'alpha')).versions).toEqual(['1.0', '1.1']);
    expect((await fetch(new URL(wheel11.url, `${dev}/simple/alpha/`))).status).toBe(200);
    expect((await write('PUT', `${dev}/alpha/1.1/restore`, { token: TOKEN })).json).toMatchObject({ changed: 0 });
  });

  it('uploaded files behind the same route still need a volatile index to be deleted', async () => {
    const res = await write('DELETE', `${dev}/beta/1.0/`, { token: TOKEN });
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ message: expect.stringMatching(/index local is not volatile/) as unknown });
    expect((await write('PUT', `${dev}/beta/yank`, { token: TOKEN })).json).toMatchObject({ changed: 1 });
    expect((await detail(`${server.url}/root/local/simple/`, 'beta')).files[0]?.yanked).toBe(true);
  });

  it('writes to the cached route itself are refused (405)', async () => {
    expect((await write('PUT', `${server.url}/root/mirror/alpha/yank`, { token: TOKEN })).status).toBe(405);
  });
});
