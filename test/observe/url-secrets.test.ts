/**
 * Secrets in URL paths appear on no surface. A server with a Slack-style webhook (its token in
 * the path) whose receiver answers, one whose receiver fails, a Python cache whose upstream URL
 * carries a secret path segment (a real velodex behind the tests' fault proxy), a Python and an
 * OCI cache whose upstreams refuse connections, and an admin token. After pip fetched through
 * the cache, an upstream answered 503, the dead upstreams failed, and an upload was delivered
 * once and failed once, no secret path segment is in `/+status` (both detail levels), the web UI
 * pages, `/+api`, `/+stats`, `/metrics`, the 502 messages, `velodex check-config`, or the
 * server's log; each URL shows as scheme and host with the fingerprint of its URL.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { Receiver } from '../events/receiver.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { admin, cached, hosted, oci, toml } from '../support/config.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { CLI, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

/** Each secret starts with a letter past "f", so no fingerprint (hex) can spell it. */
const S = {
  upstreamPath: 'zupstreampath7k2q',
  downPath: 'zdownpath3m8w',
  ociPath: 'zocipath5t1v',
  hookToken: 'zSlackToken9Xq4Lr2',
  failToken: 'zFailToken6Wp3Nd8',
};
const TOKEN = 'upload-token-4c1e';
const ADMIN = 'admin-token-b83f9e';

const receiver = new Receiver();
let upstream: Velodex;
let proxy: FaultProxy;
let server: Velodex;
let alpha: BuiltProject;
let beta: BuiltProject;
const hookUrl = () => `${receiver.url}/services/T0000/B0000/${S.hookToken}`;
const failUrl = () => `${receiver.url}/fail/${S.failToken}`;
const upstreamUrl = () => `${proxy.url}/${S.upstreamPath}/up/simple/`;
/** The 502 bodies of the failed upstream fetches, collected in the test that causes them. */
const failures: string[] = [];

