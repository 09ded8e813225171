/**
 * PEP 792 project status as a gate on writes: through a virtual route whose cached member's
 * upstream marks a project quarantined (PEP 691 JSON) or archived (the HTML meta tag), an upload
 * (twine's, and a bare one) and a promotion answer 403 with a message a person can act on; a
 * deprecated project, and one the upstream does not know, take uploads as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Origin } from '../roles/origin.js';
import { cached, hosted, toml, virtual } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { storeState } from './fixtures/store.js';
import { postUpload } from './fixtures/upload-client.js';

const TOKEN = 'dev-token';
const STAGING_TOKEN = 'staging-token';
const JSON_TYPE = 'application/vnd.pypi.simple.v1+json';

let origin: Origin;
let server: Velodex;
let dev: string;
let delta: BuiltProject;
let epsilon: BuiltProject;
let zeta: BuiltProject;
let eta: BuiltProject;

function jsonPage(name: string, status: { status: string; reason?: string }): string {
  return JSON.stringify({ meta: { 'api-version': '1.4' }, name, files: [], 'project-status': status });
}

beforeAll(async () => {
  [delta, epsilon, zeta, eta] = await Promise.all([buildProject('delta', '1.0'), buildProject('epsilon', '1.0'), buildProject('zeta', '1.0'), buildProject('eta', '1.0')]);
  origin = await new Origin().start();
  const json = { 'content-type': JSON_TYPE };
  origin.docs.set('/simple/delta/', { body: jsonPage('delta', { status: 'quarantined', reason: 'malware reported' }), headers: json });
  origin.docs.set('/simple/zeta/', { body: jsonPage('zeta', { status: 'deprecated', reason: 'use eta' }), headers: json });
  origin.docs.set('/simple/epsilon/', {
    body: '<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.4"><meta name="pypi:project-status" content="archived"><title>Links for epsilon</title></head><body><h1>Links for epsilon</h1></body></html>',
    headers: { 'content-type': 'text/html' },
  });
  server = await startVelodex({
    config: toml(
      hosted('local', { token: TOKEN }),
      hosted('staging', { token: STAGING_TOKEN }),
      cached('mirror', `${origin.url}/simple/`),
      virtual('dev', ['local', 'mirror'], { uploadTarget: 'local' }),
    ),
  });
  dev = `${server.url}/root/dev`;
});

afterAll(async () => {
  await server?.stop();
  await origin?.close();
});

const localProjects = async () => (await storeState(server.dataDir, 'local')).projects;

describe('project status on writes', () => {
  it('refuses twine an upload to a project the upstream quarantined, with 403 and the reason', async () => {
    const out = await run(
      tool('twine'),
      ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${dev}/`, '-u', '__token__', '-p', TOKEN, delta.wheel],
      { allowFailure: true, env: { NO_COLOR: '1', COLUMNS: '300' }, timeoutMs: 120_000 },
    );
    expect(out.code).not.toBe(0);
    const said = (out.stdout + out.stderr).replace(/\s+/g, ' ');
    expect(said).toMatch(/403 Forbidden/);
    expect(said).toMatch(/project "delta" has project status "quarantined" on root\/dev \(reason given: malware reported\)/);
    expect(await localProjects()).not.toContain('delta');
  });

  it('refuses an upload to a project the upstream archived (HTML meta), with a JSON reason', async () => {
    const res = await postUpload({ url: `${dev}/`, token: TOKEN, file: epsilon.sdist });
    expect(res.status, res.body).toBe(403);
    expect((JSON.parse(res.body) as { message: string }).message).toMatch(/"epsilon" has project status "archived".*expects no new releases.*Publish under another project name/);
    expect(await localProjects()).not.toContain('epsilon');
  });

  it('refuses to promote a release into a route where the project is quarantined', async () => {
    // The staging route has no upstream: the same project uploads there.
    expect((await postUpload({ url: `${server.url}/root/staging/`, token: STAGING_TOKEN, file: delta.wheel })).status).toBe(200);
    const res = await fetch(`${dev}/delta/1.0/promote?from=root/staging`, { method: 'PUT', headers: { authorization: basicAuth(TOKEN) } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { message: string }).message).toMatch(/"quarantined"/);
    expect(await localProjects()).not.toContain('delta');
  });

  it('takes uploads for a deprecated project and for one the upstream does not know', async () => {
    for (const file of [zeta.wheel, eta.wheel]) {
      const res = await postUpload({ url: `${dev}/`, token: TOKEN, file });
      expect(res.status, res.body).toBe(200);
    }
    expect(await localProjects()).toEqual(expect.arrayContaining(['zeta', 'eta']));
  });
});
