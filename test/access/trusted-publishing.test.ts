/**
 * Trusted publishing (issue 27 part 4) through the real clients: a CI job's identity token, signed
 * by a local OIDC issuer the suite runs (test/support/oidc-issuer.ts, in GitHub Actions' place),
 * is exchanged at `/_/oidc/mint-token` for a short-lived upload token, as
 * `pypa/gh-action-pypi-publish` does before it runs twine; twine uploads with it, crane pushes
 * with it through the token realm. What the minted token may do (its publisher's projects, its
 * index only), every refusal of the exchange (another repository, workflow, audience, an expired
 * or forged token, an issuer nobody trusts), the actor that logs, webhooks and status name, and
 * that no identity or minted token ever shows.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintPublishToken, publishTokenKey } from '../../registry/src/access/publishing/publish-tokens.js';
import { testCa } from '../support/certificates.js';
import { auth, hosted, oci, tls, toml, trustedPublishing } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { githubClaims, startOidcIssuer, type OidcIssuer } from '../support/oidc-issuer.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { Receiver } from '../events/receiver.js';
import { getTrusting } from '../tls/https.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';

const SIGNING_KEY = 'trusted-publishing-signing-key-5e1b7c0d9a';
const REPO = 'acme/widgets';
const receiver = new Receiver();
let issuer: OidcIssuer;
let server: Velodex;
let work: string;
let widgets: BuiltProject;
let widgetsCli: BuiltProject;
let gadgets: BuiltProject;
let glWidgets: BuiltProject;
/** Every identity and minted token the run used: none may show anywhere. */
const used: string[] = [];

beforeAll(async () => {
  await receiver.start();
  issuer = await startOidcIssuer();
  [widgets, widgetsCli, gadgets, glWidgets] = await Promise.all([buildProject('widgets', '1.0'), buildProject('widgets-cli', '1.0'), buildProject('gadgets', '1.0'), buildProject('gl-widgets', '1.0')]);
  work = tempDir('velodex-trusted-publishing-');
  server = await startVelodex({
    config: toml(
      auth({ tokenSigningKey: SIGNING_KEY }),
      trustedPublishing({ audience: 'velodex-test' }),
      hosted('team', {
        volatile: true,
        webhooks: [{ url: `${receiver.url}/hook` }],
        trustedPublishers: [
          { name: 'release', issuer: issuer.url, repository: REPO, workflow: 'release.yml', environment: 'pypi', projects: ['widgets*'] },
          { name: 'gitlab', issuer: issuer.url, project_path: 'acme/gl-widgets', ref: 'refs/heads/main', projects: ['gl-widgets'] },
        ],
      }),
      hosted('other', { volatile: true, trustedPublishers: [{ name: 'elsewhere', issuer: issuer.url, repository: 'acme/elsewhere' }] }),
      oci.hosted('images', { route: 'team/images', trustedPublishers: [{ name: 'images', issuer: issuer.url, repository: REPO, workflow: 'images.yml', projects: ['widgets'] }] }),
    ),
  });
});

afterAll(async () => {
  await server?.stop();
  await issuer?.close();
  await receiver.stop();
});

const releaseJob = () => githubClaims(REPO, 'release.yml', { environment: 'pypi' });

/** What gh-action-pypi-publish does before twine: the audience, the job's identity token for it, the exchange. */
async function mintAsAction(claims: Record<string, unknown>): Promise<{ status: number; body: { token?: string; expires?: string; errors?: Array<{ code: string; description: string }> } }> {
  const { audience } = (await (await fetch(`${server.url}/_/oidc/audience`)).json()) as { audience: string };
  const env = issuer.jobEnv(claims);
  const job = await fetch(`${env.ACTIONS_ID_TOKEN_REQUEST_URL}&audience=${encodeURIComponent(audience)}`, { headers: { authorization: `bearer ${env.ACTIONS_ID_TOKEN_REQUEST_TOKEN}` } });
  const { value } = (await job.json()) as { value: string };
  used.push(value);
  return mint(value);
}