beforeAll(async () => {
  [alpha, beta] = await Promise.all([buildProject('url-alpha', '1.0'), buildProject('url-beta', '1.0')]);
  await receiver.start();
  receiver.script.set(`/fail/${S.failToken}`, [500, 500, 500]);
  upstream = await startVelodex({ config: toml(hosted('up', { route: `${S.upstreamPath}/up`, token: TOKEN })) });
  expect((await postUpload({ url: `${upstream.url}/${S.upstreamPath}/up/`, token: TOKEN, file: alpha.wheel })).status).toBe(200);
  proxy = await FaultProxy.start(upstream.url);
  server = await startVelodex({
    config: toml(
      admin(ADMIN),
      hosted('hosted', { token: TOKEN, webhooks: [{ url: hookUrl() }, { url: failUrl() }] }),
      cached('mirror', upstreamUrl(), { ttlSecs: 0 }),
      cached('down', `http://127.0.0.1:9/${S.downPath}/simple/`),
      oci.cached('ocidown', `http://127.0.0.1:9/${S.ociPath}/`),
    ),
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await proxy?.close();
  await upstream?.stop();
  await receiver.stop();
});

async function body(path: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${server.url}${path}`, { headers });
  const text = await res.text();
  expect(res.status, `${path}: ${text}`).toBe(200);
  return text;
}

function expectNoSecret(surface: string, text: string): void {
  for (const [name, secret] of Object.entries(S)) expect(text.includes(secret), `${name} (${secret}) shown by ${surface}`).toBe(false);
}

describe('secrets in URL paths', () => {
  it('a run with upstream fetches and failures and with delivered and failed webhooks', async () => {
    // A fetch through the cache that works (page and file), by pip.
    const dest = tempDir('velodex-url-pip-');
    await run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--index-url', `${server.url}/root/mirror/simple/`, '--dest', dest, 'url-alpha'], {
      env: { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1' },
    });
    // An upstream that answers 503, and two that refuse connections: each a 502 naming its upstream.
    proxy.on(`/${S.upstreamPath}/up/simple/url-beta/`, { kind: 'status', status: 503 });
    for (const path of ['/root/mirror/simple/url-beta/', '/root/down/simple/anything/', '/v2/root/ocidown/team/app/manifests/latest']) {
      const res = await fetch(`${server.url}${path}`);
      const text = await res.text();
      expect(res.status, `${path}: ${text}`).toBe(502);
      failures.push(text);
    }
    expect(failures[0]).toContain(`upstream ${displayUrl(`${upstreamUrl()}url-beta/`)} answered 503`);
    expect(failures[1]).toContain(`upstream ${displayUrl(`http://127.0.0.1:9/${S.downPath}/simple/anything/`)}: connection failed`);
    expect(failures[2]).toContain('http://127.0.0.1:9/...#');

    // An upload: one delivery answered, one refused (and retried later).
    expect((await postUpload({ url: `${server.url}/root/hosted/`, token: TOKEN, file: beta.wheel })).status).toBe(200);
    await receiver.waitFor(`/services/T0000/B0000/${S.hookToken}`, 1);
    await receiver.waitFor(`/fail/${S.failToken}`, 1);
    await until('both delivery outcomes in the log', async () => (/webhook delivered/.test(server.logs()) && /webhook delivery failed; will retry/.test(server.logs()) ? true : undefined));
  });

  it('shows every URL as scheme and host with its fingerprint', async () => {
    const status = JSON.parse(await body('/+status')) as { indexes: Array<{ name: string; upstream?: { url: string }; webhooks: Array<{ url: string }> }> };
    const ix = (name: string) => status.indexes.find((i) => i.name === name)!;
    expect(ix('hosted').webhooks.map((w) => w.url)).toEqual([displayUrl(hookUrl()), displayUrl(failUrl())]);
    expect(displayUrl(hookUrl())).toMatch(new RegExp(`^${receiver.url}/\\.\\.\\.#[0-9a-f]{8}$`));
    expect(ix('mirror').upstream?.url).toBe(displayUrl(upstreamUrl()));
    expect(ix('ocidown').upstream?.url).toBe(displayUrl(`http://127.0.0.1:9/${S.ociPath}/`));

    const logs = server.logs();
    const lines = logs.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; url?: string });
    expect(lines.find((l) => l.msg === 'webhook delivered')?.url).toBe(displayUrl(hookUrl()));
    expect(lines.find((l) => l.msg === 'webhook delivery failed; will retry')?.url).toBe(displayUrl(failUrl()));
  });

  it('shows no secret path segment on any surface', async () => {
    const admin = { authorization: `Bearer ${ADMIN}` };
    const surfaces: Record<string, string> = {
      '/+status': await body('/+status'),
      '/+status?details=admin': await body('/+status?details=admin', admin),
      '/admin/status': await body('/admin/status', { authorization: basicAuth(ADMIN, 'admin') }),
      '/': await body('/'),
      '/browse': await body('/browse'),
      '/stats': await body('/stats'),
      '/+api': await body('/+api'),
      '/root/mirror/+api': await body('/root/mirror/+api'),
      '/+stats': await body('/+stats'),
      '/+stats?index=root/mirror': await body('/+stats?index=root/mirror'),
      '/metrics': await body('/metrics'),
      'check-config': (await run(process.execPath, [CLI, 'check-config', join(server.dataDir, 'velodex.toml')])).stdout,
    };
    failures.forEach((text, i) => (surfaces[`502 answer ${i}`] = text));
    expect(failures.length).toBe(3);
    for (const [surface, text] of Object.entries(surfaces)) expectNoSecret(surface, text);
    expect(surfaces['check-config']).toContain(`upstream=${displayUrl(upstreamUrl())}`);
    // The log of the whole run: start-up lines, upstream fetches and failures, both deliveries.
    expectNoSecret('the server log', server.logs());
  });
});
