/**
 * Webhooks from three velodex processes on one MinIO bucket: every process sees every pending
 * delivery in the shared outbox, and each event still reaches the receiver once. A process killed
 * while it holds a delivery's lease (the receiver holding the request open) leaves the delivery
 * to another process once the lease has expired.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { hosted, toml } from '../support/config.js';
import { startCluster, type Cluster } from '../support/cluster.js';
import { storeProbe } from '../support/store-probe.js';
import type { Velodex } from '../support/velodex.js';
import { outboxIds, Receiver, until } from './receiver.js';
import type { StoredDelivery } from '../../registry/src/events/types.js';

const TOKEN = 'mp-upload-token-41c7';
const receiver = new Receiver();
let cluster: Cluster;
let projects: BuiltProject[];

beforeAll(async () => {
  projects = await Promise.all(['mp-one', 'mp-two', 'mp-three', 'mp-four'].map((n) => buildProject(n, '1.0')));
  await receiver.start();
  cluster = await startCluster(
    3,
    toml(hosted('rel', { token: TOKEN, webhooks: [{ url: `${receiver.url}/hook`, events: ['upload'] }] })),
  );
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
  await receiver.stop();
});

const upload = async (node: Velodex, file: string) => {
  const res = await postUpload({ url: `${node.url}/root/rel/`, token: TOKEN, file });
  expect(res.status, res.body).toBe(200);
};

const deliveryId = (headers: Record<string, unknown>) => String(headers['x-velodex-delivery']);
const drained = (node: Velodex, timeoutMs: number) =>
  until(async () => (await outboxIds(node.dataDir)).length === 0, timeoutMs, async () => `outbox still holds ${(await outboxIds(node.dataDir)).join(', ')}`);

describe('webhooks from three processes on one bucket', () => {
  it('delivers each event once, also when every process knows every pending delivery', async () => {
    const [a, b, c] = cluster.nodes as [Velodex, Velodex, Velodex];
    // The receiver is down while the uploads land, so the deliveries stay in the outbox long
    // enough for every process's rescan to find the ones the others wrote: then all three race
    // for each retry.
    const port = receiver.port;
    await receiver.stop();
    const files = projects.slice(0, 3).flatMap((p) => [p.wheel, p.sdist]);
    const nodes = [a, b, c];
    for (const [i, file] of files.entries()) await upload(nodes[i % 3]!, file);
    const seenElsewhere = (n: Velodex) => n.logs().includes('webhook deliveries of other processes found in the outbox');
    await until(() => nodes.every(seenElsewhere), 60_000, () => `rescans seen on ${nodes.filter(seenElsewhere).length} of 3 processes`);
    await receiver.start(port);

    await receiver.waitFor('/hook', files.length, 90_000);
    await drained(a, 30_000);
    // The outbox is empty, so every send has finished: a duplicate would be here by now.
    const received = receiver.at('/hook');
    const ids = received.map((d) => deliveryId(d.headers));
    expect(new Set(ids).size).toBe(files.length);
    expect(ids).toHaveLength(files.length);
    expect(received.map((d) => (d.json.file as { filename: string }).filename).sort()).toEqual(files.map((f) => f.split('/').pop()).sort());
  }, 240_000);

  it('a process killed while it holds the lease leaves the delivery to another after the lease', async () => {
    const before = receiver.at('/hook').length;
    receiver.stall.add('/hook');
    const [a] = cluster.nodes as [Velodex];
    await upload(a, projects[3]!.wheel);
    await until(() => receiver.stalled.length === 1, 30_000, () => 'no delivery reached the stalled receiver');
    const stalledId = deliveryId(receiver.stalled[0]!.headers);

    // Who holds the lease: the owner written into the outbox document (`<host>:<pid>:<random>`).
    const probe = await storeProbe(a.dataDir);
    const leased = await probe.doc<StoredDelivery>(`events/outbox/${stalledId}`);
    expect(leased?.lease).toBeDefined();
    const holderPid = Number(leased!.lease!.owner.split(':')[1]);
    const holder = cluster.nodes.find((n) => n.pid === holderPid);
    expect(holder, `lease owner ${leased!.lease!.owner}`).toBeDefined();
    process.kill(holderPid, 'SIGKILL');

    const survivor = cluster.nodes.find((n) => n !== holder)!;
    // Lease (30 s) plus a rescan at most; bounded, not timed.
    await receiver.waitFor('/hook', before + 1, 90_000);
    await drained(survivor, 30_000);
    const after = receiver.at('/hook').slice(before);
    expect(after.map((d) => deliveryId(d.headers))).toEqual([stalledId]);
    expect(after[0]!.body.equals(receiver.stalled[0]!.body)).toBe(true);
    expect(survivor.logs() + cluster.nodes.filter((n) => n !== holder && n !== survivor)[0]!.logs()).toContain('webhook delivered');
  }, 180_000);
});
