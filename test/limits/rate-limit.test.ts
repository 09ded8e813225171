/**
 * The rate limiter on a real server (child process) with real clients: pip meets the 429, shows
 * it when it may not retry, and otherwise waits `Retry-After` and installs; raw HTTP sees `Retry-After` and each API's error shape; a
 * 10 MiB upload is refused before its body is sent and nothing is spooled; behind a trusted proxy
 * each forwarded client has its own budget, and without one the header changes nothing;
 * `/healthz` is never limited; the security log has a line per denial and per failed
 * authentication, with no credential in it.
 *
 * pip fetches the PEP 658 metadata, then the wheel; the download class allows one of them per
 * window, so pip's own install meets the limit at once. Windows are a minute long, so the counts
 * hold on a busy machine; pip waiting out the 429 uses a server with an 8 s window.
 *
 * Budgets are per client address, so each test speaks as its own client through
 * `X-Forwarded-For` (the limited server trusts 127.0.0.1); only pip and the upload client speak
 * as 127.0.0.1 itself.
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateClassName } from '../../registry/src/config/types.js';
import { hosted, oci, rateLimit, toml, trustedProxies } from '../support/config.js';
import { tool } from '../support/paths.js';
import { RawConnection, requestHead } from '../support/raw-http.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv, requestedPaths } from '../python/fixtures/clients.js';
import { makeBigWheel } from '../python/fixtures/archives.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { storeState } from '../python/fixtures/store.js';
import { postUpload } from '../python/fixtures/upload-client.js';

const TOKEN = 'rate-limit-test-token';
const MiB = 1024 * 1024;
/**
 * Windows long enough that no count depends on how fast this machine is: every budget a test
 * spends is spent well within its window. Only the test of pip waiting out a 429 has a short
 * window, on a server of its own.
 */
const READ_WINDOW_SECS = 60;
/** The download window of the server pip waits out: pip's next request comes long before it ends. */
const PATIENT_WINDOW_SECS = 8;

type Windows = Partial<Record<RateClassName, { requests: number; windowSecs: number }>>;

/** One hosted Python and one hosted OCI index, and the `[rate_limit]` table given. */
function limitedConfig(opts: { enabled: boolean; trustedProxies?: string[]; windows: Windows }): string {
  return toml(
    hosted('hosted', { token: TOKEN }),
    oci.hosted('oci', { token: TOKEN }),
    rateLimit({ enabled: opts.enabled, ...opts.windows }),
    ...(opts.trustedProxies ? [trustedProxies(opts.trustedProxies)] : []),
  );
}

const WINDOWS: Windows = {
  read: { requests: 4, windowSecs: READ_WINDOW_SECS },
  // pip fetches the PEP 658 metadata and then the wheel: the second download of an install is refused.
  download: { requests: 1, windowSecs: READ_WINDOW_SECS },
  write: { requests: 1, windowSecs: 60 },
  admin: { requests: 1, windowSecs: 60 },
};

interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** Sends the request until the limiter answers 429 (at most `max` times); the last answer. */
async function untilDenied(url: string, init: RequestInit = {}, max = 12): Promise<{ last: Answer; sent: number }> {
  let last: Answer = { status: 0, headers: new Headers(), body: '' };
  for (let sent = 1; sent <= max; sent++) {
    const res = await fetch(url, init);
    last = { status: res.status, headers: res.headers, body: await res.text() };
    if (last.status === 429) return { last, sent };
  }
  return { last, sent: max };
}

const from = (address: string, headers: Record<string, string> = {}): RequestInit => ({ headers: { 'x-forwarded-for': address, ...headers } });

/** The server's JSON log lines with this `event`. */
function events(server: Velodex, event: string): Record<string, unknown>[] {
  return server
    .logs()
    .split('\n')
    .flatMap((line) => {
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        return entry.event === event ? [entry] : [];
      } catch {
        return [];
      }
    });
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
/** Long enough for an answer that is coming to arrive on loopback. */
const SETTLE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let server: Velodex;
let alpha: BuiltProject;
let big: string;
const dir = tempDir('velodex-ratelimit-');

