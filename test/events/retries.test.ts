/**
 * Delivery retries and the durable outbox: a receiver that fails twice gets the same delivery id
 * and the same body bytes a third time; a delivery enqueued while the receiver is down survives a
 * restart of velodex on the same data dir and arrives once the receiver is back. Waits are bounded
 * by the retry schedule (1 s, 2 s, ...); nothing asserts on elapsed time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { hosted, toml } from '../support/config.js';
import { storeProbe } from '../support/store-probe.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { expectedSignature, outboxIds, Receiver, until } from './receiver.js';

const TOKEN = 'retry-upload-token';
const SECRET = 'retry-hook-secret-61d0';

let project: BuiltProject;
const servers: Velodex[] = [];
const receivers: Receiver[] = [];

function config(receiverUrl: string): string {
  return toml(hosted('rel', { token: TOKEN, webhooks: [{ url: `${receiverUrl}/hook`, secret: { env: 'HOOK_SECRET' } }] }));
}

async function start(receiverUrl: string, dataDir?: string): Promise<Velodex> {
  const server = await startVelodex({ config: config(receiverUrl), env: { HOOK_SECRET: SECRET }, ...(dataDir ? { dataDir } : {}) });
  servers.push(server);
  return server;
}

beforeAll(async () => {
  project = await buildProject('alpha', '1.0');
});

afterAll(async () => {
  for (const s of servers) await s.stop();
  for (const r of receivers) await r.stop();
});

describe('webhook retries', () => {
  it('retries a failing receiver with the same delivery id and body bytes', async () => {
    const receiver = new Receiver();
    receivers.push(receiver);
    await receiver.start();
    receiver.script.set('/hook', [500, 500]);
    const server = await start(receiver.url);
    expect((await postUpload({ url: `${server.url}/root/rel/`, token: TOKEN, file: project.wheel })).status).toBe(200);

    const [first, second, third] = await receiver.waitFor('/hook', 3, 15_000);
    const id = first!.headers['x-velodex-delivery'];
    for (const d of [second!, third!]) {
      expect(d.headers['x-velodex-delivery']).toBe(id);
      expect(d.body.equals(first!.body)).toBe(true);
    }
    for (const d of [first!, second!, third!]) expect(d.headers['x-velodex-signature']).toBe(expectedSignature(SECRET, d));
    await until(async () => (await outboxIds(server.dataDir)).length === 0, 10_000, () => 'outbox to drain');
    expect(receiver.at('/hook')).toHaveLength(3);

    const logs = server.logs();
    expect(logs).toContain('webhook delivery failed; will retry');
    expect(logs).toContain('HTTP 500');
    // The receiver's response body is never logged; neither is the secret.
    expect(logs).not.toContain('do-not-log-this-body');
    expect(logs).not.toContain(SECRET);
  });

  it('keeps a pending delivery across a restart and sends it when the receiver is back', async () => {
    const receiver = new Receiver();
    receivers.push(receiver);
    await receiver.start();
    const port = receiver.port;
    await receiver.stop(); // down: connections are refused

    const dataDir = tempDir();
    const first = await start(`http://127.0.0.1:${port}`, dataDir);
    expect((await postUpload({ url: `${first.url}/root/rel/`, token: TOKEN, file: project.wheel })).status).toBe(200);
    // Enqueued before the upload answered.
    const [pending] = await outboxIds(dataDir);
    expect(pending).toBeDefined();
    await first.stop();
    const stored = await (await storeProbe(dataDir)).doc<{ body: string }>(`events/outbox/${pending}`);
    expect(stored).not.toBeNull();
    expect(JSON.stringify(stored)).not.toContain(SECRET);

    const second = await start(`http://127.0.0.1:${port}`, dataDir);
    await receiver.start(port);
    const [d] = await receiver.waitFor('/hook', 1, 15_000);
    expect(d!.headers['x-velodex-delivery']).toBe(pending);
    expect(d!.body.toString('utf8')).toBe(stored!.body);
    expect(d!.json).toMatchObject({ event: 'upload', project: 'alpha', file: { filename: project.wheelFilename } });
    expect(d!.headers['x-velodex-signature']).toBe(expectedSignature(SECRET, d!));
    await until(async () => (await outboxIds(dataDir)).length === 0, 10_000, () => 'outbox to drain');
    expect(second.logs()).toContain('webhook deliveries resumed from the outbox');
  });
});
