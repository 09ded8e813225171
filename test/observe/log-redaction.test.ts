/**
 * No credential reaches the log, at any level. The real server runs at every log level and takes
 * traffic that carries every kind of credential (the upload token through twine's multipart form,
 * a wrong password, a bearer token, a cookie, an OCI push, the admin token) with every kind of
 * secret configured;
 * then its whole output is searched for each one. The scrubber itself gets a property test.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { REDACTED, scrubLine } from '../../registry/src/observe/log.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { admin, auth, cached, hosted, oci, toml } from '../support/config.js';
import { rawRequest } from '../support/raw-http.js';
import { basicAuth, freePort, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'log-upload-token-4f7a91';
const WRONG = 'wrong-password-c3d802';
const BEARER = 'bearer-credential-9b1e77';
const COOKIE = 'cookie-session-2a6f04';
const UPSTREAM_PASS = 'upstream-pass-71d3e9';
const UPSTREAM_QUERY = 'upstream-query-e80c15';
const HOOK_PASS = 'hook-pass-5c2b38';
const HOOK_SECRET = 'hook-secret-d94a60';
const SIGNING_KEY = 'token-signing-key-0b7d52-0123456789abcdef';
const ADMIN_TOKEN = 'admin-token-6e13f0';
/** The OCI token realm's tokens the traffic was given (their signatures must not be logged). */
const minted: string[] = [];

const CREDENTIALS = [
  TOKEN,
  WRONG,
  BEARER,
  COOKIE,
  UPSTREAM_PASS,
  UPSTREAM_QUERY,
  HOOK_PASS,
  HOOK_SECRET,
  SIGNING_KEY,
  ADMIN_TOKEN,
  basicAuth(ADMIN_TOKEN, 'admin').slice('Basic '.length),
  basicAuth(TOKEN).slice('Basic '.length),
  basicAuth(WRONG).slice('Basic '.length),
];

const CONFIG = toml(
  auth({ tokenSigningKey: SIGNING_KEY }),
  admin(ADMIN_TOKEN),
  hosted('hosted', { token: TOKEN, webhooks: [{ url: `http://hook-user:${HOOK_PASS}@127.0.0.1:9/hook`, secret: HOOK_SECRET }] }),
  // Nothing listens on port 9: every fetch fails, and the failure is logged.
  cached('mirror', `http://up-user:${UPSTREAM_PASS}@127.0.0.1:9/simple/?token=${UPSTREAM_QUERY}`),
  oci.hosted('oci', { token: TOKEN }),
);

let server: Velodex | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** Traffic that carries each credential in each place a client puts one. */
async function traffic(s: Velodex): Promise<void> {
  const file = join(tempDir(), 'demo-1.0-py3-none-any.whl');
  writeFileSync(file, 'not really a wheel');
  await postUpload({ url: `${s.url}/root/hosted/`, token: TOKEN, file });
  await postUpload({ url: `${s.url}/root/hosted/`, token: WRONG, file });
  await rawRequest(s.url, '/root/hosted/simple/', 'GET', { authorization: `Bearer ${BEARER}`, cookie: `session=${COOKIE}` });
  await rawRequest(s.url, '/root/mirror/simple/demo/', 'GET', { 'proxy-authorization': basicAuth(WRONG) });
  await rawRequest(s.url, '/v2/root/oci/demo/blobs/uploads/', 'POST', { authorization: basicAuth(TOKEN), 'content-length': '0' });
  await rawRequest(s.url, '/v2/root/oci/demo/blobs/uploads/', 'POST', { authorization: basicAuth(WRONG), 'content-length': '0' });
  // docker's way: a token from the realm for the Basic password, then the token on the write.
  const realm = await rawRequest(s.url, '/v2/token?service=velodex&scope=repository:root/oci/demo:pull,push', 'GET', { authorization: basicAuth(TOKEN) });
  const token = (JSON.parse(realm.body) as { token: string }).token;
  minted.push(token);
  await rawRequest(s.url, '/v2/root/oci/demo/blobs/uploads/', 'POST', { authorization: `Bearer ${token}`, 'content-length': '0' });
  await rawRequest(s.url, '/v2/token?service=velodex', 'GET', { authorization: basicAuth(WRONG) });
  for (const path of ['/+status?details=admin', '/admin/status']) {
    await rawRequest(s.url, path, 'GET', { authorization: `Bearer ${ADMIN_TOKEN}` });
    await rawRequest(s.url, path, 'GET', { authorization: basicAuth(ADMIN_TOKEN, 'admin') });
    await rawRequest(s.url, path, 'GET', { authorization: basicAuth(WRONG, 'admin') });
  }
}

describe('the server log, at every level', () => {
  it.each(['trace', 'debug', 'info', 'warn', 'error', 'fatal'])('holds no credential at %s', async (level) => {
    server = await startVelodex({ config: CONFIG, env: { VELODEX_LOG_LEVEL: level }, port: await freePort() });
    await traffic(server);
    await server.stop();
    const logs = server.logs();
    for (const credential of CREDENTIALS) expect(logs).not.toContain(credential);
    expect(minted.length).toBeGreaterThan(0);
    for (const token of minted.splice(0)) expect(logs).not.toContain(token.split('.')[2]);
    // The traffic was logged where the level shows requests (the search above was not of nothing).
    if (['trace', 'debug', 'info'].includes(level)) expect(logs).toContain('incoming request');
  });
});

describe('scrubLine', () => {
  const token = fc.stringMatching(/^[A-Za-z0-9_-]{8,48}$/);
  const text = fc.string({ maxLength: 40 });

  it('removes a configured secret wherever a JSON line carries it', () => {
    fc.assert(
      fc.property(token, text, text, fc.constantFrom('msg', 'url', 'err'), (secret, before, after, key) => {
        const line = JSON.stringify({ level: 30, [key]: `${before}${secret}${after}`, nested: { deeper: [secret] } });
        const out = scrubLine(line, [secret]);
        expect(out).not.toContain(secret);
        expect(out).toContain(REDACTED);
      }),
      { numRuns: 300 },
    );
  });

  it('removes credential query parameters of any URL, docker\'s account name included', () => {
    fc.assert(
      fc.property(token, fc.constantFrom('account', 'password', 'token', 'access_token', 'refresh_token', 'Password', 'X-Amz-Signature', 'X-Amz-Credential', 'X-Amz-Security-Token'), fc.boolean(), (credential, key, first) => {
        const query = first ? `?${key}=${credential}&service=velodex` : `?service=velodex&${key}=${credential}`;
        const out = scrubLine(JSON.stringify({ req: { url: `/v2/token${query}` } }), []);
        expect(out).not.toContain(credential);
        expect(out).toContain('service=velodex');
      }),
      { numRuns: 300 },
    );
  });

  it('removes credential headers at any depth and Basic or Bearer credentials in any text', () => {
    fc.assert(
      fc.property(token, text, fc.constantFrom('authorization', 'Authorization', 'proxy-authorization', 'cookie'), (credential, noise, header) => {
        const line = JSON.stringify({ a: { b: { headers: { [header]: `${noise}${credential}` } } }, msg: `sent Basic ${credential} and Bearer ${credential}` });
        expect(scrubLine(line, [])).not.toContain(credential);
      }),
      { numRuns: 300 },
    );
  });
});