beforeAll(async () => {
  [alpha, big] = await Promise.all([buildProject('alpha', '1.0.0'), makeBigWheel(dir, 10 * MiB)]);
  server = await startVelodex({ config: limitedConfig({ enabled: true, trustedProxies: ['127.0.0.1'], windows: WINDOWS }) });
  // The one write 127.0.0.1 may make in its 60 s window: the upload test below meets the limit.
  await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', TOKEN, alpha.wheel], {
    env: CLEAN_ENV,
  });
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('denials', () => {
  it('answers 429 with Retry-After and the default error body on an index route', async () => {
    const { last, sent } = await untilDenied(`${server.url}/root/hosted/simple/alpha/`, from('198.51.100.1'));
    expect(sent).toBe(5); // four reads pass, the fifth is denied
    expect(last.status).toBe(429);
    const retryAfter = Number(last.headers.get('retry-after'));
    // At least a second; at most two windows (a full window weighs on the next one).
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 2 * READ_WINDOW_SECS, `Retry-After ${retryAfter}`).toBe(true);
    expect(last.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(last.body)).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: `rate limit exceeded for read requests; retry in ${retryAfter} s`,
    });
  });

  it('answers 429 in the OCI error shape under /v2/, for reads and blob downloads alike', async () => {
    const ping = await untilDenied(`${server.url}/v2/`, from('198.51.100.2'));
    expect(ping.last.status).toBe(429);
    expect(Number(ping.last.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(ping.last.body)).toEqual({
      errors: [{ code: 'TOOMANYREQUESTS', message: expect.stringMatching(/^rate limit exceeded for read requests; retry in \d+ s$/) as unknown }],
    });
    // Blob GETs spend the download class: one 404 passes, the second is refused.
    const blob = `${server.url}/v2/root/oci/app/blobs/sha256:${'0'.repeat(64)}`;
    const download = await untilDenied(blob, from('198.51.100.3'));
    expect(download.sent).toBe(2);
    expect(JSON.parse(download.last.body)).toMatchObject({ errors: [{ code: 'TOOMANYREQUESTS', message: expect.stringContaining('download') as unknown }] });
  });

  it('refuses a 10 MiB upload over the write limit before its body is sent, and spools nothing', async () => {
    const res = await postUpload({ url: `${server.url}/root/hosted/`, token: TOKEN, file: big });
    expect(res.status, res.body).toBe(429);
    console.log(`10 MiB upload: ${res.sentBeforeAnswer} bytes sent before the 429`);
    expect(res.sentBeforeAnswer).toBeLessThan(10 * MiB);
    expect(res.headers.connection).toBe('close');
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 429, message: expect.stringContaining('write requests') as unknown });
    expect((await storeState(server.dataDir)).staged).toEqual([]);
    // The server is still there for the next client.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('reads a small refused body to its end before the 429, and keeps the connection', async () => {
    const conn = await RawConnection.open(server.url);
    const manifest = Buffer.from('{"schemaVersion":2}');
    const put = requestHead('PUT', '/v2/root/oci/app/manifests/v1', {
      'X-Forwarded-For': '198.51.100.70',
      'Content-Type': 'application/vnd.oci.image.manifest.v1+json',
      'Content-Length': String(manifest.length),
    });
    // The one write of this client (refused for its missing credentials), then one too many.
    await conn.write(Buffer.concat([Buffer.from(put), manifest]));
    expect((await conn.response()).status).toBe(401);
    await conn.write(Buffer.concat([Buffer.from(put), manifest.subarray(0, 5)]));
    await sleep(SETTLE_MS);
    // A client that writes its whole body before it reads (containerd) must get to finish.
    expect(conn.answered).toBe(false);
    await conn.write(manifest.subarray(5));
    const refused = await conn.response();
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ errors: [{ code: 'TOOMANYREQUESTS' }] });
    expect(refused.headers.connection).not.toBe('close');
    await conn.write(requestHead('GET', '/healthz', {}));
    expect((await conn.response()).status).toBe(200);
    conn.close();
  });

  it('never limits /healthz', async () => {
    for (let i = 0; i < 20; i++) expect((await fetch(`${server.url}/healthz`, from('198.51.100.4'))).status).toBe(200);
  });
});

