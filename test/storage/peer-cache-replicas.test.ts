/**
 * `[storage] peer_cache` with real processes on one MinIO bucket, as replicas behind one Service:
 * `one` (two worker processes, each a member) and `two` (one). Real clients: crane pushes, moves
 * and reads tags, twine uploads, pip downloads, and the Simple page is read as pip reads it.
 *
 * - Warm reads ask the store nothing (MinIO's own request counter says so), and still a write
 *   acknowledged through one replica is what the other serves on its next request.
 * - A replica that cannot be reached (frozen with SIGSTOP) is removed by the writer, which
 *   acknowledges a lease later; thawed, it serves the new tag on its first request and joins again.
 * - A replica that is killed is waited out once, then gone from the members document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, oci, s3Storage, toml } from '../support/config.js';
import { minioObjectGets, startMinio, type Minio } from '../support/minio.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject } from '../python/fixtures/projects.js';
import { hostOf, replicaClients } from './fixtures/replica-clients.js';
import { PEER_TIMING, safetyMarginMs, type MembersDoc } from '../../registry/src/storage/peers/members.js';

const TOKEN = 'peer-token';
const PREFIX = 'peers';
/** What a writer waits after removing a member it could not reach. */
const LEASE_WAIT_MS = PEER_TIMING.leaseMs + safetyMarginMs(PEER_TIMING.leaseMs);

let minio: Minio;
let one: Velodex;
let two: Velodex;
let work: string;

const config = () => toml(s3Storage(minio, { prefix: PREFIX, peerCache: true }), hosted('py', { route: 'team/py', token: TOKEN }), oci.hosted('images', { route: 'team/images', token: TOKEN }));

let clients: ReturnType<typeof replicaClients>;
const crane = (args: string[]) => clients.crane(args);
const pushImage = (via: Velodex, tag: string, seed: string) => clients.pushImage(via, tag, seed);
const pageFiles = (via: Velodex, project: string) => clients.pageFiles(via, project);
const upload = (via: Velodex, files: string[]) => clients.upload(via, files);

/** The digest `via` serves for the tag, checked against the manifest bytes it serves. */
async function servedDigest(via: Velodex, tag: string): Promise<string> {
  const { digest, hashed } = await clients.served(via, tag);
  expect(hashed).toBe(digest);
  return digest;
}

/** MinIO's own count of the object GETs it answered (fresh on every call: `minioObjectGets`). */
const storeGets = () => minioObjectGets(minio.endpoint);

async function members(): Promise<MembersDoc['members']> {
  const body = await minio.client.getObject(minio.bucket, `${PREFIX}/meta/peers/members.json`);
  let text = '';
  for await (const chunk of body) text += (chunk as Buffer).toString();
  return (JSON.parse(text) as MembersDoc).members;
}