async function mint(identityToken: string): Promise<{ status: number; body: { token?: string; expires?: string; errors?: Array<{ code: string; description: string }> } }> {
  const res = await fetch(`${server.url}/_/oidc/mint-token`, { method: 'POST', body: JSON.stringify({ token: identityToken }) });
  const body = (await res.json()) as { token?: string; expires?: string; errors?: Array<{ code: string; description: string }> };
  if (body.token) used.push(body.token);
  return { status: res.status, body };
}

function twine(index: string, file: string, password: string): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/${index}/`, '-u', '__token__', '-p', password, file], {
    allowFailure: true,
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

async function listed(index: string, project: string): Promise<string[]> {
  const res = await fetch(`${server.url}/root/${index}/simple/${project}/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
  if (res.status === 404) return [];
  return ((await res.json()) as { files: Array<{ filename: string }> }).files.map((f) => f.filename);
}

describe('the token exchange', () => {
  it('names its audience, and mints a short-lived upload token for a job whose claims match a publisher', async () => {
    expect(await (await fetch(`${server.url}/_/oidc/audience`)).json()).toEqual({ audience: 'velodex-test' });
    const minted = await mintAsAction(releaseJob());
    expect(minted.status).toBe(200);
    expect(minted.body).toMatchObject({ success: true, token: expect.any(String) });
    const lifetime = Date.parse(minted.body.expires!) - Date.now();
    expect(lifetime).toBeGreaterThan(13 * 60_000);
    expect(lifetime).toBeLessThanOrEqual(15 * 60_000);
    expect(server.logs()).toMatch(/"event":"token_minted","client":"127\.0\.0\.1","publisher":"release","index":"team"/);
  });

  it('refuses, with 422 and what to fix, a job of another repository, workflow or environment', async () => {
    for (const [claims, shown] of [
      [githubClaims('acme/other', 'release.yml', { environment: 'pypi' }), 'repository=acme/other'],
      [githubClaims(REPO, 'nightly.yml', { environment: 'pypi' }), 'job_workflow_ref=acme/widgets/.github/workflows/nightly.yml@refs/heads/main'],
      [githubClaims(REPO, 'release.yml', { environment: 'staging' }), 'environment=staging'],
    ] as const) {
      const refused = await mintAsAction(claims);
      expect(refused.status).toBe(422);
      expect(refused.body.errors).toEqual([{ code: 'invalid-publisher', description: expect.stringContaining('valid token, but no trusted publisher matches its claims') }]);
      expect(refused.body.errors![0]!.description).toContain(shown);
      expect(refused.body.token).toBeUndefined();
    }
  });

  it('refuses a token for another audience, an expired one, a forged one and one from an issuer nobody trusts', async () => {
    const cases: Array<[Promise<string>, string, string]> = [
      [issuer.sign(releaseJob(), { audience: 'pypi' }), 'invalid-token', 'the token is for another audience'],
      [issuer.sign(releaseJob(), { audience: 'velodex-test', expiresInSecs: -120 }), 'invalid-token', 'the token has expired'],
      [issuer.sign(releaseJob(), { audience: 'velodex-test', foreignKey: true }), 'invalid-token', 'the token is not signed by a key of the issuer'],
      [issuer.sign(releaseJob(), { audience: 'velodex-test', issuer: 'https://token.example.invalid' }), 'invalid-publisher', 'no trusted publisher on this registry trusts the issuer https://token.example.invalid'],
    ];
    for (const [token, code, description] of cases) {
      const text = await token;
      used.push(text);
      const refused = await mint(text);
      expect(refused.status, description).toBe(422);
      expect(refused.body.errors).toEqual([{ code, description }]);
    }
    const garbage = await fetch(`${server.url}/_/oidc/mint-token`, { method: 'POST', body: 'not json' });
    expect(garbage.status).toBe(422);
    expect(((await garbage.json()) as { errors: Array<{ code: string }> }).errors[0]!.code).toBe('invalid-payload');
    const huge = await fetch(`${server.url}/_/oidc/mint-token`, { method: 'POST', body: JSON.stringify({ token: 'x'.repeat(100_000) }) });
    expect(huge.status).toBe(400);
  });

  it('fetches the issuer keys once, not per token', () => {
    expect(issuer.keyFetches).toBeGreaterThanOrEqual(1);
    // The forged token names a key id the set does not have: one refetch at most, within the cooldown.
    expect(issuer.keyFetches).toBeLessThanOrEqual(2);
  });
});

