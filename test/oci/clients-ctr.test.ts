/**
 * containerd's `ctr` against velodex: a private containerd daemon pulls an image, then pushes it
 * again under other names. The blobs are already there, so the first write of each push is the
 * manifest PUT, which containerd sends without credentials and writes in full before it reads the
 * 401; a server that answered before reading made the retry hang (4 pushes in 6). Each push has
 * a timeout, so a hang fails the test. A named token that may upload to `app*` pushes there and
 * is refused elsewhere.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { oci } from '../support/config.js';
import { allBlobs, buildImage } from '../support/oci-image.js';
import { basicAuth } from '../support/velodex.js';
import { Registry } from './api-support.js';
import { clientSuite } from './client-setup.js';

/** A named token of the index at `tokens/oci` that may upload to `app*` only. */
const CI_SECRET = 'ci-ctr-secret-e03b9c';
const c = clientSuite('ctr', {
  indexes: [oci.hosted('tokens', { route: 'tokens/oci', tokens: [{ name: 'ci', secret: CI_SECRET, scopes: ['upload'], projects: ['app*'] }] })],
});
let daemon: Containerd;
const PUSHES = 8;

beforeAll(async () => {
  const dir = join(c.work, 'containerd');
  mkdirSync(dir);
  daemon = await startContainerd(dir);
});

afterAll(async () => {
  await daemon?.stop();
});

const image = buildImage({ seed: 'ctr-push', layers: 2, bigFileSize: 64 * 1024 });

describe('ctr', () => {
  it('pushes an image whose blobs velodex already has, every time', async () => {
    const reg = new Registry(c.server.url, basicAuth(c.token));
    for (const blob of allBlobs(image).slice(1)) await reg.pushBlob('root/oci/ctr/app', blob.bytes);
    expect((await reg.pushManifest('root/oci/ctr/app', 'v1', image.manifest.bytes)).status).toBe(201);

    const source = `${c.host}/root/oci/ctr/app:v1`;
    // The native snapshotter: unpacking needs no overlay mounts wherever the suite runs.
    await daemon.ctr(['images', 'pull', '--plain-http', '--snapshotter', 'native', source], { timeoutMs: 60_000 });

    for (let i = 0; i < PUSHES; i++) {
      // Another tag, and every other time another repository: the manifest is new there.
      const target = `${c.host}/root/oci/ctr/${i % 2 === 0 ? 'copy' : 'app'}:push-${i}`;
      await daemon.ctr(['images', 'tag', source, target]);
      const pushed = await daemon.ctr(['images', 'push', '--plain-http', '--user', `__token__:${c.token}`, target], { timeoutMs: 20_000, allowFailure: true });
      // Not the command line in the message: it carries the token.
      expect(pushed.code, `push ${i} of ${target} exited with ${pushed.code} (-1: killed after 20 s, hung)\n${pushed.stderr}`).toBe(0);
      const res = await fetch(`${c.server.url}/v2/${target.slice(c.host.length + 1).replace(':', '/manifests/')}`, { method: 'HEAD' });
      expect(res.status).toBe(200);
      expect(res.headers.get('docker-content-digest')).toBe(image.manifest.descriptor.digest);
    }
  });

  it('pushes with a named token to a repository its globs match, and is refused outside them', async () => {
    // The image the test above pulled into containerd.
    const source = `${c.host}/root/oci/ctr/app:v1`;
    const push = async (repo: string) => {
      const target = `${c.host}/tokens/oci/${repo}:named`;
      await daemon.ctr(['images', 'tag', source, target]);
      return daemon.ctr(['images', 'push', '--plain-http', '--user', `ci:${CI_SECRET}`, target], { timeoutMs: 20_000, allowFailure: true });
    };
    const pushed = await push('app');
    expect(pushed.code, pushed.stderr).toBe(0);
    const res = await fetch(`${c.server.url}/v2/tokens/oci/app/manifests/named`, { method: 'HEAD' });
    expect(res.headers.get('docker-content-digest')).toBe(image.manifest.descriptor.digest);

    const refused = await push('other');
    expect(refused.code).not.toBe(0);
    // containerd answers velodex's Basic challenge with Basic credentials, so the refusal is a
    // 403 DENIED naming the token; ctr prints only the status, the security log the token.
    expect(refused.stderr).toMatch(/unexpected status: 403 Forbidden/);
    expect(c.server.logs()).toMatch(/"event":"auth_failed","index":"tokens\/oci","method":"POST","client":"127.0.0.1","reason":"insufficient-scope","token":"ci"/);
    expect((await fetch(`${c.server.url}/v2/tokens/oci/other/manifests/named`, { method: 'HEAD' })).status).toBe(404);
  });
});
