/**
 * skopeo (Debian's package) against velodex's hosted OCI index: images built on the fly as OCI
 * layouts are copied in with `docker://`, copied back out to another layout, and compared byte for
 * byte, the way a user mirrors images between a directory and a registry. Named tokens: copies in
 * with `--dest-creds` to a repository the token may upload to and not to another; `skopeo delete`
 * only with a token that has the delete scope.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allBlobs, buildImage, buildIndex, layoutMismatches, readLayout, writeLayout } from '../support/oci-image.js';
import { oci } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { clientSuite, curlRepush } from './client-setup.js';

/** Named tokens of the index at `tokens/oci`: `ci` may upload to `app*`, `janitor` may only delete. */
const NAMED = { ci: 'ci-skopeo-secret-6d02f8', janitor: 'janitor-skopeo-secret-a51c39' };

const c = clientSuite('skopeo', {
  indexes: [
    oci.hosted('tokens', {
      route: 'tokens/oci',
      tokens: [
        { name: 'ci', secret: NAMED.ci, scopes: ['upload'], projects: ['app*'] },
        { name: 'janitor', secret: NAMED.janitor, scopes: ['delete'] },
      ],
    }),
  ],
  env: (work) => ({ REGISTRY_AUTH_FILE: join(work, 'auth.json') }),
  // A private auth file and trust policy: nothing from the machine's own container config is used.
  setup: ({ work }) => {
    writeFileSync(join(work, 'auth.json'), '{}');
    writeFileSync(join(work, 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
  },
});

function skopeo(args: string[], allowFailure = false): Promise<RunResult> {
  return run(tool('skopeo'), ['--policy', join(c.work, 'policy.json'), ...args], { env: c.env, allowFailure, timeoutMs: 180_000 });
}

const creds = () => `__token__:${c.token}`;

describe('skopeo', () => {
  it('pushes a layout made as docs/oci.md shows: a tar of files, crane append, skopeo into oci:', async () => {
    const dir = join(c.work, 'made');
    await run('bash', ['-c', 'set -e; mkdir -p rootfs && echo hello > rootfs/hello.txt && tar -czf layer.tar.gz -C rootfs . && mkdir -p "$CRANE_DIR"'], {
      cwd: c.work,
      env: { CRANE_DIR: dir },
    });
    await run(tool('crane'), ['append', '--oci-empty-base', '-f', join(c.work, 'layer.tar.gz'), '-t', 'app:v1', '-o', join(dir, 'image.tar')]);
    await skopeo(['copy', `docker-archive:${join(dir, 'image.tar')}`, `oci:${join(dir, 'layout')}:v1`]);
    await skopeo(['copy', '--dest-tls-verify=false', '--dest-creds', creds(), `oci:${join(dir, 'layout')}:v1`, `docker://${c.host}/root/oci/made/app:v1`]);
    const out = join(dir, 'pulled.tar');
    await run(tool('crane'), ['export', '--insecure', `${c.host}/root/oci/made/app:v1`, out]);
    const listed = await run('tar', ['-xOf', out, 'hello.txt']);
    expect(listed.stdout).toBe('hello\n');
  });

  it('copies an OCI layout image in and back out byte for byte', async () => {
    const image = buildImage({ seed: 'skopeo-single' });
    const src = writeLayout(join(c.work, 'single-src'), [{ tag: 'v1', item: image }]);
    const ref = `docker://${c.host}/root/oci/skopeo/app:v1`;

    await skopeo(['copy', '--preserve-digests', '--format', 'oci', '--dest-tls-verify=false', '--dest-creds', creds(), `oci:${src}:v1`, ref]);

    // What the registry serves for the tag is the manifest that was pushed, unchanged.
    const raw = await skopeo(['inspect', '--raw', '--tls-verify=false', ref]);
    expect(Buffer.from(raw.stdout).equals(image.manifest.bytes)).toBe(true);
    const inspected = JSON.parse((await skopeo(['inspect', '--tls-verify=false', ref])).stdout) as { Digest: string; Layers: string[]; Architecture: string };
    expect(inspected.Digest).toBe(image.manifest.descriptor.digest);
    expect(inspected.Layers).toEqual(image.layers.map((l) => l.descriptor.digest));
    expect(inspected.Architecture).toBe('amd64');

    const tags = JSON.parse((await skopeo(['list-tags', '--tls-verify=false', `docker://${c.host}/root/oci/skopeo/app`])).stdout) as { Tags: string[] };
    expect(tags.Tags).toEqual(['v1']);

    // Pull back (reads need no credentials) into a fresh layout.
    const out = join(c.work, 'single-out');
    await skopeo(['copy', '--preserve-digests', '--src-tls-verify=false', ref, `oci:${out}:v1`]);
    const layout = readLayout(out);
    expect(layout.byTag('v1')?.digest).toBe(image.manifest.descriptor.digest);
    expect(layoutMismatches(layout, allBlobs(image))).toEqual([]);
  });

  it('copies a multi-platform index with --all and keeps every digest', async () => {
    const index = buildIndex('skopeo-multi');
    const src = writeLayout(join(c.work, 'multi-src'), [{ tag: 'multi', item: index }]);
    const ref = `docker://${c.host}/root/oci/skopeo/multi:1.0`;

    await skopeo(['copy', '--all', '--preserve-digests', '--format', 'oci', '--dest-tls-verify=false', '--dest-creds', creds(), `oci:${src}:multi`, ref]);

    const raw = await skopeo(['inspect', '--raw', '--tls-verify=false', ref]);
    expect(Buffer.from(raw.stdout).equals(index.index.bytes)).toBe(true);
    // A user on arm64 gets the arm64 image (skopeo's Digest stays the one of the index it resolved).
    for (const image of index.images) {
      const got = JSON.parse(
        (await skopeo(['--override-os', 'linux', '--override-arch', image.platform.architecture, 'inspect', '--tls-verify=false', ref])).stdout,
      ) as { Digest: string; Architecture: string; Layers: string[] };
      expect(got.Digest).toBe(index.index.descriptor.digest);
      expect(got.Architecture).toBe(image.platform.architecture);
      expect(got.Layers).toEqual(image.layers.map((l) => l.descriptor.digest));
    }

    const out = join(c.work, 'multi-out');
    await skopeo(['copy', '--all', '--preserve-digests', '--src-tls-verify=false', ref, `oci:${out}:multi`]);
    const layout = readLayout(out);
    expect(layout.byTag('multi')?.digest).toBe(index.index.descriptor.digest);
    expect(layoutMismatches(layout, allBlobs(index))).toEqual([]);

    // A single platform by digest, as `docker://name@digest`.
    const arm = index.images[1];
    expect(arm).toBeDefined();
    const byDigest = `docker://${c.host}/root/oci/skopeo/multi@${arm?.manifest.descriptor.digest}`;
    const armRaw = await skopeo(['inspect', '--raw', '--tls-verify=false', byDigest]);
    expect(Buffer.from(armRaw.stdout).equals(arm?.manifest.bytes ?? Buffer.alloc(0))).toBe(true);
  });

  it('copies an image and an index out after their manifests were re-pushed with curl', async () => {
    const image = buildImage({ seed: 'skopeo-repush', layers: 1, bigFileSize: 2048 });
    const index = buildIndex('skopeo-repush-multi');
    const src = writeLayout(join(c.work, 'repush-src'), [
      { tag: 'v1', item: image },
      { tag: 'multi', item: index },
    ]);
    const name = 'root/oci/skopeo/repush';
    const dest = (tag: string) => `docker://${c.host}/${name}:${tag}`;
    await skopeo(['copy', '--preserve-digests', '--dest-tls-verify=false', '--dest-creds', creds(), `oci:${src}:v1`, dest('v1')]);
    await skopeo(['copy', '--all', '--preserve-digests', '--dest-tls-verify=false', '--dest-creds', creds(), `oci:${src}:multi`, dest('multi')]);

    // Refused, or a no-op: curl's form Content-Type never becomes the served media type.
    for (const [tag, top] of [['v1', image.manifest], ['multi', index.index]] as const) {
      expect([201, 400]).toContain(await curlRepush(c, name, tag, top.bytes));
      const served = await fetch(`${c.server.url}/v2/${name}/manifests/${tag}`, { method: 'HEAD' });
      expect(served.headers.get('content-type')).toBe(top.descriptor.mediaType);
    }

    const inspected = JSON.parse((await skopeo(['inspect', '--tls-verify=false', dest('v1')])).stdout) as { Digest: string; Layers: string[] };
    expect(inspected.Digest).toBe(image.manifest.descriptor.digest);
    const out = join(c.work, 'repush-out');
    await skopeo(['copy', '--preserve-digests', '--src-tls-verify=false', dest('v1'), `oci:${out}:v1`]);
    await skopeo(['copy', '--all', '--preserve-digests', '--src-tls-verify=false', dest('multi'), `oci:${out}:multi`]);
    const layout = readLayout(out);
    expect(layout.byTag('v1')?.digest).toBe(image.manifest.descriptor.digest);
    expect(layout.byTag('multi')?.digest).toBe(index.index.descriptor.digest);
    expect(layoutMismatches(layout, [...allBlobs(image), ...allBlobs(index)])).toEqual([]);
  });

  it('refuses a push without the upload token', async () => {
    const image = buildImage({ seed: 'skopeo-denied', layers: 1, bigFileSize: 1024 });
    const src = writeLayout(join(c.work, 'denied-src'), [{ tag: 'v1', item: image }]);
    const ref = `docker://${c.host}/root/oci/skopeo/denied:v1`;

    const anonymous = await skopeo(['copy', '--dest-tls-verify=false', `oci:${src}:v1`, ref], true);
    expect(anonymous.code).not.toBe(0);
    expect(anonymous.stderr.toLowerCase()).toMatch(/unauthorized|authentication required|401/);

    const wrong = await skopeo(['copy', '--dest-tls-verify=false', '--dest-creds', '__token__:not-the-token', `oci:${src}:v1`, ref], true);
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr.toLowerCase()).toMatch(/unauthorized|authentication required|401/);

    // Nothing was published.
    const missing = await skopeo(['inspect', '--raw', '--tls-verify=false', ref], true);
    expect(missing.code).not.toBe(0);
  });

  it('deletes an image by digest', async () => {
    const image = buildImage({ seed: 'skopeo-delete', layers: 1, bigFileSize: 1024 });
    const src = writeLayout(join(c.work, 'delete-src'), [{ tag: 'v1', item: image }]);
    const ref = `docker://${c.host}/root/oci/skopeo/delete:v1`;
    await skopeo(['copy', '--preserve-digests', '--dest-tls-verify=false', '--dest-creds', creds(), `oci:${src}:v1`, ref]);
    const byDigest = `docker://${c.host}/root/oci/skopeo/delete@${image.manifest.descriptor.digest}`;
    await skopeo(['inspect', '--raw', '--tls-verify=false', byDigest]);

    await skopeo(['delete', '--tls-verify=false', '--creds', creds(), byDigest]);

    const gone = await skopeo(['inspect', '--raw', '--tls-verify=false', byDigest], true);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr.toLowerCase()).toMatch(/manifest unknown|not found|404/);
  });
});

