/**
 * Three velodex processes on one MinIO bucket act as one OCI registry, driven by crane: a
 * multi-platform image pushed through A is copied by crane from A to B and pulled through C with
 * every platform intact; a tag moved through A is what B resolves next; the catalog of every
 * process follows pushes and deletes made through another.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../support/cluster.js';
import { oci, toml } from '../support/config.js';
import { allBlobs, buildImage, buildIndex, layoutMismatches, readLayout, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { serverStores } from '../support/store-probe.js';
import { tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'mp-oci-token-6b3d';
let cluster: Cluster;
let a: Velodex;
let b: Velodex;
let c: Velodex;
let work: string;
let env: Record<string, string>;

beforeAll(async () => {
  cluster = await startCluster(
    3,
    toml(oci.hosted('images', { route: 'team/images', token: TOKEN })),
  );
  [a, b, c] = cluster.nodes as [Velodex, Velodex, Velodex];
  work = tempDir('velodex-mp-crane-');
  env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  for (const node of cluster.nodes) await crane(['auth', 'login', host(node), '-u', '__token__', '--password-stdin'], TOKEN);
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

const host = (node: Velodex) => `127.0.0.1:${node.port}`;
const repo = (node: Velodex, name: string) => `${host(node)}/team/images/${name}`;
const out = (r: RunResult) => r.stdout.trim();

function crane(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env, input, allowFailure, timeoutMs: 180_000 });
}

async function catalog(node: Velodex): Promise<string[]> {
  return out(await crane(['catalog', host(node)])).split('\n').filter((l) => l !== '');
}

describe('three processes on one bucket, through crane', () => {
  it('a multi-platform image pushed through A, copied by crane from A to B, pulls whole through C', async () => {
    const index = buildIndex('mp-multi');
    const src = writeLayout(join(work, 'multi-src'), [{ tag: '1.0', item: index }]);
    await crane(['push', src, `${repo(a, 'app')}:1.0`]);

    await crane(['copy', `${repo(a, 'app')}:1.0`, `${repo(b, 'copy')}:1.0`]);

    for (const name of ['app', 'copy']) {
      const ref = `${repo(c, name)}:1.0`;
      expect(out(await crane(['digest', ref]))).toBe(index.index.descriptor.digest);
      expect(Buffer.from((await crane(['manifest', ref])).stdout).equals(index.index.bytes)).toBe(true);
      for (const image of index.images) {
        const platform = `${image.platform.os}/${image.platform.architecture}`;
        expect(out(await crane(['digest', '--platform', platform, ref]))).toBe(image.manifest.descriptor.digest);
      }
      const pulled = join(work, `pull-${name}`);
      await crane(['pull', '--format', 'oci', ref, pulled]);
      expect(layoutMismatches(readLayout(pulled), allBlobs(index))).toEqual([]);
    }
    for (const node of cluster.nodes) expect(await catalog(node)).toEqual(expect.arrayContaining(['team/images/app', 'team/images/copy']));
  }, 240_000);

  it('a tag moved through A is what B and C resolve next', async () => {
    const first = buildImage({ seed: 'mp-tag-1', layers: 1, bigFileSize: 1024 });
    const second = buildImage({ seed: 'mp-tag-2', layers: 1, bigFileSize: 1024 });
    await crane(['push', writeLayout(join(work, 'tag-1'), [{ tag: 'live', item: first }]), `${repo(a, 'moving')}:live`]);
    expect(out(await crane(['digest', `${repo(b, 'moving')}:live`]))).toBe(first.manifest.descriptor.digest);
    expect(Buffer.from((await crane(['manifest', `${repo(b, 'moving')}:live`])).stdout).equals(first.manifest.bytes)).toBe(true);

    await crane(['push', writeLayout(join(work, 'tag-2'), [{ tag: 'live', item: second }]), `${repo(a, 'moving')}:live`]);
    for (const node of [b, c]) {
      expect(out(await crane(['digest', `${repo(node, 'moving')}:live`]))).toBe(second.manifest.descriptor.digest);
      expect(Buffer.from((await crane(['manifest', `${repo(node, 'moving')}:live`])).stdout).equals(second.manifest.bytes)).toBe(true);
    }

    await crane(['delete', `${repo(c, 'moving')}:live`]);
    expect((await crane(['digest', `${repo(a, 'moving')}:live`], undefined, true)).code).not.toBe(0);
    expect(out(await crane(['ls', repo(b, 'moving')]))).toBe('');
  }, 120_000);

  it('the catalog of every process follows a repository pushed and deleted through another', async () => {
    const image = buildImage({ seed: 'mp-solo', layers: 1, bigFileSize: 512 });
    await crane(['push', writeLayout(join(work, 'solo'), [{ tag: 'v1', item: image }]), `${repo(a, 'solo')}:v1`]);
    expect(await catalog(b)).toContain('team/images/solo');
    expect(await catalog(c)).toContain('team/images/solo');

    await crane(['delete', `${repo(b, 'solo')}@${image.manifest.descriptor.digest}`]);
    expect(await catalog(a)).not.toContain('team/images/solo');
    expect(await catalog(c)).not.toContain('team/images/solo');
    expect(await catalog(c)).toEqual(expect.arrayContaining(['team/images/app', 'team/images/copy', 'team/images/moving']));
  }, 120_000);

  it('a store written before the catalog and digest documents existed still lists and counts', async () => {
    const before = await catalog(a);
    const stores = await serverStores(a.dataDir);
    expect(await stores.meta.delete('oci/images/catalog')).toBe(true);
    expect(await stores.meta.delete('oci/images/repos/moving/_digests')).toBe(true);
    expect(await catalog(b)).toEqual(before);
    expect((await stores.meta.get<{ names: string[] }>('oci/images/catalog'))?.doc.names).toEqual(before.map((n) => n.replace('team/images/', '')));
    // The next push to the repository rebuilds its digest set from its records (two images so far, one more now).
    const third = buildImage({ seed: 'mp-tag-3', layers: 1, bigFileSize: 1024 });
    await crane(['push', writeLayout(join(work, 'tag-3'), [{ tag: 'live', item: third }]), `${repo(c, 'moving')}:live`]);
    expect((await stores.meta.get<{ names: string[] }>('oci/images/repos/moving/_digests'))?.doc.names).toHaveLength(3);
  }, 120_000);
});