/** Waits until every member of `v` may serve from memory (past the join delay of its latest join). */
async function warmedUp(v: Velodex, path: string): Promise<void> {
  await new Promise((r) => setTimeout(r, PEER_TIMING.listMaxAgeMs + safetyMarginMs(PEER_TIMING.listMaxAgeMs)));
  for (let i = 0; i < 4; i++) await fetch(`${v.url}${path}`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
}

beforeAll(async () => {
  minio = await startMinio();
  work = tempDir('velodex-peer-replicas-');
  clients = replicaClients(work, TOKEN);
  one = await startVelodex({ config: config(), env: { VELODEX_WORKERS: '2' } });
  two = await startVelodex({ config: config() });
  for (const v of [one, two]) await clients.login(v);
});

afterAll(async () => {
  await one?.stop();
  await two?.stop();
  await minio?.stop();
});

describe('two replicas on one bucket with peer_cache', () => {
  it('names every worker of both replicas in the members document, each at a listener of its own', async () => {
    await until('three members', async () => (Object.keys(await members()).length === 3 ? true : undefined));
    expect(new Set(Object.values(await members()).map((m) => m.url)).size).toBe(3);
    // `/+status` says what the process that answered sees.
    await until('two to serve from memory', async () => {
      const status = (await (await fetch(`${two.url}/+status`)).json()) as { storage: { peer_cache?: { serving: boolean; members: number; removed: number } } };
      return status.storage.peer_cache?.serving && status.storage.peer_cache.members === 3 ? status.storage.peer_cache : undefined;
    });
  });

  it('answers warm reads from memory, and a tag moved through one replica is served by the other on its next request', async () => {
    const first = await pushImage(one, 'moving', 'peer-a');
    const cold = await storeGets();
    expect(await servedDigest(two, 'moving')).toBe(first);
    // The counter counts: two's first reads of the new tag went to the store.
    expect(await storeGets()).toBeGreaterThan(cold);
    await warmedUp(two, '/v2/team/images/app/manifests/moving');
    const before = await storeGets();
    for (let i = 0; i < 50; i++) {
      const res = await fetch(`${two.url}/v2/team/images/app/manifests/moving`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
      expect(res.headers.get('docker-content-digest')).toBe(first);
      await res.arrayBuffer();
    }
    // Without the cache each of these reads would be two object GETs; what is left are the
    // members' own reads of their document (one a second each).
    expect(await storeGets()).toBeLessThan(before + 15);

    const second = await pushImage(one, 'moving', 'peer-b');
    expect(await servedDigest(two, 'moving')).toBe(second);
    // And the other way, into a replica with two workers: whichever worker answers.
    const third = await pushImage(two, 'moving', 'peer-c');
    for (let i = 0; i < 4; i++) expect(await servedDigest(one, 'moving')).toBe(third);
    await crane(['tag', `${hostOf(two)}/team/images/app:moving`, 'other']);
    for (let i = 0; i < 4; i++) expect(await servedDigest(one, 'other')).toBe(third);
  });

  it('lists a file uploaded through one replica on the other’s next page, and pip downloads it there', async () => {
    const v1 = await buildProject('peered', '1.0');
    const v2 = await buildProject('peered', '2.0');
    await upload(two, [v1.wheel]);
    expect(await pageFiles(one, 'peered')).toEqual([v1.wheelFilename]);
    expect(await pageFiles(one, 'peered')).toEqual([v1.wheelFilename]);
    await upload(two, [v2.wheel]);
    expect(await pageFiles(one, 'peered')).toEqual([v1.wheelFilename, v2.wheelFilename].sort());
    const dir = tempDir('velodex-peer-pip-');
    await run('python3', ['-m', 'pip', 'download', '--no-deps', '--disable-pip-version-check', '--index-url', `${one.url}/team/py/simple/`, '-d', dir, 'peered==2.0'], { timeoutMs: 120_000 });
  });

  it('removes a frozen replica and acknowledges a lease later; thawed, it serves the new tag at once and joins again', async () => {
    const first = await pushImage(one, 'frozen', 'peer-d');
    await warmedUp(two, '/v2/team/images/app/manifests/frozen');
    expect(await servedDigest(two, 'frozen')).toBe(first);
    const idsBefore = Object.keys(await members());
    process.kill(two.pid, 'SIGSTOP');
    let moved: string;
    try {
      const started = performance.now();
      moved = await pushImage(one, 'frozen', 'peer-e');
      // The push came back only after the frozen replica's lease (a lower bound: load only adds).
      expect(performance.now() - started).toBeGreaterThanOrEqual(LEASE_WAIT_MS);
    } finally {
      process.kill(two.pid, 'SIGCONT');
    }
    expect(await servedDigest(two, 'frozen')).toBe(moved);
    // It was removed, noticed, and joined again under a new id (logged as a warning).
    await until('the thawed replica to join again', async () => {
      const now = Object.keys(await members());
      return now.length === 3 && now.filter((id) => !idsBefore.includes(id)).length === 1 ? true : undefined;
    });
    await until('the warning in its log', async () => (/could not reach this one's listener at http:\/\/127\.0\.0\.1:\d+ and removed it/.test(two.logs()) ? true : undefined));
  });

  it('waits out a killed replica once; it is then gone from the members', async () => {
    const killed = await startVelodex({ config: config() });
    await until('four members', async () => (Object.keys(await members()).length === 4 ? true : undefined));
    // Until every writer's read of the members names it, it keeps nothing and nobody waits for it.
    await new Promise((r) => setTimeout(r, PEER_TIMING.listMaxAgeMs + safetyMarginMs(PEER_TIMING.listMaxAgeMs)));
    process.kill(killed.pid, 'SIGKILL');
    const before = await pushImage(one, 'after-kill', 'peer-f');
    expect(await servedDigest(two, 'after-kill')).toBe(before);
    expect(Object.keys(await members())).toHaveLength(3);
    await killed.stop().catch(() => undefined);
  });
});