describe('pip', () => {
  const wheelPath = () => `/root/hosted/files/${sha256(alpha.wheel)}/${alpha.wheelFilename}`;
  const pip = (on: Velodex, venv: string, args: string[], allowFailure = false) =>
    run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', `${on.url}/root/hosted/simple/`, ...args, 'alpha'], { env: CLEAN_ENV, allowFailure });

  it('shows the 429 when it may not retry', async () => {
    const venv = await freshPipVenv();
    const denied = await pip(server, venv, ['--retries', '0'], true);
    expect(denied.code).not.toBe(0);
    expect(denied.stdout + denied.stderr).toMatch(/429/);
    expect(events(server, 'rate_limit').filter((e) => e.client === '127.0.0.1' && e.class === 'download')).toHaveLength(1);
  });

  it('waits Retry-After on its own and installs once the window passed', async () => {
    const patient = await startVelodex({
      config: limitedConfig({ enabled: true, windows: { read: { requests: 100, windowSecs: 60 }, download: { requests: 1, windowSecs: PATIENT_WINDOW_SECS }, write: { requests: 1, windowSecs: 60 } } }),
    });
    try {
      await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${patient.url}/root/hosted/`, '-u', '__token__', '-p', TOKEN, alpha.wheel], {
        env: CLEAN_ENV,
      });
      const venv = await freshPipVenv();
      const mark = patient.logs().length;
      const ok = await pip(patient, venv, []);
      expect(ok.stdout).toMatch(/Successfully installed alpha-1\.0\.0/);
      // The wheel was refused (pip read Retry-After and slept), then served.
      const denials = events(patient, 'rate_limit').filter((e) => e.client === '127.0.0.1' && e.class === 'download');
      expect(denials.length).toBeGreaterThanOrEqual(1);
      expect(requestedPaths(patient, mark).filter((p) => p === wheelPath()).length).toBe(denials.length + 1);
    } finally {
      await patient.stop();
    }
  });
});

describe('trusted proxies', () => {
  it('gives each forwarded client its own budget', async () => {
    const first = await untilDenied(`${server.url}/root/hosted/simple/`, from('203.0.113.10'));
    expect(first.last.status).toBe(429);
    // A proxy hop right of the client is skipped; the client behind it still has its budget.
    const other = await fetch(`${server.url}/root/hosted/simple/`, from('203.0.113.11, 127.0.0.1'));
    expect(other.status).toBe(200);
  });

  it('ignores X-Forwarded-For when no proxy is trusted: one budget', async () => {
    const plain = await startVelodex({ config: limitedConfig({ enabled: true, windows: { read: { requests: 3, windowSecs: 60 } } }) });
    try {
      const first = await untilDenied(`${plain.url}/root/hosted/simple/`, from('203.0.113.20'));
      expect(first.last.status).toBe(429);
      const other = await fetch(`${plain.url}/root/hosted/simple/`, from('203.0.113.21'));
      expect(other.status).toBe(429);
      expect(events(plain, 'rate_limit').map((e) => e.client)).toEqual(['127.0.0.1', '127.0.0.1']);
    } finally {
      await plain.stop();
    }
  });
});

describe('/metrics', () => {
  it('counts denials per class, and is itself in the admin class', async () => {
    const res = await fetch(`${server.url}/metrics`, from('198.51.100.80'));
    expect(res.status).toBe(200);
    const text = await res.text();
    const sample = (name: string, cls: string) => Number(new RegExp(`^velodex_rate_limit_${name}_total\\{class="${cls}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
    expect(sample('denied', 'read')).toBeGreaterThanOrEqual(1);
    expect(sample('denied', 'download')).toBeGreaterThanOrEqual(1);
    expect(sample('allowed', 'admin')).toBeGreaterThanOrEqual(1);
    const again = await fetch(`${server.url}/metrics`, from('198.51.100.80'));
    expect(again.status).toBe(429);
  });
});

describe('security log', () => {
  it('writes one line per denial with the class, the index, the client and the retry delay', () => {
    const denial = events(server, 'rate_limit').find((e) => e.client === '198.51.100.1');
    expect(denial).toMatchObject({ level: 40, event: 'rate_limit', class: 'read', index: 'root/hosted', client: '198.51.100.1' });
    expect(denial?.retry_after).toBeGreaterThanOrEqual(1);
  });

  it('writes one line per failed authentication, with no credential in it', async () => {
    const password = 'not-the-token-9f3a';
    const wrong = { authorization: basicAuth(password, 'someone') };
    const yank = await fetch(`${server.url}/root/hosted/alpha/1.0.0/yank`, { method: 'PUT', ...from('198.51.100.60', wrong) });
    expect(yank.status).toBe(401);
    const manifest = await fetch(`${server.url}/v2/root/oci/app/manifests/latest`, {
      method: 'PUT',
      body: '{}',
      ...from('198.51.100.61', { ...wrong, 'content-type': 'application/vnd.oci.image.manifest.v1+json' }),
    });
    expect(manifest.status).toBe(401);
    const missing = await fetch(`${server.url}/root/hosted/alpha/1.0.0/yank`, { method: 'PUT', ...from('198.51.100.62') });
    expect(missing.status).toBe(401);
    const upload = await fetch(`${server.url}/root/hosted/`, {
      method: 'POST',
      body: '--b\r\nContent-Disposition: form-data; name=":action"\r\n\r\nfile_upload\r\n--b--\r\n',
      ...from('198.51.100.63', { ...wrong, 'content-type': 'multipart/form-data; boundary=b' }),
    });
    expect(upload.status).toBe(401);

    const lines = events(server, 'auth_failed');
    expect(lines.find((e) => e.client === '198.51.100.60')).toMatchObject({ level: 40, index: 'root/hosted', method: 'PUT', reason: 'wrong-credentials' });
    expect(lines.find((e) => e.client === '198.51.100.61')).toMatchObject({ index: 'root/oci', method: 'PUT', reason: 'wrong-credentials' });
    expect(lines.find((e) => e.client === '198.51.100.62')).toMatchObject({ index: 'root/hosted', reason: 'missing-credentials' });
    expect(lines.find((e) => e.client === '198.51.100.63')).toMatchObject({ index: 'root/hosted', method: 'POST', reason: 'wrong-credentials' });
    const text = server.logs();
    expect(text).not.toContain(password);
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain(wrong.authorization.slice('Basic '.length));
    for (const e of [...lines, ...events(server, 'rate_limit')]) expect(JSON.stringify(e)).not.toMatch(/authorization|someone|Basic/i);
  });
});
