/**
 * regctl (regclient) against velodex's hosted OCI index: `registry set --tls disabled` and
 * `registry login` into a private REGCTL_CONFIG, image copy from and to OCI layouts (`ocidir://`)
 * and between repositories, tag listing and deletion, manifest and blob reads, referrers through
 * `artifact put --subject` / `artifact list`, image delete.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allBlobs, buildImage, buildIndex, layoutMismatches, readLayout, sha256, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { clientSuite } from './client-setup.js';

const c = clientSuite('regctl', {
  env: (work) => ({ REGCTL_CONFIG: join(work, 'regctl.json'), DOCKER_CONFIG: join(work, 'docker') }),
  setup: async ({ host, token }) => {
    await regctl(['registry', 'set', host, '--tls', 'disabled']);
    await regctl(['registry', 'login', host, '-u', '__token__', '--pass-stdin'], token);
  },
});

function regctl(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('regctl'), args, { env: c.env, input, allowFailure, timeoutMs: 180_000 });
}

/** Raw bytes of a command's stdout (blob get writes binary). */
async function bytesOf(args: string[]): Promise<Buffer> {
  const file = join(c.work, `out-${Date.now()}-${Math.random().toString(16).slice(2)}`);
  await run('sh', ['-c', '"$0" "$@" > "$OUT"', tool('regctl'), ...args], { env: { ...c.env, OUT: file } });
  return readFileSync(file);
}

const out = (r: RunResult) => r.stdout.trim();

describe('regctl', () => {
  it('copies a layout image in; digest, manifest, blobs and tags match', async () => {
    const image = buildImage({ seed: 'regctl-single' });
    const src = writeLayout(join(c.work, 'single-src'), [{ tag: 'v1', item: image }]);
    const ref = `${c.host}/root/oci/regctl/app:v1`;

    await regctl(['image', 'copy', `ocidir://${src}:v1`, ref]);

    expect(out(await regctl(['image', 'digest', ref]))).toBe(image.manifest.descriptor.digest);
    expect((await bytesOf(['manifest', 'get', '--format', 'raw-body', ref])).equals(image.manifest.bytes)).toBe(true);
    for (const blob of [image.config, ...image.layers]) {
      expect((await bytesOf(['blob', 'get', `${c.host}/root/oci/regctl/app`, blob.descriptor.digest])).equals(blob.bytes)).toBe(true);
    }
    expect(out(await regctl(['tag', 'ls', `${c.host}/root/oci/regctl/app`])).split('\n')).toEqual(['v1']);
  });

  it('copies a multi-platform index in, across repositories, and back out to a layout', async () => {
    const index = buildIndex('regctl-multi');
    const src = writeLayout(join(c.work, 'multi-src'), [{ tag: 'multi', item: index }]);
    const ref = `${c.host}/root/oci/regctl/multi:1.0`;
    await regctl(['image', 'copy', `ocidir://${src}:multi`, ref]);

    expect(out(await regctl(['image', 'digest', ref]))).toBe(index.index.descriptor.digest);
    for (const image of index.images) {
      const platform = `${image.platform.os}/${image.platform.architecture}`;
      expect(out(await regctl(['image', 'digest', '--platform', platform, ref]))).toBe(image.manifest.descriptor.digest);
    }

    const copy = `${c.host}/root/oci/regctl/other/multi:copy`;
    await regctl(['image', 'copy', ref, copy]);
    expect(out(await regctl(['image', 'digest', copy]))).toBe(index.index.descriptor.digest);

    const outDir = join(c.work, 'multi-out');
    await regctl(['image', 'copy', copy, `ocidir://${outDir}:back`]);
    const layout = readLayout(outDir);
    expect(layout.manifests.map((d) => d.digest)).toContain(index.index.descriptor.digest);
    expect(layoutMismatches(layout, allBlobs(index))).toEqual([]);
  });

  it('attaches an artifact to an image and lists it as a referrer', async () => {
    const image = buildImage({ seed: 'regctl-referrers', layers: 1, bigFileSize: 2048 });
    const src = writeLayout(join(c.work, 'ref-src'), [{ tag: 'v1', item: image }]);
    const ref = `${c.host}/root/oci/regctl/signed:v1`;
    await regctl(['image', 'copy', `ocidir://${src}:v1`, ref]);
    const sigFile = join(c.work, 'sig.txt');
    writeFileSync(sigFile, `signature for ${image.manifest.descriptor.digest}\n`);

    await regctl([
      'artifact', 'put', '--subject', ref, '--artifact-type', 'application/vnd.example.signature',
      '--file', sigFile, '--file-media-type', 'application/vnd.example.signature.v1', '--annotation', 'org.example.signer=regctl',
    ]);

    const listed = JSON.parse(out(await regctl(['artifact', 'list', ref, '--format', '{{json .Descriptors}}']))) as {
      digest: string;
      artifactType?: string;
      annotations?: Record<string, string>;
    }[];
    expect(listed).toHaveLength(1);
    expect(listed[0]?.artifactType).toBe('application/vnd.example.signature');
    expect(listed[0]?.annotations?.['org.example.signer']).toBe('regctl');
    const body = await bytesOf(['manifest', 'get', '--format', 'raw-body', `${c.host}/root/oci/regctl/signed@${listed[0]?.digest}`]);
    expect(sha256(body)).toBe(listed[0]?.digest);
    expect((JSON.parse(body.toString()) as { subject?: { digest: string } }).subject?.digest).toBe(image.manifest.descriptor.digest);
  });

  it('deletes a tag, then the image', async () => {
    const image = buildImage({ seed: 'regctl-delete', layers: 1, bigFileSize: 2048 });
    const src = writeLayout(join(c.work, 'delete-src'), [{ tag: 'v1', item: image }]);
    const repo = `${c.host}/root/oci/regctl/delete`;
    await regctl(['image', 'copy', `ocidir://${src}:v1`, `${repo}:v1`]);
    await regctl(['image', 'copy', `${repo}:v1`, `${repo}:v2`]);
    expect(out(await regctl(['tag', 'ls', repo])).split('\n')).toEqual(['v1', 'v2']);

    await regctl(['tag', 'delete', `${repo}:v2`]);
    expect(out(await regctl(['tag', 'ls', repo])).split('\n')).toEqual(['v1']);
    expect(out(await regctl(['image', 'digest', `${repo}:v1`]))).toBe(image.manifest.descriptor.digest);

    await regctl(['image', 'delete', `${repo}@${image.manifest.descriptor.digest}`]);
    const gone = await regctl(['manifest', 'head', `${repo}@${image.manifest.descriptor.digest}`], undefined, true);
    expect(gone.code).not.toBe(0);
  });
});
