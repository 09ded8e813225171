/**
 * Kubernetes ServiceAccount tokens as credentials (`[[index.service_account]]`,
 * registry/src/access/service-accounts/) against a real kube-apiserver: the tokens are the ones
 * `kubectl create token` gets from it (its TokenRequest API, as the kubelet gets a projected
 * token), and velodex reads the issuer and its keys from it with a ServiceAccount token of its
 * own, as a registry pod does. twine, pip and crane send a token as the password: what each
 * ServiceAccount may do by the index's rules (its own rule, its namespace's `*` rule, none), the
 * refusals (another audience, expired, not signed by the cluster), the actor in the audit line,
 * the status and webhooks, and no token's text in any log line. Last, the API server stops and a
 * token not seen before still verifies: its keys were fetched once, not per request.
 */
import { createPrivateKey } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceAccountTokens } from '../../registry/src/access/service-accounts/verifier.js';
import { ConfigError } from '../../registry/src/config/errors.js';
import { hosted, kubernetes, oci, toml } from '../support/config.js';
import { startKubeApi, type KubeApi } from '../support/kube-apiserver.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { Receiver } from '../events/receiver.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';

const receiver = new Receiver();
let api: KubeApi;
let server: Velodex;
let work: string;
let ownToken: string;
/** Tokens by who they are for; every one audience "velodex" unless its name says otherwise. */
const tokens: Record<'builder' | 'tester' | 'stranger' | 'builderApiAudience' | 'late', string> = { builder: '', tester: '', stranger: '', builderApiAudience: '', late: '' };
let demo: BuiltProject;
let other: BuiltProject;

const kubectl = (args: string[]) => run(tool('kubectl'), args, { env: api.env, timeoutMs: 60_000 });
const createToken = async (ns: string, sa: string, audience?: string) => (await kubectl(['create', 'token', sa, '-n', ns, '--duration', '1h', ...(audience ? ['--audience', audience] : [])])).stdout.trim();

beforeAll(async () => {
  await receiver.start();
  [demo, other] = await Promise.all([buildProject('sa-demo', '1.0'), buildProject('other', '1.0')]);
  work = tempDir('velodex-sa-');
  api = await startKubeApi();
  for (const ns of ['ci', 'elsewhere', 'velodex']) await kubectl(['create', 'namespace', ns]);
  for (const [ns, sa] of [['ci', 'builder'], ['ci', 'tester'], ['ci', 'late'], ['elsewhere', 'builder'], ['velodex', 'registry']] as const) await kubectl(['create', 'serviceaccount', sa, '-n', ns]);
  // The registry's own token, for the API server (its default audience): what a pod mounts.
  ownToken = await createToken('velodex', 'registry');
  const tokenFile = join(work, 'token');
  writeFileSync(tokenFile, `${ownToken}\n`, { mode: 0o600 });
  tokens.builder = await createToken('ci', 'builder', 'velodex');
  tokens.tester = await createToken('ci', 'tester', 'velodex');
  tokens.stranger = await createToken('elsewhere', 'builder', 'velodex');
  tokens.builderApiAudience = await createToken('ci', 'builder');
  tokens.late = await createToken('ci', 'late', 'velodex');
  server = await startVelodex({
    config: toml(
      kubernetes({ apiServer: api.server, caFile: api.caFile, tokenFile }),
      hosted('builds', {
        read: 'token',
        serviceAccounts: [
          { namespace: 'ci', name: 'builder', scopes: ['upload'], projects: ['sa-*'] },
          { namespace: 'ci', name: '*', scopes: ['read'] },
        ],
        webhooks: [{ url: `${receiver.url}/hook` }],
      }),
      oci.hosted('images', {
        route: 'team/images',
        serviceAccounts: [
          { namespace: 'ci', name: 'builder', scopes: ['upload', 'delete'] },
          { namespace: 'ci', name: '*', scopes: ['read'] },
        ],
      }),
    ),
  });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await api?.stop();
  await receiver.stop();
});

const indexUrl = () => `${server.url}/root/builds/`;

