/**
 * The byte store is shared by every index and ecosystem. These tests pin down what `/v2/` may do
 * to bytes it did not create, and the corners found in review: tags named like JavaScript object
 * properties, a deleted manifest blob, and a Python re-upload that restores a lost blob.
 */
import { createHash } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { expectOciError, imageManifest, OCI_MANIFEST, Registry, sha256 } from './api-support.js';

let server: Velodex;
let reg: Registry;
let token: string;
let gamma: BuiltProject;
let wheelHex: string;

beforeAll(async () => {
  gamma = await buildProject('gamma', '3.0.0');
  server = await startVelodex();
  token = defaultToken(server);
  reg = new Registry(server.url, basicAuth(token));
  await run(tool('twine'), ['upload', '--non-interactive', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, gamma.wheel]);
  wheelHex = createHash('sha256').update(readFileSync(gamma.wheel)).digest('hex');
});

afterAll(async () => {
  await server?.stop();
});

const wheelUrl = () => `${server.url}/root/hosted/files/${wheelHex}/${gamma.wheelFilename}`;

describe('bytes /v2/ did not create', () => {
  it('cannot delete a Python file by its digest, and cannot mount it', async () => {
    await expectOciError(await reg.fetch(`/v2/root/oci/any/blobs/sha256:${wheelHex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
    expect((await fetch(wheelUrl())).status).toBe(200);
    // A mount of bytes /v2/ does not own opens an ordinary session instead.
    const mount = await reg.fetch(`/v2/root/oci/any/blobs/uploads/?mount=sha256:${wheelHex}&from=root/oci/other`, { method: 'POST' });
    expect(mount.status).toBe(202);
  });

  it('deletes a blob it created, and the manifest cache forgets deleted manifest bytes', async () => {
    const config = '{"architecture":"amd64","os":"linux"}';
    const configHex = await reg.pushBlob('root/oci/own', config);
    const manifest = imageManifest(configHex, config.length, []);
    expect((await reg.pushManifest('root/oci/own', 'v1', manifest)).status).toBe(201);
    expect((await reg.fetch('/v2/root/oci/own/manifests/v1', { authed: false })).status).toBe(200);
    const manifestHex = sha256(manifest);
    expect((await reg.fetch(`/v2/root/oci/own/blobs/sha256:${manifestHex}`, { method: 'DELETE' })).status).toBe(202);
    await expectOciError(await reg.fetch('/v2/root/oci/own/manifests/v1', { authed: false }), 404, 'MANIFEST_UNKNOWN');
    expect((await reg.fetch(`/v2/root/oci/own/blobs/sha256:${configHex}`, { method: 'DELETE' })).status).toBe(202);
    await expectOciError(await reg.fetch(`/v2/root/oci/own/blobs/sha256:${configHex}`, { authed: false }), 404, 'BLOB_UNKNOWN');
  });
});

describe('tags named like object properties', () => {
  it('are ordinary tags: unknown until pushed, listed once pushed, deletable', async () => {
    for (const tag of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      await expectOciError(await reg.fetch(`/v2/root/oci/props/manifests/${tag}`, { authed: false }), 404, 'MANIFEST_UNKNOWN');
      await expectOciError(await reg.fetch(`/v2/root/oci/props/manifests/${tag}`, { method: 'DELETE' }), 404, 'MANIFEST_UNKNOWN');
    }
    const config = '{"os":"linux"}';
    const configHex = await reg.pushBlob('root/oci/props', config);
    const manifest = imageManifest(configHex, config.length, []);
    for (const tag of ['__proto__', 'constructor']) {
      const put = await reg.pushManifest('root/oci/props', tag, manifest, OCI_MANIFEST);
      expect(put.status).toBe(201);
    }
    const list = (await (await reg.fetch('/v2/root/oci/props/tags/list', { authed: false })).json()) as { tags: string[] };
    expect(list.tags).toEqual(['__proto__', 'constructor']);
    expect((await reg.fetch('/v2/root/oci/props/manifests/__proto__', { authed: false })).status).toBe(200);
    expect((await reg.fetch('/v2/root/oci/props/manifests/__proto__', { method: 'DELETE' })).status).toBe(202);
    const after = (await (await reg.fetch('/v2/root/oci/props/tags/list', { authed: false })).json()) as { tags: string[] };
    expect(after.tags).toEqual(['constructor']);
  });
});

describe('a Python file whose blob went missing', () => {
  it('comes back when the same bytes are uploaded again', async () => {
    unlinkSync(join(server.dataDir, 'store', 'blobs', 'sha256', wheelHex.slice(0, 2), wheelHex));
    expect((await fetch(wheelUrl())).status).toBe(404);
    await run(tool('twine'), ['upload', '--non-interactive', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, gamma.wheel]);
    const res = await fetch(wheelUrl());
    expect(res.status).toBe(200);
    expect(createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex')).toBe(wheelHex);
  });
});
