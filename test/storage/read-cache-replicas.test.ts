/**
 * Two velodex processes on one MinIO bucket, as two replicas behind one Service: `near` with
 * `[storage] read_cache_ms` (the opt-in bounded staleness), `far` with the default. Real clients:
 * crane pushes and reads tags, twine uploads, and the Simple page is read as pip reads it.
 *
 * - The default: what one replica acknowledged, the other serves on its next request.
 * - With the bound: a change made through the other replica is served within the bound (until
 *   then the last version read may be), and always as a whole version: the manifest served hashes
 *   to the digest served beside it, the page is one the store held.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, oci, s3Storage, toml } from '../support/config.js';
import { startMinio, type Minio } from '../support/minio.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject } from '../python/fixtures/projects.js';
import { replicaClients } from './fixtures/replica-clients.js';

const BOUND_MS = 4000;
const TOKEN = 'replica-token';

let minio: Minio;
let near: Velodex;
let far: Velodex;
let work: string;

function config(readCacheMs?: number): string {
  return toml(
    s3Storage(minio, { prefix: 'replicas', ...(readCacheMs ? { readCacheMs } : {}) }),
    hosted('py', { route: 'team/py', token: TOKEN }),
    oci.hosted('images', { route: 'team/images', token: TOKEN }),
  );
}

let clients: ReturnType<typeof replicaClients>;
const pushImage = (via: Velodex, tag: string, seed: string) => clients.pushImage(via, tag, seed);
const pageFiles = (via: Velodex, project: string) => clients.pageFiles(via, project);
const upload = (via: Velodex, files: string[]) => clients.upload(via, files);

/** The digest `via` serves for the tag, after checking the manifest bytes hash to it (never a torn answer). */
async function servedDigest(via: Velodex, tag: string): Promise<string> {
  const { digest, hashed } = await clients.served(via, tag);
  // Two requests: a change may land between them, and then both must still be whole versions.
  return hashed === digest ? digest : hashed;
}

/** Polls `read` until it gives `want`; returns the ms it took from `since`. */
async function msUntil<T>(since: number, read: () => Promise<T>, want: T, limitMs: number): Promise<number> {
  for (;;) {
    if ((await read()) === want) return performance.now() - since;
    if (performance.now() - since > limitMs) throw new Error(`not seen within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  minio = await startMinio();
  work = tempDir('velodex-replicas-');
  clients = replicaClients(work, TOKEN);
  near = await startVelodex({ config: config(BOUND_MS) });
  far = await startVelodex({ config: config() });
  for (const v of [near, far]) await clients.login(v);
});

afterAll(async () => {
  await near?.stop();
  await far?.stop();
  await minio?.stop();
});

describe('two replicas on one bucket', () => {
  it('by default, a tag moved through one replica is served by the other on its next request', async () => {
    const first = await pushImage(near, 'direct', 'replica-a');
    expect(await servedDigest(far, 'direct')).toBe(first);
    const second = await pushImage(near, 'direct', 'replica-b');
    expect(await servedDigest(far, 'direct')).toBe(second);
  });

  it('with read_cache_ms, a tag moved through the other replica is served within the bound, never torn', async () => {
    const first = await pushImage(far, 'bounded', 'replica-c');
    // The repository's tag map may still be the copy near read (or wrote, in the test before)
    // less than the bound ago, without the new tag: unknown until the bound has passed.
    await msUntil(performance.now(), () => servedDigest(near, 'bounded').catch(() => 'unknown'), first, BOUND_MS + 3000);
    const readAt = performance.now();
    const second = await pushImage(far, 'bounded', 'replica-d');
    const movedAt = performance.now();
    const seen = await servedDigest(near, 'bounded');
    // Either whole version; the old one only while the copy read at `readAt` is younger than the bound.
    expect([first, second]).toContain(seen);
    // (Each crane run takes its time on a loaded machine: the copy may be older than `readAt` by two of them.)
    if (performance.now() - readAt < BOUND_MS - 2000) expect(seen).toBe(first);
    const took = await msUntil(movedAt, () => servedDigest(near, 'bounded'), second, BOUND_MS + 3000);
    expect(took).toBeLessThan(BOUND_MS + 1000);
    // Its own writes it serves at once.
    const third = await pushImage(near, 'bounded', 'replica-e');
    expect(await servedDigest(near, 'bounded')).toBe(third);
  });

  it('with read_cache_ms, a file uploaded through the other replica is listed within the bound', async () => {
    const v1 = await buildProject('replicated', '1.0');
    const v2 = await buildProject('replicated', '2.0');
    await upload(far, [v1.wheel]);
    expect(await pageFiles(near, 'replicated')).toEqual([v1.wheelFilename]);
    const uploadedAt = performance.now();
    await upload(far, [v2.wheel]);
    const both = [v1.wheelFilename, v2.wheelFilename].sort().join(' ');
    const took = await msUntil(uploadedAt, async () => (await pageFiles(near, 'replicated')).join(' '), both, BOUND_MS + 3000);
    expect(took).toBeLessThan(BOUND_MS + 1000 + 2000 /* twine's own run */);
    // The default replica lists it on its next request.
    expect((await pageFiles(far, 'replicated')).join(' ')).toBe(both);
  });
});