function twine(file: string, password: string): Promise<RunResult> {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', indexUrl(), '-u', '__token__', '-p', password, file], {
    allowFailure: true,
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

function pipDownload(project: string, password?: string): Promise<RunResult> {
  const base = password === undefined ? server.url : server.url.replace('://', `://__token__:${password}@`);
  return run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--dest', join(work, 'pip'), '--index-url', `${base}/root/builds/simple/`, project], {
    allowFailure: true,
    env: { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' },
  });
}

/** A token the cluster's own key signs, with claims the API server would not issue (an expiry in the past). */
async function signedByCluster(claims: { exp: number; iat: number }): Promise<string> {
  const jwks = JSON.parse((await kubectl(['get', '--raw', '/openid/v1/jwks'])).stdout) as { keys: Array<{ kid: string }> };
  const key = createPrivateKey(readFileSync(api.serviceAccountKeyFile));
  return new SignJWT({ 'kubernetes.io': { namespace: 'ci', serviceaccount: { name: 'builder', uid: 'x' } } })
    .setProtectedHeader({ alg: 'RS256', kid: jwks.keys[0]!.kid })
    .setIssuer('https://kubernetes.default.svc')
    .setAudience('velodex')
    .setSubject('system:serviceaccount:ci:builder')
    .setIssuedAt(claims.iat)
    .setNotBefore(claims.iat)
    .setExpirationTime(claims.exp)
    .sign(key);
}

describe('ServiceAccount tokens on a hosted Python index', () => {
  it('the ServiceAccount a rule names uploads the projects its globs match, with twine, named as the actor', async () => {
    const tw = await twine(demo.wheel, tokens.builder);
    expect(tw.code, tw.stdout + tw.stderr).toBe(0);
    const [hook] = await receiver.waitFor('/hook', 1);
    expect(hook?.json).toMatchObject({ event: 'upload', project: 'sa-demo', actor: 'serviceaccount:ci/builder' });
    expect(server.logs()).toMatch(/"event":"write","index":"root\/builds","method":"POST","client":"[^"]+","credential":"serviceaccount:ci\/builder"/);
    const status = (await (await fetch(`${server.url}/+status?details=admin`)).json()) as { recent_uploads: Array<{ filename: string; by?: string }> };
    expect(status.recent_uploads.find((u) => u.filename === demo.wheelFilename)?.by).toBe('serviceaccount:ci/builder');
  });

  it('refuses a project outside its globs with 403 naming the ServiceAccount and its projects', async () => {
    const tw = await twine(other.wheel, tokens.builder);
    expect(tw.stdout + tw.stderr).toMatch(/403 Forbidden[\s\S]*the service account "ci\/builder" may not upload "other" \(its projects: sa-\*\)/);
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"root\/builds","method":"POST","client":"[^"]+","reason":"insufficient-scope","actor":"serviceaccount:ci\/builder"/);
  });

  it("another ServiceAccount of the namespace gets the namespace's * rule: it reads the private index, and may not upload", async () => {
    const tw = await twine(other.wheel, tokens.tester);
    expect(tw.stdout + tw.stderr).toMatch(/403 Forbidden[\s\S]*the service account "ci\/tester" may not upload \(its scopes: read\)/);
    const pip = await pipDownload('sa-demo', tokens.tester);
    expect(pip.code, pip.stderr).toBe(0);
    expect(pip.stdout).toContain('Saved');
    expect((await pipDownload('sa-demo')).code).not.toBe(0);
    expect((await fetch(`${indexUrl()}simple/sa-demo/`)).status).toBe(401);
  });

  it('a ServiceAccount of a namespace no rule names may do nothing: 403 to an upload, 401 to a read of the private index', async () => {
    const tw = await twine(other.wheel, tokens.stranger);
    expect(tw.stdout + tw.stderr).toMatch(/403 Forbidden[\s\S]*the service account "elsewhere\/builder" may not upload \(its scopes: none on this index\)/);
    const res = await fetch(`${indexUrl()}simple/`, { headers: { authorization: `Basic ${Buffer.from(`__token__:${tokens.stranger}`).toString('base64')}` } });
    expect(res.status).toBe(401);
  });

  it('refuses a token for another audience, an expired one and one the cluster did not sign, as a wrong password (401), saying why in the security log', async () => {
    const now = Math.floor(Date.now() / 1000);
    const expired = await signedByCluster({ iat: now - 7200, exp: now - 3600 });
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT({ 'kubernetes.io': { namespace: 'ci', serviceaccount: { name: 'builder' } } })
      .setProtectedHeader({ alg: 'RS256', kid: 'forged' })
      .setIssuer('https://kubernetes.default.svc')
      .setAudience('velodex')
      .setSubject('system:serviceaccount:ci:builder')
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .sign(privateKey);
    for (const [token, reason] of [
      [tokens.builderApiAudience, 'wrong-audience'],
      [expired, 'expired'],
      [forged, 'bad-signature'],
    ] as const) {
      const tw = await twine(other.wheel, token);
      expect(tw.stdout + tw.stderr, reason).toMatch(/401 Unauthorized/);
      expect(server.logs(), reason).toMatch(new RegExp(`"event":"identity_rejected","path":"/root/builds/","method":"POST","client":"[^"]+","by":"service accounts","reason":"${reason}"`));
    }
    expect(server.logs()).toContain('identity token refused by service accounts: serviceaccount:ci/builder (as the token claims): the token is for another audience; project the token with audience \\"velodex\\"');
  });
});

