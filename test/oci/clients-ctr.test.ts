/**
 * containerd's `ctr` against velodex: a private containerd daemon pulls an image, then pushes it
 * again under other names. The blobs are already there, so the first write of each push is the
 * manifest PUT, which containerd sends without credentials and writes in full before it reads the
 * 401; a server that answered before reading made the retry hang (4 pushes in 6). Each push has
 * a timeout, so a hang fails the test.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { allBlobs, buildImage } from '../support/oci-image.js';
import { basicAuth } from '../support/velodex.js';
import { Registry } from './api-support.js';
import { clientSuite } from './client-setup.js';

const c = clientSuite('ctr');
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

describe('ctr', () => {
  it('pushes an image whose blobs velodex already has, every time', async () => {
    const image = buildImage({ seed: 'ctr-push', layers: 2, bigFileSize: 64 * 1024 });
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
});