describe('uploads with a minted token', () => {
  it('twine uploads the publisher\'s projects with it, named publisher:<name> in webhooks, status and the audit log', async () => {
    const { body } = await mintAsAction(releaseJob());
    for (const project of [widgets, widgetsCli]) {
      const tw = await twine('team', project.wheel, body.token!);
      expect(tw.code, tw.stdout + tw.stderr).toBe(0);
    }
    expect(await listed('team', 'widgets')).toEqual([widgets.wheelFilename]);
    expect(await listed('team', 'widgets-cli')).toEqual([widgetsCli.wheelFilename]);
    const hooks = await receiver.waitFor('/hook', 2);
    expect(hooks.map((h) => h.json.actor)).toEqual(['publisher:release', 'publisher:release']);
    const status = (await (await fetch(`${server.url}/+status?details=admin`)).json()) as { recent_uploads: Array<{ filename: string; by?: string }> };
    expect(status.recent_uploads.find((u) => u.filename === widgets.wheelFilename)?.by).toBe('publisher:release');
    expect(server.logs()).toMatch(/"event":"write","index":"root\/team","method":"POST","client":"127\.0\.0\.1","credential":"publisher:release","what":"upload widgets-1\.0/);
  });

  it('a GitLab job matching its project path and ref uploads too', async () => {
    const { status, body } = await mintAsAction({ sub: 'project_path:acme/gl-widgets:ref_type:branch:ref:main', project_path: 'acme/gl-widgets', ref: 'main', ref_path: 'refs/heads/main', ref_type: 'branch' });
    expect(status).toBe(200);
    const tw = await twine('team', glWidgets.wheel, body.token!);
    expect(tw.code, tw.stdout + tw.stderr).toBe(0);
    const wrongRef = await mintAsAction({ sub: 'x', project_path: 'acme/gl-widgets', ref: 'dev', ref_path: 'refs/heads/dev' });
    expect(wrongRef.status).toBe(422);
  });

  it('refuses a project outside the publisher\'s globs, and another index, with 403 naming the publisher', async () => {
    const { body } = await mintAsAction(releaseJob());
    const outside = await twine('team', gadgets.wheel, body.token!);
    expect(outside.stdout + outside.stderr).toMatch(/403 Forbidden[\s\S]*the trusted publisher "release" may not upload "gadgets" \(its projects: widgets\*\)/);
    const elsewhere = await twine('other', gadgets.wheel, body.token!);
    expect(elsewhere.stdout + elsewhere.stderr).toMatch(/403 Forbidden[\s\S]*the trusted publishing token may not upload \(its scopes: none on this index\)/);
    expect(await listed('team', 'gadgets')).toEqual([]);
    expect(await listed('other', 'gadgets')).toEqual([]);
  });

  it('refuses a minted token past its lifetime (401) and one this registry did not sign', async () => {
    const grants = [{ index: 'team', publisher: 'release' }];
    const expired = await mintPublishToken(publishTokenKey(new TextEncoder().encode(SIGNING_KEY)), grants, 60, Date.now() - 3600_000);
    const foreign = await mintPublishToken(publishTokenKey(new TextEncoder().encode('another-registry-key-0123456789')), grants, 600);
    used.push(expired.token, foreign.token);
    for (const token of [expired.token, foreign.token]) {
      const tw = await twine('team', gadgets.wheel, token);
      expect(tw.stdout + tw.stderr).toMatch(/401 Unauthorized/);
    }
    expect(server.logs()).toMatch(/"event":"identity_rejected","path":"\/root\/team\/","method":"POST","client":"127\.0\.0\.1","by":"trusted publishing","reason":"expired"/);
    expect(server.logs()).toMatch(/"by":"trusted publishing","reason":"bad-signature"/);
  });
});

describe('uv publish --trusted-publishing always', () => {
  // uv asks for the audience and the exchange at https://<host>/_/oidc/... only: a server with [tls].
  let secure: Velodex;
  let caFile: string;

  beforeAll(async () => {
    mkdirSync(join(work, 'pki'));
    const authority = testCa(join(work, 'pki'));
    caFile = authority.caFile;
    secure = await startVelodex({
      config: toml(
        tls(authority.issue('server')),
        hosted('team', { volatile: true, trustedPublishers: [{ name: 'release', issuer: issuer.url, repository: REPO, workflow: 'release.yml', environment: 'pypi', projects: ['widgets*'] }] }),
      ),
    });
  });

  afterAll(async () => {
    await secure?.stop();
  });

  const uv = (project: BuiltProject, claims: Record<string, unknown>) =>
    run(tool('uv'), ['publish', '--trusted-publishing', 'always', '--publish-url', `${secure.url}/root/team/`, project.wheel], {
      allowFailure: true,
      env: { ...issuer.jobEnv(claims), SSL_CERT_FILE: caFile, UV_CACHE_DIR: join(work, 'uv-cache'), NO_COLOR: '1' },
      timeoutMs: 120_000,
    });

  it('publishes from a GitHub Actions job whose claims match, with no token given', async () => {
    const res = await uv(widgets, releaseJob());
    expect(res.code, res.stderr).toBe(0);
    const page = await getTrusting(`${secure.url}/root/team/simple/widgets/`, readFileSync(caFile));
    expect(page.body).toContain(widgets.wheelFilename);
    expect(secure.logs()).toMatch(/"event":"token_minted","client":"127\.0\.0\.1","publisher":"release","index":"team"/);
    expect(secure.logs()).toMatch(/"event":"write","index":"root\/team","method":"POST","client":"127\.0\.0\.1","credential":"publisher:release","what":"upload widgets-1\.0/);
    // uv burns the token once it has published.
    expect(secure.logs()).toMatch(/"event":"token_burnt"/);
  });

  it('fails for a job of another repository, and uv prints why', async () => {
    const res = await uv(widgetsCli, githubClaims('acme/other', 'release.yml', { environment: 'pypi' }));
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/422[\s\S]*valid token, but no trusted publisher matches its claims \(.*repository=acme\/other/);
    expect(secure.logs()).not.toMatch(/"what":"upload widgets_cli-1\.0/);
  });
});

describe('status', () => {
  it('lists each hosted index\'s trusted publishers by their rules', async () => {
    const status = (await (await fetch(`${server.url}/+status`)).json()) as { indexes: Array<{ name: string; trusted_publishers?: unknown[] }> };
    expect(status.indexes.find((ix) => ix.name === 'team')?.trusted_publishers).toEqual([
      { name: 'release', issuer: issuer.url, claims: { repository: REPO, environment: 'pypi' }, workflow: 'release.yml', projects: ['widgets*'] },
      { name: 'gitlab', issuer: issuer.url, claims: { project_path: 'acme/gl-widgets' }, ref: 'refs/heads/main', projects: ['gl-widgets'] },
    ]);
  });
});

describe('discovery', () => {
  it('/+api gives a hosted index with publishers the GitHub Actions step that publishes to it', async () => {
    const doc = (await (await fetch(`${server.url}/+api`)).json()) as { indexes: Array<{ name: string; client_configuration?: Record<string, { description: string; text: string }> }> };
    const text = doc.indexes.find((ix) => ix.name === 'team')?.client_configuration?.github_actions;
    expect(text?.text).toContain(`uv publish --trusted-publishing always --publish-url ${server.url}/root/team/`);
    expect(text?.description).toContain('publishers of index "team": release, gitlab');
  });
});

describe('burning a minted token', () => {
  it('revokes it: 202, as PyPI answers, and the next upload with it is refused', async () => {
    const { body } = await mintAsAction(releaseJob());
    const before = await twine('team', widgetsCli.sdist, body.token!);
    expect(before.code, before.stdout + before.stderr).toBe(0);
    const burn = await fetch(`${server.url}/_/oidc/burn-token`, { method: 'POST', body: JSON.stringify({ token: body.token }) });
    expect(burn.status).toBe(202);
    expect(server.logs()).toMatch(/"event":"token_burnt","client":"127\.0\.0\.1"/);
    const after = await twine('team', widgets.sdist, body.token!);
    expect(after.stdout + after.stderr).toMatch(/401 Unauthorized/);
    expect(server.logs()).toMatch(/"event":"identity_rejected","path":"\/root\/team\/","method":"POST","client":"127\.0\.0\.1","by":"trusted publishing","reason":"burnt"/);
    expect(await listed('team', 'widgets')).not.toContain(widgets.sdistFilename);
    // Anything else is answered the same, and burns nothing.
    expect((await fetch(`${server.url}/_/oidc/burn-token`, { method: 'POST', body: JSON.stringify({ token: 'not.a.token' }) })).status).toBe(202);
  });
});

describe('pushes with a minted token', () => {
  const env = () => ({ HOME: work, DOCKER_CONFIG: join(work, 'docker') });
  const host = () => `127.0.0.1:${server.port}`;
  const crane = (args: string[], allowFailure = false) => run(tool('crane'), [...args, '--insecure'], { env: env(), allowFailure, timeoutMs: 120_000 });

  it('crane logs in with it and pushes the publisher\'s repository through the token realm; another repository is refused', async () => {
    const layout = writeLayout(join(work, 'layout'), [{ tag: 'v1', item: buildImage({ seed: 'trusted-publishing', layers: 1, bigFileSize: 32 * 1024 }) }]);
    const { body } = await mintAsAction(githubClaims(REPO, 'images.yml'));
    await run(tool('crane'), ['auth', 'login', host(), '-u', '__token__', '--password-stdin'], { env: env(), input: body.token!, timeoutMs: 60_000 });
    await crane(['push', layout, `${host()}/team/images/widgets:v1`]);
    expect((await crane(['ls', `${host()}/team/images/widgets`])).stdout.trim()).toBe('v1');
    const denied = await crane(['push', layout, `${host()}/team/images/gadgets:v1`], true);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/the trusted publisher \\?"images\\?" may not upload \\?"gadgets\\?"/);
    expect(server.logs()).toMatch(/"event":"write","index":"team\/images","method":"PUT","client":"127\.0\.0\.1","credential":"publisher:images","what":"push team\/images\/widgets:v1/);
  });
});

describe('secrets never leak', () => {
  it('no identity token nor minted token appears in any log line, status, stats, metrics or webhook', async () => {
    expect(used.length).toBeGreaterThan(10);
    const seen = [
      server.logs(),
      await (await fetch(`${server.url}/+status?details=admin`)).text(),
      await (await fetch(`${server.url}/+stats`)).text(),
      await (await fetch(`${server.url}/metrics`)).text(),
      await (await fetch(`${server.url}/+api`)).text(),
      ...receiver.deliveries.map((d) => d.body.toString('utf8') + JSON.stringify(d.headers)),
    ].join('\n');
    for (const token of used) expect(seen.includes(token)).toBe(false);
    // Nor a recognisable part of one: the signature of the first.
    expect(seen.includes(used[0]!.split('.')[2]!)).toBe(false);
  });
});