describe('ServiceAccount tokens on a hosted OCI index', () => {
  const env = () => ({ HOME: work, DOCKER_CONFIG: join(work, 'docker') });
  const host = () => `127.0.0.1:${server.port}`;
  const crane = (args: string[], allowFailure = false) => run(tool('crane'), [...args, '--insecure'], { env: env(), allowFailure, timeoutMs: 120_000 });
  const login = (token: string) => run(tool('crane'), ['auth', 'login', host(), '-u', '__token__', '--password-stdin'], { env: env(), input: token, timeoutMs: 60_000 });

  it('crane pushes with the token of a ServiceAccount that may upload (through the token realm); one that may only read is DENIED', async () => {
    const layout = writeLayout(join(work, 'layout'), [{ tag: 'v1', item: buildImage({ seed: 'service-accounts', layers: 1, bigFileSize: 32 * 1024 }) }]);
    await login(tokens.builder);
    await crane(['push', layout, `${host()}/team/images/app:v1`]);
    expect((await crane(['ls', `${host()}/team/images/app`])).stdout.trim()).toBe('v1');
    const recent = ((await (await fetch(`${server.url}/+status?details=admin`)).json()) as { recent_uploads: Array<{ filename: string; by?: string }> }).recent_uploads;
    const digest = (await crane(['digest', `${host()}/team/images/app:v1`])).stdout.trim();
    expect(recent.find((u) => u.filename === digest)?.by).toBe('serviceaccount:ci/builder');

    await login(tokens.tester);
    const denied = await crane(['push', layout, `${host()}/team/images/app:v2`], true);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/DENIED|denied|UNAUTHORIZED|unauthorized/);
    const res = await fetch(`${server.url}/v2/team/images/app/blobs/uploads/`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`__token__:${tokens.tester}`).toString('base64')}` } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { errors: Array<{ code: string; message: string }> }).errors[0]).toMatchObject({ code: 'DENIED', message: 'index "images": the service account "ci/tester" may not upload (its scopes: read)' });
  });
});

describe('the verifier', () => {
  it('refuses to start without the CA or the token of the pod, naming the key', () => {
    const config = { audience: 'velodex', apiServer: 'https://127.0.0.1:1', caFile: api.caFile, tokenFile: '/nonexistent/token' };
    expect(() => new ServiceAccountTokens(config)).toThrow(ConfigError);
    expect(() => new ServiceAccountTokens(config)).toThrow(/kubernetes\.token_file: cannot read the pod's ServiceAccount token at \/nonexistent\/token \(ENOENT\)/);
    expect(() => new ServiceAccountTokens({ ...config, caFile: '/nonexistent/ca.crt' })).toThrow(/kubernetes\.ca_file: cannot read the CA bundle/);
  });

  it('never writes a token into a log line', () => {
    const logs = server.logs();
    for (const token of [...Object.values(tokens), ownToken]) expect(logs).not.toContain(token.split('.')[2]!);
  });

  it('asks the API server nothing per request: with it stopped, a token not seen before still verifies', async () => {
    await api.stop();
    const res = await fetch(`${indexUrl()}simple/`, { headers: { authorization: `Basic ${Buffer.from(`__token__:${tokens.late}`).toString('base64')}` } });
    expect(res.status).toBe(200);
  });
});
