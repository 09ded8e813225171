/**
 * A server told to stop (SIGTERM, as Kubernetes stops a pod) drains its kept-alive connections
 * before it closes them. Behind a Service a client's kept-alive connection still leads to the
 * stopping pod; a request it sends there after the signal is answered, with `Connection: close`,
 * and the connection ends after that answer, so the client's next request opens a new connection
 * (to a pod that stays). A connection that stays idle is closed once the short drain is over, and
 * the process exits without waiting out the keep-alive timeout. As one process (a pod's default)
 * and with two workers. Raw sockets: the test must hold one connection and choose when to reuse it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connections, hosted, toml } from '../support/config.js';
import { alive } from '../support/dockerd.js';
import { RawConnection, requestHead, type RawResponse } from '../support/raw-http.js';
import { until } from '../support/until.js';
import { startVelodex, type Velodex } from '../support/velodex.js';

/** Longer than the drain and a stop; reaching it means the server never acted. */
const HUNG_MS = 20_000;
/** The drain the tests give (1 s by default): room for a loaded machine to reuse the connection within it. */
const DRAIN_SECS = 5;

let server: Velodex | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function get(conn: RawConnection, path: string): Promise<RawResponse> {
  expect(await conn.write(requestHead('GET', path, {}))).toBe(true);
  return conn.response();
}

/** The log lines in which a serving process said it is shutting down (not the workers' primary). */
function shuttingDown(s: Velodex): number {
  return s
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{') && (JSON.parse(l) as { msg?: string }).msg === 'shutting down').length;
}

describe.each([
  { name: 'one process', args: [], processes: 1 },
  { name: 'two workers', args: ['--workers', '2'], processes: 2 },
])('a stopping server, $name', ({ args, processes }) => {
  it('answers a request on a kept-alive connection with Connection: close, closes an idle one after the drain, and exits', async () => {
    server = await startVelodex({ args, config: toml(connections({ drainSecs: DRAIN_SECS }), hosted('rel')) });
    const s = server;
    const reused = await RawConnection.open(s.url);
    const idle = await RawConnection.open(s.url);
    for (const conn of [reused, idle]) {
      const first = await get(conn, '/healthz');
      expect(first.status).toBe(200);
      expect(first.headers.connection).not.toBe('close');
    }

    process.kill(s.pid, 'SIGTERM');
    await until('every serving process shutting down', async () => (shuttingDown(s) === processes ? true : undefined), { timeoutMs: HUNG_MS, intervalMs: 10 });
    // The client reuses its connection after the signal, as one behind a Service does before it
    // learns the pod is going: answered whole, told to close, and closed after the answer.
    const after = await get(reused, '/+api');
    expect(after.status).toBe(200);
    expect(after.headers.connection).toBe('close');
    await until('the reused connection closed after its answer', async () => (reused.isEnded ? true : undefined), { timeoutMs: HUNG_MS, intervalMs: 10 });

    // The connection nobody used again is closed by the server, and the process exits well before
    // the 75 s keep-alive timeout would have closed it.
    await until('the idle connection closed', async () => (idle.isEnded ? true : undefined), { timeoutMs: HUNG_MS, intervalMs: 10 });
    await until('the process gone', async () => (alive(s.pid) ? undefined : true), { timeoutMs: HUNG_MS, intervalMs: 10 });
    expect(s.logs()).not.toContain('"level":50');
  }, 60_000);
});
