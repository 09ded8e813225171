/**
 * What an earlier velodex stored, read by this one (test/fixtures/upgrade: a store written by
 * commit 3513a71 through real clients), on both backends: the filesystem store as it was left,
 * and the s3 store's objects put into a fresh MinIO bucket. Before the server starts, this
 * version's garbage collection runs on it with a grace period already past, so a reference the
 * new marker failed to see would lose its bytes. Then, with every upstream gone:
 *
 * - pip gets the hosted project (the yanked release still passed over) and the cached one, and
 *   every file listed comes back with the sha256 it was uploaded with;
 * - crane resolves every tag to the digest it was pushed or pulled as, and pulls each image whole;
 * - twine and crane write to the old store, and what they wrote is read back.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cached, gc, hosted, oci, s3Storage, toml, type ConfigPart } from '../support/config.js';
import { startMinio, type Minio } from '../support/minio.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { CLI, REPO, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV } from '../python/fixtures/clients.js';
import { buildProject } from '../python/fixtures/projects.js';

const FIXTURE = join(REPO, 'test', 'fixtures', 'upgrade');
const TOKEN = 'upgrade-fixture-token';
/** Nothing listens here: the upstreams are gone, what was cached is served from the store. */
const GONE = 'http://127.0.0.1:9';

interface Manifest {
  python: { route: string; project: string; version: string; filename: string; sha256: string; yanked?: boolean }[];
  oci: { repo: string; tag: string; digest: string }[];
}
const manifest = JSON.parse(readFileSync(join(FIXTURE, 'manifest.json'), 'utf8')) as Manifest;

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

function indexes() {
  return [
    hosted('py', { route: 'team/py', token: TOKEN }),
    cached('pypi', `${GONE}/simple/`, { route: 'team/pypi' }),
    oci.hosted('images', { route: 'team/images', token: TOKEN }),
    oci.cached('hub', GONE, { route: 'hub' }),
  ];
}

/** One backend's store, opened by this version: gc first (grace 1 s, long past), then the server. */
async function openOld(dataDir: string, storage: ConfigPart[]): Promise<{ server: Velodex; gcReport: string }> {
  const config = toml(...storage, gc({ grace: 1 }), ...indexes());
  const configFile = join(dataDir, 'velodex.toml');
  writeFileSync(configFile, config);
  const report = await run(process.execPath, [CLI, 'gc', '--config', configFile, '--data-dir', dataDir]);
  const server = await startVelodex({ dataDir, config });
  return { server, gcReport: report.stdout };
}

