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
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, oci, s3Storage, toml } from '../support/config.js';
import { startMinio, type Minio } from '../support/minio.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject } from '../python/fixtures/projects.js';

const BOUND_MS = 4000;
const TOKEN = 'replica-token';
const SIMPLE_JSON = 'application/vnd.pypi.simple.v1+json';

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

const hostOf = (v: Velodex) => `127.0.0.1:${v.port}`;

function crane(args: string[]) {
  return run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, timeoutMs: 120_000 });
}

/** Pushes a one-layer image as `tag` through `via`; returns its manifest digest. */
async function pushImage(via: Velodex, tag: string, seed: string): Promise<string> {
  const image = buildImage({ seed, layers: 1, bigFileSize: 2048 });
  const layout = writeLayout(join(work, `layout-${seed}`), [{ tag, item: image }]);
  await crane(['push', layout, `${hostOf(via)}/team/images/app:${tag}`]);
  return image.manifest.descriptor.digest;
}

/** The digest `via` serves for the tag, after checking the manifest bytes hash to it (never a torn answer). */
async function servedDigest(via: Velodex, tag: string): Promise<string> {
  const manifest = (await crane(['manifest', `${hostOf(via)}/team/images/app:${tag}`])).stdout;
  const digest = (await crane(['digest', `${hostOf(via)}/team/images/app:${tag}`])).stdout.trim();
  const hashed = `sha256:${createHash('sha256').update(manifest).digest('hex')}`;
  // Two requests: a change may land between them, and then both must still be whole versions.
  return hashed === digest ? digest : hashed;
}

async function pageFiles(via: Velodex, project: string): Promise<string[]> {
  const res = await fetch(`${via.url}/team/py/simple/${project}/`, { headers: { accept: SIMPLE_JSON } });
  if (res.status === 404) return [];
  expect(res.status).toBe(200);
  const page = (await res.json()) as { files: { filename: string }[] };
  return page.files.map((f) => f.filename).sort();
}

async function upload(via: Velodex, files: string[]): Promise<void> {
  await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${via.url}/team/py/`, '-u', '__token__', '-p', TOKEN, ...files], { env: { NO_COLOR: '1' } });
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
  near = await startVelodex({ config: config(BOUND_MS) });
  far = await startVelodex({ config: config() });
  for (const v of [near, far]) await run(tool('crane'), ['auth', 'login', hostOf(v), '-u', '__token__', '--password-stdin', '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, input: TOKEN });
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
    if (performance.now() - readAt < BOUND_MS - 500) expect(seen).toBe(first);
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
