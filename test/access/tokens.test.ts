/**
 * Named tokens (`[[index.token]]`) through the real clients: twine and uv publish, pip, crane.
 * One server with a hosted Python index and a hosted OCI index, each with its upload token and
 * named tokens of every kind: one that uploads some projects only, one that only deletes, one
 * past its expiry. What each may do, the message of each refusal, the actor webhooks and logs
 * name, and that no token's secret ever shows in a log line, a status, stats, metrics or a
 * webhook after a run that used them all.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, oci, toml } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { Receiver } from '../events/receiver.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { write } from '../python/mutations-client.js';

const SECRETS = {
  team: 'team-upload-token-7c1e',
  ciUpload: 'ci-upload-secret-1f2a9d',
  opsDelete: 'ops-delete-secret-88b0e4',
  old: 'old-secret-3e5d71',
  images: 'images-upload-token-5a0f',
  ciPush: 'ci-push-secret-c2d4e6',
  cleaner: 'cleaner-secret-9f8e7d',
};

const receiver = new Receiver();
let server: Velodex;
let work: string;
let alpha: BuiltProject;
let beta: BuiltProject;
let other: BuiltProject;

beforeAll(async () => {
  await receiver.start();
  [alpha, beta, other] = await Promise.all([buildProject('team-alpha', '1.0'), buildProject('team_beta', '1.0'), buildProject('other', '1.0')]);
  work = tempDir('velodex-tokens-');
  server = await startVelodex({
    env: { OPS_DELETE_SECRET: SECRETS.opsDelete },
    config: toml(
      hosted('team', {
        token: SECRETS.team,
        volatile: true,
        tokens: [
          { name: 'ci-upload', secret: SECRETS.ciUpload, scopes: ['upload'], projects: ['Team-*'] },
          { name: 'ops-delete', secret: { env: 'OPS_DELETE_SECRET' }, scopes: ['delete'] },
          { name: 'old', secret: SECRETS.old, scopes: ['upload', 'delete'], expires: '2020-01-01' },
        ],
        webhooks: [{ url: `${receiver.url}/hook` }],
      }),
      oci.hosted('images', {
        route: 'team/images',
        token: SECRETS.images,
        tokens: [
          { name: 'ci-push', secret: SECRETS.ciPush, scopes: ['upload'], projects: ['app', 'app/*'] },
          { name: 'cleaner', secret: SECRETS.cleaner, scopes: ['delete'] },
          { name: 'old', secret: SECRETS.old, scopes: ['upload'], expires: '2020-01-01T00:00:00Z' },
        ],
        webhooks: [{ url: `${receiver.url}/oci-hook` }],
      }),
    ),
  });
});

afterAll(async () => {
  await server?.stop();
  await receiver.stop();
});

const indexUrl = () => `${server.url}/root/team/`;

function twine(file: string, password: string): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', indexUrl(), '-u', '__token__', '-p', password, file], {
    allowFailure: true,
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

async function listed(project: string): Promise<string[]> {
  const res = await fetch(`${server.url}/root/team/simple/${project}/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
  if (res.status === 404) return [];
  return ((await res.json()) as { files: Array<{ filename: string }> }).files.map((f) => f.filename);
}

describe('named tokens on a hosted Python index', () => {
  it('a token with the upload scope uploads the projects its globs match (names normalised), with uv publish and twine', async () => {
    const uv = await run(tool('uv'), ['publish', '--publish-url', indexUrl(), '--token', SECRETS.ciUpload, alpha.wheel], {
      allowFailure: true,
      env: { UV_CACHE_DIR: join(work, 'uv-cache'), NO_COLOR: '1' },
    });
    expect(uv.code, uv.stderr).toBe(0);
    const tw = await twine(beta.wheel, SECRETS.ciUpload);
    expect(tw.code, tw.stdout + tw.stderr).toBe(0);
    expect(await listed('team-alpha')).toEqual([alpha.wheelFilename]);
    expect(await listed('team-beta')).toEqual([beta.wheelFilename]);
    const pip = await run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--dest', join(work, 'pip'), '--index-url', `${server.url}/root/team/simple/`, 'team-alpha'], {
      env: { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1' },
    });
    expect(pip.stdout).toContain('Saved');
    const hooks = await receiver.waitFor('/hook', 2);
    expect(hooks.map((h) => h.json.actor)).toEqual(['token:ci-upload', 'token:ci-upload']);
  });

  it('refuses a project outside its globs with 403 naming the token and its projects, and stores nothing', async () => {
    const tw = await twine(other.wheel, SECRETS.ciUpload);
    expect(tw.code).not.toBe(0);
    expect(tw.stdout + tw.stderr).toMatch(/403 Forbidden[\s\S]*the token "ci-upload" may not upload "other" \(its projects: Team-\*\)/);
    expect(await listed('other')).toEqual([]);
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"root\/team","method":"POST","client":"[^"]+","reason":"insufficient-scope","token":"ci-upload"/);
  });

  it('a token without the upload scope may not upload; one without delete may not yank', async () => {
    const tw = await twine(other.wheel, SECRETS.opsDelete);
    expect(tw.stdout + tw.stderr).toMatch(/403 Forbidden[\s\S]*the token "ops-delete" may not upload \(its scopes: delete\)/);
    const yank = await write('PUT', `${indexUrl()}team-alpha/1.0/yank`, { token: SECRETS.ciUpload });
    expect(yank.status).toBe(403);
    expect(yank.json).toMatchObject({ message: 'the token "ci-upload" may not delete, yank, restore or promote (its scopes: upload)' });
  });

  it('a token with the delete scope yanks and deletes any project, named as the actor of its events', async () => {
    const yank = await write('PUT', `${indexUrl()}team-alpha/1.0/yank`, { token: SECRETS.opsDelete });
    expect(yank.status, yank.text).toBe(200);
    const del = await write('DELETE', `${indexUrl()}team-beta/1.0`, { token: SECRETS.opsDelete });
    expect(del.status, del.text).toBe(200);
    expect(await listed('team-beta')).toEqual([]);
    const hooks = await receiver.waitFor('/hook', 4);
    expect(hooks.slice(2).map((h) => [h.json.event, h.json.actor])).toEqual([
      ['yank', 'token:ops-delete'],
      ['delete', 'token:ops-delete'],
    ]);
  });

  it('a token past its expiry is refused with 401 saying when it expired; the upload token still works as before', async () => {
    const tw = await twine(other.wheel, SECRETS.old);
    expect(tw.stdout + tw.stderr).toMatch(/401 Unauthorized[\s\S]*the token "old" expired at 2020-01-01T00:00:00\.000Z/);
    expect(server.logs()).toMatch(/"reason":"expired-credentials","token":"old"/);
    const ok = await twine(other.wheel, SECRETS.team);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(await listed('other')).toEqual([other.wheelFilename]);
  });

  it("/+status?details=admin's recent uploads name the credential of each", async () => {
    const status = (await (await fetch(`${server.url}/+status?details=admin`)).json()) as { recent_uploads: Array<{ filename: string; by?: string }> };
    const by = Object.fromEntries(status.recent_uploads.map((u) => [u.filename, u.by]));
    expect(by[alpha.wheelFilename]).toBe('token:ci-upload');
    expect(by[other.wheelFilename]).toBe('upload_token');
  });

  it('/+status lists the tokens by name, scopes and expiry, and never their secrets', async () => {
    const status = (await (await fetch(`${server.url}/+status?details=admin`)).json()) as { indexes: Array<{ name: string; tokens: unknown[] }> };
    const team = status.indexes.find((ix) => ix.name === 'team');
    expect(team?.tokens).toEqual([
      { name: 'ci-upload', scopes: ['upload'], projects: ['Team-*'], source: 'inline' },
      { name: 'ops-delete', scopes: ['delete'], source: 'env' },
      { name: 'old', scopes: ['upload', 'delete'], expires: '2020-01-01T00:00:00.000Z', expired: true, source: 'inline' },
    ]);
  });
});

describe('named tokens on a hosted OCI index', () => {
  const env = () => ({ HOME: work, DOCKER_CONFIG: join(work, 'docker') });
  const host = () => `127.0.0.1:${server.port}`;
  const crane = (args: string[], allowFailure = false) => run(tool('crane'), [...args, '--insecure'], { env: env(), allowFailure, timeoutMs: 120_000 });
  /** crane stores the credentials; the registry sees them on the next push or pull. */
  const login = (secret: string) => run(tool('crane'), ['auth', 'login', host(), '-u', 'ci', '--password-stdin'], { env: env(), input: secret, timeoutMs: 60_000 });
  let layout: string;

  beforeAll(() => {
    layout = writeLayout(join(work, 'layout'), [{ tag: 'v1', item: buildImage({ seed: 'tokens', layers: 1, bigFileSize: 64 * 1024 }) }]);
  });

  it('a token with the upload scope pushes to the repositories its globs match, through the token realm', async () => {
    await login(SECRETS.ciPush);
    await crane(['push', layout, `${host()}/team/images/app:v1`]);
    await crane(['push', layout, `${host()}/team/images/app/web:v1`]);
    expect((await crane(['ls', `${host()}/team/images/app`])).stdout.trim()).toBe('v1');
    const denied = await crane(['push', layout, `${host()}/team/images/other:v1`], true);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/DENIED|denied|UNAUTHORIZED|unauthorized/);
    expect(await (await fetch(`${server.url}/v2/team/images/other/tags/list`)).json()).toEqual({ name: 'team/images/other', tags: [] });
    expect(((await (await fetch(`${server.url}/v2/_catalog`)).json()) as { repositories: string[] }).repositories).toEqual(['team/images/app', 'team/images/app/web']);
  });

  it('with Basic credentials a write outside the globs is 403 DENIED naming the token', async () => {
    const res = await fetch(`${server.url}/v2/team/images/other/blobs/uploads/`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`ci:${SECRETS.ciPush}`).toString('base64')}` },
    });
    expect(res.status).toBe(403);
    const body = (await res.json()) as { errors: Array<{ code: string; message: string }> };
    expect(body.errors[0]).toMatchObject({ code: 'DENIED', message: 'index "images": the token "ci-push" may not upload "other" (its projects: app, app/*)' });
  });

  it('through the token realm a write outside the globs is 401 insufficient_scope naming the token and what it lacks', async () => {
    const scope = 'repository:team/images/other:pull,push';
    const realm = await fetch(`${server.url}/v2/token?service=velodex&scope=${encodeURIComponent(scope)}`, {
      headers: { authorization: `Basic ${Buffer.from(`ci:${SECRETS.ciPush}`).toString('base64')}` },
    });
    expect(realm.status).toBe(200);
    const { token } = (await realm.json()) as { token: string };
    const res = await fetch(`${server.url}/v2/team/images/other/blobs/uploads/`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/scope="repository:team\/images\/other:pull,push",error="insufficient_scope"/);
    const body = (await res.json()) as { errors: Array<{ code: string; message: string }> };
    expect(body.errors[0]).toMatchObject({ code: 'UNAUTHORIZED', message: 'index "images": the token "ci-push" may not upload "other" (its projects: app, app/*)' });
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"team\/images","method":"POST","client":"[^"]+","reason":"insufficient-scope","token":"ci-push"/);
  });

  it('deletes need the delete scope: refused for the pushing token, done by the cleaner', async () => {
    const digest = (await crane(['digest', `${host()}/team/images/app:v1`])).stdout.trim();
    const refused = await crane(['delete', `${host()}/team/images/app@${digest}`], true);
    expect(refused.code).not.toBe(0);
    await login(SECRETS.cleaner);
    // Before the delete: the push is in the recent uploads, by the credential that pushed it.
    const recent = ((await (await fetch(`${server.url}/+status?details=admin`)).json()) as { recent_uploads: Array<{ filename: string; by?: string }> }).recent_uploads;
    expect(recent.find((u) => u.filename === digest)?.by).toBe('token:ci-push');
    await crane(['delete', `${host()}/team/images/app@${digest}`]);
    expect((await fetch(`${server.url}/v2/team/images/app/manifests/${digest}`)).status).toBe(404);
    const [hook] = await receiver.waitFor('/oci-hook', 1);
    expect(hook?.json).toMatchObject({ event: 'delete', project: 'app', actor: 'token:cleaner' });
  });

  it('a token past its expiry is refused, and the message says it expired', async () => {
    await login(SECRETS.old);
    const res = await crane(['push', layout, `${host()}/team/images/app:v2`], true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/the token \\?"old\\?" expired at 2020-01-01T00:00:00\.000Z/);
  });
});

describe('the audit log', () => {
  it('has a write line for every write, naming the credential (never a secret, nor the Basic user name)', () => {
    const writes = server
      .logs()
      .split('\n')
      .filter((l) => l.includes('"event":"write"'))
      .map((l) => JSON.parse(l) as { credential: string; what: string; index: string });
    const seen = writes.map((w) => `${w.index} ${w.credential} ${w.what.split(' ')[0]}`);
    expect(seen).toEqual(
      expect.arrayContaining([
        'root/team token:ci-upload upload',
        'root/team token:ops-delete yank',
        'root/team token:ops-delete delete',
        'root/team upload_token upload',
        'team/images token:ci-push push',
        'team/images token:cleaner delete',
      ]),
    );
    expect(writes.find((w) => w.what.startsWith('push team/images/app:v1@sha256:'))?.credential).toBe('token:ci-push');
  });
});

describe('secrets never leak', () => {
  it('no token secret appears in any log line, status, stats, metrics or webhook after a run that used them all', async () => {
    const seen = [
      server.logs(),
      await (await fetch(`${server.url}/+status?details=admin`)).text(),
      await (await fetch(`${server.url}/+status`)).text(),
      await (await fetch(`${server.url}/+stats`)).text(),
      await (await fetch(`${server.url}/metrics`)).text(),
      await (await fetch(`${server.url}/+api`)).text(),
      ...receiver.deliveries.map((d) => d.body.toString('utf8') + JSON.stringify(d.headers)),
    ].join('\n');
    for (const [name, secret] of Object.entries(SECRETS)) expect(seen.includes(secret), name).toBe(false);
  });
});
