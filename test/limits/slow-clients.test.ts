/**
 * Slow and greedy clients against a real server (child process), over raw sockets: the one client
 * that can stall on purpose, send half a request head, or hold connections open.
 *
 * - A refused write (401 before its body was read) that announces a body and never sends it is
 *   answered and closed within the refusal's own short bound, on a server whose other bounds are
 *   the long defaults; a small body that does come is still read first and the connection kept.
 * - On a server with tight `[connections]` bounds: a body that stops is cut (408, then closed),
 *   a slow upload that keeps moving is not; a head that never finishes is cut; an idle kept-alive
 *   connection is closed; the connection past `max_per_client` is answered 429 and closed, and
 *   the address gets in again once one of its connections closed; a trusted proxy is exempt.
 * - Each cut or refusal leaves a security-log line.
 *
 * Every test speaks from a loopback address of its own (127.0.0.x), so per-address counts never
 * mix. Waits are for a state (an answer, a close); the bounds in them only stop a hung server
 * from hanging the suite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../oci/api-support.js';
import { connections, oci, toml, trustedProxies, type ConfigPart } from '../support/config.js';
import { RawConnection, requestHead, type RawResponse } from '../support/raw-http.js';
import { until } from '../support/until.js';
import { basicAuth, startVelodex, type Velodex } from '../support/velodex.js';

const TOKEN = 'slow-clients-token';
const AUTH = basicAuth(TOKEN);
/** Longer than any bound below; reaching it means the server never acted. */
const HUNG_MS = 20_000;
const BODY_IDLE_SECS = 2;

function config(...extra: ConfigPart[]): string {
  return toml(...extra, oci.hosted('oci', { token: TOKEN }));
}

/** Tight bounds, a cap of two connections per address, and one trusted proxy (exempt from the cap). */
const TIGHT = config(
  trustedProxies(['127.0.0.9']),
  connections({ headersTimeoutSecs: 1, bodyIdleTimeoutSecs: BODY_IDLE_SECS, keepAliveTimeoutSecs: 3, maxPerClient: 2 }),
);

let standard: Velodex;
let tight: Velodex;

beforeAll(async () => {
  // The defaults (60 s body idle): only the refusal's own bound can close a refused write soon.
  [standard, tight] = await Promise.all([startVelodex({ config: config() }), startVelodex({ config: TIGHT })]);
});

afterAll(async () => {
  await Promise.all([standard?.stop(), tight?.stop()]);
});