describe('skopeo with named tokens', () => {
  const image = () => buildImage({ seed: 'skopeo-named', layers: 1, bigFileSize: 1024 });
  const ref = (repo: string) => `docker://${c.host}/tokens/oci/${repo}`;
  let src: string;

  it('copies into a repository the token may upload to, and is refused outside its globs', async () => {
    src = writeLayout(join(c.work, 'named-src'), [{ tag: 'v1', item: image() }]);
    const ok = await skopeo(['copy', '--preserve-digests', '--dest-tls-verify=false', '--dest-creds', `ci:${NAMED.ci}`, `oci:${src}:v1`, ref('app:v1')], true);
    expect(ok.code, ok.stderr).toBe(0);
    const raw = await skopeo(['inspect', '--raw', '--tls-verify=false', ref('app:v1')]);
    expect(Buffer.from(raw.stdout).equals(image().manifest.bytes)).toBe(true);

    const refused = await skopeo(['copy', '--dest-tls-verify=false', '--dest-creds', `ci:${NAMED.ci}`, `oci:${src}:v1`, ref('other:v1')], true);
    expect(refused.code).not.toBe(0);
    // Through the token realm: the bearer token grants no push there, and the 401 says why.
    expect(refused.stderr).toMatch(/the token \\*"ci\\*" may not upload \\*"other\\*" \(its projects: app\*\)/);
    expect((await skopeo(['inspect', '--raw', '--tls-verify=false', ref('other:v1')], true)).code).not.toBe(0);
  });

  it('deletes only with a token that has the delete scope', async () => {
    const byDigest = `${ref('app')}@${image().manifest.descriptor.digest}`;
    const refused = await skopeo(['delete', '--tls-verify=false', '--creds', `ci:${NAMED.ci}`, byDigest], true);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/403 Forbidden/);
    expect(refused.stderr).toMatch(/the token \\*"ci\\*" may not delete, yank, restore or promote \(its scopes: upload\)/);
    expect((await skopeo(['inspect', '--raw', '--tls-verify=false', byDigest])).code).toBe(0);

    await skopeo(['delete', '--tls-verify=false', '--creds', `janitor:${NAMED.janitor}`, byDigest]);
    const gone = await skopeo(['inspect', '--raw', '--tls-verify=false', byDigest], true);
    expect(gone.stderr.toLowerCase()).toMatch(/manifest unknown|not found|404/);
  });
});
