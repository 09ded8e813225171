/**
 * crane (go-containerregistry) against velodex's hosted OCI index: push from an OCI layout, pull,
 * copy between repositories, tag, list, read manifests/configs/blobs, export, delete. Credentials
 * come from `crane auth login` into a private DOCKER_CONFIG, as a user would set them up.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allBlobs, buildImage, buildIndex, layoutMismatches, readLayout, sha256, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { clientSuite, curlRepush } from './client-setup.js';

const c = clientSuite('crane', {
  env: (work) => ({ DOCKER_CONFIG: join(work, 'docker') }),
  setup: async ({ host, token }) => {
    await crane(['auth', 'login', host, '-u', '__token__', '--password-stdin'], token);
  },
});

function crane(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env: c.env, input, allowFailure, timeoutMs: 180_000 });
}

const out = (r: RunResult) => r.stdout.trim();

describe('crane', () => {
  it('pushes a layout image; digest, manifest, config, blobs and pull match what was built', async () => {
    const image = buildImage({ seed: 'crane-single' });
    const src = writeLayout(join(c.work, 'single-src'), [{ tag: 'v1', item: image }]);
    const ref = `${c.host}/root/oci/crane/app:v1`;

    await crane(['push', src, ref]);

    expect(out(await crane(['digest', ref]))).toBe(image.manifest.descriptor.digest);
    expect(Buffer.from((await crane(['manifest', ref])).stdout).equals(image.manifest.bytes)).toBe(true);
    expect(Buffer.from((await crane(['config', ref])).stdout).equals(image.config.bytes)).toBe(true);
    const layer = image.layers[0];
    expect(layer).toBeDefined();
    const blobFile = join(c.work, 'layer0.tgz');
    await run('sh', ['-c', `"$0" blob --insecure "$1" > "$2"`, tool('crane'), `${c.host}/root/oci/crane/app@${layer?.descriptor.digest}`, blobFile], { env: c.env });
    expect(readFileSync(blobFile).equals(layer?.bytes ?? Buffer.alloc(0))).toBe(true);

    const pulled = join(c.work, 'single-pull');
    await crane(['pull', '--format', 'oci', ref, pulled]);
    const layout = readLayout(pulled);
    expect(layout.manifests.map((d) => d.digest)).toContain(image.manifest.descriptor.digest);
    expect(layoutMismatches(layout, allBlobs(image))).toEqual([]);
  });

  it('tags, lists and deletes a tag without losing the image', async () => {
    const image = buildImage({ seed: 'crane-tags', layers: 1, bigFileSize: 2048 });
    const src = writeLayout(join(c.work, 'tags-src'), [{ tag: 'v1', item: image }]);
    const repo = `${c.host}/root/oci/crane/tags`;
    await crane(['push', src, `${repo}:v1`]);
    for (const tag of ['v2', 'latest', 'release-2024.01', 'A_b-c.d']) await crane(['tag', `${repo}:v1`, tag]);

    expect(out(await crane(['ls', repo])).split('\n').sort()).toEqual(['A_b-c.d', 'latest', 'release-2024.01', 'v1', 'v2']);
    expect(out(await crane(['digest', `${repo}:release-2024.01`]))).toBe(image.manifest.descriptor.digest);

    await crane(['delete', `${repo}:v2`]);
    expect(out(await crane(['ls', repo])).split('\n').sort()).toEqual(['A_b-c.d', 'latest', 'release-2024.01', 'v1']);
    expect(out(await crane(['digest', `${repo}:v1`]))).toBe(image.manifest.descriptor.digest);
    const gone = await crane(['digest', `${repo}:v2`], undefined, true);
    expect(gone.code).not.toBe(0);
  });

  it('pushes a multi-platform index and resolves each platform', async () => {
    const index = buildIndex('crane-multi');
    const src = writeLayout(join(c.work, 'multi-src'), [{ tag: 'multi', item: index }]);
    const ref = `${c.host}/root/oci/crane/multi:1.0`;

    await crane(['push', src, ref]);

    expect(out(await crane(['digest', ref]))).toBe(index.index.descriptor.digest);
    expect(Buffer.from((await crane(['manifest', ref])).stdout).equals(index.index.bytes)).toBe(true);
    for (const image of index.images) {
      const platform = `${image.platform.os}/${image.platform.architecture}`;
      expect(out(await crane(['digest', '--platform', platform, ref]))).toBe(image.manifest.descriptor.digest);
      expect(Buffer.from((await crane(['config', '--platform', platform, ref])).stdout).equals(image.config.bytes)).toBe(true);
    }

    const pulled = join(c.work, 'multi-pull');
    await crane(['pull', '--format', 'oci', ref, pulled]);
    const layout = readLayout(pulled);
    expect(layout.manifests.map((d) => d.digest)).toContain(index.index.descriptor.digest);
    expect(layoutMismatches(layout, allBlobs(index))).toEqual([]);
  });

  it('copies an index to another repository (cross-repository blobs) with identical digests', async () => {
    const index = buildIndex('crane-copy');
    const src = writeLayout(join(c.work, 'copy-src'), [{ tag: 'multi', item: index }]);
    const from = `${c.host}/root/oci/crane/copy-from:v1`;
    const to = `${c.host}/root/oci/crane/elsewhere/copy-to:v1`;
    await crane(['push', src, from]);

    await crane(['copy', from, to]);

    expect(out(await crane(['digest', to]))).toBe(index.index.descriptor.digest);
    for (const image of index.images) {
      const byDigest = `${c.host}/root/oci/crane/elsewhere/copy-to@${image.manifest.descriptor.digest}`;
      expect(Buffer.from((await crane(['manifest', byDigest])).stdout).equals(image.manifest.bytes)).toBe(true);
    }
    const pulled = join(c.work, 'copy-pull');
    await crane(['pull', '--format', 'oci', to, pulled]);
    expect(layoutMismatches(readLayout(pulled), allBlobs(index))).toEqual([]);
  });

  it('exports the flattened filesystem of a pushed image', async () => {
    const image = buildImage({ seed: 'crane-export', layers: 3, bigFileSize: 100_000 });
    const src = writeLayout(join(c.work, 'export-src'), [{ tag: 'v1', item: image }]);
    const ref = `${c.host}/root/oci/crane/export:v1`;
    await crane(['push', src, ref]);

    const tarFile = join(c.work, 'export.tar');
    await crane(['export', ref, tarFile]);
    const listing = (await run('tar', ['-tf', tarFile])).stdout.split('\n');
    for (const files of image.files) for (const path of files.keys()) expect(listing).toContain(path);
    const big = [...(image.files.at(-1)?.keys() ?? [])].find((p) => p.endsWith('big.bin')) ?? '';
    const extracted = await run('sh', ['-c', 'tar -xOf "$0" "$1" | sha256sum', tarFile, big]);
    const expected = image.files.at(-1)?.get(big) ?? Buffer.alloc(0);
    expect(`sha256:${extracted.stdout.split(' ')[0]}`).toBe(sha256(expected));
  });

  it('deletes a manifest by digest', async () => {
    const image = buildImage({ seed: 'crane-delete', layers: 1, bigFileSize: 2048 });
    const src = writeLayout(join(c.work, 'delete-src'), [{ tag: 'v1', item: image }]);
    const repo = `${c.host}/root/oci/crane/delete`;
    await crane(['push', src, `${repo}:v1`]);
    const byDigest = `${repo}@${image.manifest.descriptor.digest}`;
    await crane(['manifest', byDigest]);

    await crane(['delete', byDigest]);

    const gone = await crane(['manifest', byDigest], undefined, true);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toMatch(/MANIFEST_UNKNOWN|404/);
  });

  it('pulls with the pushed media type after the manifest was re-pushed with curl', async () => {
    const image = buildImage({ seed: 'crane-repush', layers: 1, bigFileSize: 2048 });
    const src = writeLayout(join(c.work, 'repush-src'), [{ tag: 'v1', item: image }]);
    const ref = `${c.host}/root/oci/crane/repush:v1`;
    await crane(['push', src, ref]);

    // curl's form Content-Type is no manifest type: refused, or a no-op when the body's own
    // mediaType is the one already recorded. Either way nothing a client reads changes.
    for (const reference of ['v1', image.manifest.descriptor.digest]) {
      expect([201, 400]).toContain(await curlRepush(c, 'root/oci/crane/repush', reference, image.manifest.bytes));
    }
    const served = await fetch(`${c.server.url}/v2/root/oci/crane/repush/manifests/v1`, { method: 'HEAD' });
    expect(served.headers.get('content-type')).toBe(image.manifest.descriptor.mediaType);

    expect(out(await crane(['digest', ref]))).toBe(image.manifest.descriptor.digest);
    expect(Buffer.from((await crane(['config', ref])).stdout).equals(image.config.bytes)).toBe(true);
    const pulled = join(c.work, 'repush-pull');
    await crane(['pull', '--format', 'oci', ref, pulled]);
    expect(layoutMismatches(readLayout(pulled), allBlobs(image))).toEqual([]);
  });

  it('refuses a push without credentials', async () => {
    const image = buildImage({ seed: 'crane-anon', layers: 1, bigFileSize: 1024 });
    const src = writeLayout(join(c.work, 'anon-src'), [{ tag: 'v1', item: image }]);
    const res = await run(tool('crane'), ['push', '--insecure', src, `${c.host}/root/oci/crane/anon:v1`], {
      env: { DOCKER_CONFIG: join(c.work, 'no-credentials'), HOME: c.work },
      allowFailure: true,
    });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/UNAUTHORIZED|401/);
  });
});