function failAfter<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing after ${HUNG_MS} ms, the server held on`)), HUNG_MS);
  });
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer));
}

const answer = (conn: RawConnection, what: string): Promise<RawResponse> => failAfter(`${what} (answer)`, conn.response());
const closed = (conn: RawConnection, what: string): Promise<void> => failAfter(`${what} (close)`, conn.ended);

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

function logged(server: Velodex, event: string, match: Record<string, unknown>): Promise<Record<string, unknown>> {
  return until(`a ${event} line like ${JSON.stringify(match)}`, async () => events(server, event).find((e) => Object.entries(match).every(([k, v]) => e[k] === v)), {
    timeoutMs: HUNG_MS,
    context: () => server.logs().slice(-3000),
  });
}

/** Opens an upload session of `root/oci/app` and returns its path. */
async function openSession(server: Velodex, from: string): Promise<string> {
  const conn = await RawConnection.open(server.url, from);
  await conn.write(requestHead('POST', '/v2/root/oci/app/blobs/uploads/', { Authorization: AUTH, 'Content-Length': '0' }));
  const res = await answer(conn, 'POST blobs/uploads');
  conn.close();
  expect(res.status, res.body).toBe(202);
  return String(res.headers.location);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a refused write whose body never comes', () => {
  it('manifest PUT without credentials: 401 and the connection closed, without waiting for the body', async () => {
    const conn = await RawConnection.open(standard.url, '127.0.0.2');
    await conn.write(requestHead('PUT', '/v2/root/oci/app/manifests/v1', { 'Content-Type': 'application/vnd.oci.image.manifest.v1+json', 'Content-Length': '512' }));
    const res = await answer(conn, 'stalled manifest PUT');
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse(res.body)).toMatchObject({ errors: [{ code: 'UNAUTHORIZED' }] });
    await closed(conn, 'stalled manifest PUT');
  });

  it('blob PATCH without credentials, a few bytes sent, then nothing: 401 and closed', async () => {
    const session = await openSession(standard, '127.0.0.3');
    const conn = await RawConnection.open(standard.url, '127.0.0.3');
    await conn.write(requestHead('PATCH', session, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(1024 * 1024) }));
    await conn.write(Buffer.alloc(16, 1));
    const res = await answer(conn, 'stalled blob PATCH');
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe('close');
    await closed(conn, 'stalled blob PATCH');
  });

  it('a chunked PATCH that sends no chunk: 401 and closed', async () => {
    const conn = await RawConnection.open(standard.url, '127.0.0.4');
    await conn.write(requestHead('PATCH', '/v2/root/oci/app/blobs/uploads/no-such-session', { 'Transfer-Encoding': 'chunked' }));
    expect((await answer(conn, 'stalled chunked PATCH')).status).toBe(401);
    await closed(conn, 'stalled chunked PATCH');
  });

  it('still reads a small body that does come, and keeps the connection', async () => {
    const conn = await RawConnection.open(standard.url, '127.0.0.5');
    const manifest = Buffer.from('{"schemaVersion":2}');
    await conn.write(requestHead('PUT', '/v2/root/oci/app/manifests/v1', { 'Content-Type': 'application/vnd.oci.image.manifest.v1+json', 'Content-Length': String(manifest.length) }));
    await conn.write(manifest.subarray(0, 5));
    // A client that writes its whole body before it reads (containerd) gets to finish.
    await sleep(300);
    expect(conn.answered).toBe(false);
    await conn.write(manifest.subarray(5));
    const res = await answer(conn, 'small refused PUT');
    expect(res.status).toBe(401);
    expect(res.headers.connection).not.toBe('close');
    await conn.write(requestHead('GET', '/healthz', {}));
    expect((await answer(conn, 'GET after the refusal')).status).toBe(200);
    conn.close();
  });
});

describe('a stalled body', () => {
  it('is cut after the idle bound: 408, the connection closed, a security-log line', async () => {
    const session = await openSession(tight, '127.0.0.11');
    const conn = await RawConnection.open(tight.url, '127.0.0.11');
    await conn.write(requestHead('PATCH', session, { Authorization: AUTH, 'Content-Type': 'application/octet-stream', 'Content-Length': '1000' }));
    await conn.write(Buffer.alloc(10, 7));
    const res = await answer(conn, 'stalled PATCH');
    expect(res.status).toBe(408);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 408, message: `the request body sent nothing for ${BODY_IDLE_SECS} s; the connection is closed` });
    await closed(conn, 'stalled PATCH');
    const line = await logged(tight, 'connection_cut', { reason: 'body_stalled', client: '127.0.0.11' });
    expect(line).toMatchObject({ level: 40, method: 'PATCH', after_secs: BODY_IDLE_SECS });
    expect(JSON.stringify(line)).not.toContain(TOKEN);
    expect(JSON.stringify(line)).not.toContain(AUTH.slice(6));
  });

  it('a slow upload that keeps moving, longer in all than the bound, is not cut', async () => {
    const session = await openSession(tight, '127.0.0.12');
    const chunks = Array.from({ length: 16 }, (_, i) => Buffer.alloc(1024, i));
    const blob = Buffer.concat(chunks);
    const conn = await RawConnection.open(tight.url, '127.0.0.12');
    await conn.write(requestHead('PATCH', session, { Authorization: AUTH, 'Content-Type': 'application/octet-stream', 'Content-Length': String(blob.length) }));
    // A quarter of a second apart: four seconds in all, twice the idle bound.
    for (const chunk of chunks) {
      await sleep(250);
      expect(await conn.write(chunk)).toBe(true);
    }
    const patched = await answer(conn, 'slow PATCH');
    expect(patched.status, patched.body).toBe(202);
    const hex = sha256(blob);
    await conn.write(requestHead('PUT', `${session}?digest=sha256:${hex}`, { Authorization: AUTH, 'Content-Length': '0' }));
    expect((await answer(conn, 'commit')).status).toBe(201);
    conn.close();
    const stored = await fetch(`${tight.url}/v2/root/oci/app/blobs/sha256:${hex}`);
    expect(Buffer.from(await stored.arrayBuffer()).equals(blob)).toBe(true);
  });
});

describe('headers and idle connections', () => {
  it('a head that never finishes is cut: 408, closed, a security-log line', async () => {
    const conn = await RawConnection.open(tight.url, '127.0.0.13');
    await conn.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    await closed(conn, 'unfinished head');
    expect(conn.pending).toMatch(/^HTTP\/1\.1 408 /);
    expect(await logged(tight, 'connection_cut', { reason: 'headers_timeout', client: '127.0.0.13' })).toMatchObject({ after_secs: 1 });
  });

  it('a connection that sends nothing is closed too', async () => {
    const conn = await RawConnection.open(tight.url, '127.0.0.14');
    await closed(conn, 'silent connection');
  });

  it('an idle kept-alive connection is closed after keep_alive_timeout_secs', async () => {
    const conn = await RawConnection.open(tight.url, '127.0.0.15');
    await conn.write(requestHead('GET', '/healthz', {}));
    const res = await answer(conn, 'GET /healthz');
    expect(res.status).toBe(200);
    expect(res.headers.connection).not.toBe('close');
    await closed(conn, 'idle kept-alive connection');
  });
});

describe('max_per_client', () => {
  /** A connection from `from` that has had one request answered (so the server has counted it). */
  async function served(from: string, path = '/healthz'): Promise<{ conn: RawConnection; res: RawResponse }> {
    const conn = await RawConnection.open(tight.url, from);
    await conn.write(requestHead('GET', path, {}));
    return { conn, res: await answer(conn, `GET ${path} from ${from}`) };
  }

  it('refuses the connection past the cap with 429 and closes it; the address gets in again once one closes', async () => {
    const from = '127.0.0.20';
    const first = await served(from);
    const second = await served(from);
    expect([first.res.status, second.res.status]).toEqual([200, 200]);

    const third = await served(from, '/v2/');
    expect(third.res.status).toBe(429);
    expect(third.res.headers.connection).toBe('close');
    expect(third.res.headers['retry-after']).toBe('1');
    // Under /v2/, in the distribution spec's error shape.
    expect(JSON.parse(third.res.body)).toEqual({
      errors: [{ code: 'TOOMANYREQUESTS', message: 'too many connections from one address: at most 2 at once; reuse a kept-alive connection, or retry once one has closed' }],
    });
    await closed(third.conn, 'refused connection');
    expect(await logged(tight, 'connection_refused', { client: from })).toMatchObject({ reason: 'too_many_connections', limit: 2 });

    // Another address is not held back by this one's count.
    const other = await served('127.0.0.21');
    expect(other.res.status).toBe(200);
    other.conn.close();

    first.conn.close();
    const again = await until('a new connection from the address once one closed', async () => {
      const next = await served(from);
      if (next.res.status === 200) return next;
      next.conn.close();
      return undefined;
    }, { timeoutMs: HUNG_MS, intervalMs: 100 });
    again.conn.close();
    second.conn.close();
  });

  it('never counts a trusted proxy: its pooled connections carry many clients', async () => {
    const conns = await Promise.all([1, 2, 3, 4].map(() => served('127.0.0.9')));
    expect(conns.map((c) => c.res.status)).toEqual([200, 200, 200, 200]);
    for (const c of conns) c.conn.close();
  });
});