function readsEverything(open: () => Promise<{ server: Velodex; gcReport: string }>) {
  let server: Velodex;
  let gcReport: string;
  let work: string;
  const env = () => ({ ...CLEAN_ENV, HOME: work, DOCKER_CONFIG: join(work, 'docker') });
  const host = () => new URL(server.url).host;
  const crane = (args: string[]) => run(tool('crane'), [...args, '--insecure'], { env: env() });

  beforeAll(async () => {
    work = tempDir('velodex-upgrade-');
    ({ server, gcReport } = await open());
    await run(tool('crane'), ['auth', 'login', host(), '-u', '__token__', '--password-stdin', '--insecure'], { env: env(), input: TOKEN });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("this version's garbage collection finds every stored object referenced", () => {
    expect(gcReport).toMatch(/blobs deleted: 0 \(0 bytes\)/);
    expect(gcReport).toMatch(/holds released: 0/);
  });

  it('pip gets the hosted project (not the yanked release) and the cached one, upstream gone', async () => {
    const hostedDl = join(work, 'pip-hosted');
    await run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '-d', hostedDl, '--index-url', `${server.url}/team/py/simple/`, 'up-old'], { env: env() });
    const wheel = manifest.python.find((f) => f.project === 'up-old' && f.version === '1.0' && f.filename.endsWith('.whl'))!;
    expect(readdirSync(hostedDl)).toEqual([wheel.filename]);
    expect(sha256(readFileSync(join(hostedDl, wheel.filename)))).toBe(wheel.sha256);
    const cachedDl = join(work, 'pip-cached');
    await run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '-d', cachedDl, '--index-url', `${server.url}/team/pypi/simple/`, 'up-demo==1.0'], { env: env() });
    const demo = manifest.python.find((f) => f.project === 'up-demo')!;
    expect(sha256(readFileSync(join(cachedDl, demo.filename)))).toBe(demo.sha256);
  });

  it('lists every stored file with its sha256 and yank, and serves its bytes', async () => {
    for (const f of manifest.python) {
      const page = (await (await fetch(`${server.url}/${f.route}/simple/${f.project}/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } })).json()) as {
        files: { filename: string; url: string; hashes: { sha256: string }; yanked: unknown }[];
      };
      const listed = page.files.find((x) => x.filename === f.filename);
      expect(listed?.hashes.sha256, f.filename).toBe(f.sha256);
      expect(Boolean(listed?.yanked), f.filename).toBe(f.yanked === true);
      const bytes = Buffer.from(await (await fetch(new URL(listed!.url, `${server.url}/${f.route}/simple/${f.project}/`))).arrayBuffer());
      expect(sha256(bytes), f.filename).toBe(f.sha256);
    }
  });

  it('crane resolves every tag to its digest and pulls each image whole, upstream gone', async () => {
    for (const [i, image] of manifest.oci.entries()) {
      const ref = `${host()}/${image.repo}:${image.tag}`;
      expect((await crane(['digest', ref])).stdout.trim(), ref).toBe(image.digest);
      // crane checks every blob's digest as it writes the layout.
      await crane(['pull', '--format', 'oci', ref, join(work, `pull-${i}`)]);
    }
  });

  it('twine and crane write to the old store, and what they wrote is read back', async () => {
    const next = await buildProject('up-old', '1.2');
    await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/team/py/`, '-u', '__token__', '-p', TOKEN, next.wheel], { env: env() });
    const dl = join(work, 'pip-next');
    await run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '-d', dl, '--index-url', `${server.url}/team/py/simple/`, 'up-old'], { env: env() });
    expect(readdirSync(dl)).toEqual([next.wheelFilename]);
    const image = buildImage({ seed: 'upgrade-after', layers: 1, bigFileSize: 2048 });
    await crane(['push', writeLayout(join(work, 'after'), [{ tag: 'v2', item: image }]), `${host()}/team/images/app:v2`]);
    expect((await crane(['digest', `${host()}/team/images/app:v2`])).stdout.trim()).toBe(image.manifest.descriptor.digest);
    // The old tags are where they were.
    expect((await crane(['digest', `${host()}/team/images/app:v1`])).stdout.trim()).toBe(manifest.oci[0]!.digest);
  });
}

describe('a filesystem store written by an earlier velodex', () => {
  readsEverything(async () => {
    const dataDir = tempDir('velodex-upgrade-fs-');
    execFileSync('tar', ['-xzf', join(FIXTURE, 'fs-store.tar.gz'), '-C', dataDir]);
    return openOld(dataDir, []);
  });
});

describe('an s3 store written by an earlier velodex', () => {
  let minio: Minio;
  afterAll(async () => {
    await minio?.stop();
  });
  readsEverything(async () => {
    minio = await startMinio();
    const objects = tempDir('velodex-upgrade-objects-');
    execFileSync('tar', ['-xzf', join(FIXTURE, 's3-objects.tar.gz'), '-C', objects]);
    const prefix = 'upgraded';
    for (const path of files(objects)) await minio.client.putObject(minio.bucket, `${prefix}/${relative(objects, path)}`, readFileSync(path));
    return openOld(tempDir('velodex-upgrade-s3-'), [s3Storage(minio, { prefix })]);
  });
});

/** Every file under `dir`, depth first. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}
