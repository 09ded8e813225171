/**
 * The byte store is shared by every index and ecosystem. These tests pin down what `/v2/` may do
 * to bytes it did not create, what its DELETE does to bytes Python also holds (the same wheel
 * uploaded with twine and pushed as a blob, in either order), and the corners found in review:
 * tags named like JavaScript object properties, a deleted manifest blob, and a Python re-upload
 * that restores a lost blob.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { serverStores, storeProbe } from '../support/store-probe.js';
import { basicAuth, defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv } from '../python/fixtures/clients.js';
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
const stored = async (hex: string) => (await storeProbe(server.dataDir)).has(hex);

function twineUpload(...files: string[]) {
  return run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, ...files], {
    env: CLEAN_ENV,
  });
}

/** The wheel as the Python index serves it: its URL taken from the Simple page, its bytes' sha256. */
async function pythonDownload(project: BuiltProject): Promise<string> {
  const pageUrl = `${server.url}/root/hosted/simple/${project.name}/`;
  const page = await fetch(pageUrl, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
  expect(page.status).toBe(200);
  const doc = (await page.json()) as { files: { filename: string; url: string }[] };
  const file = doc.files.find((f) => f.filename === project.wheelFilename);
  expect(file).toBeDefined();
  const res = await fetch(new URL(file!.url, pageUrl));
  expect(res.status).toBe(200);
  return sha256(Buffer.from(await res.arrayBuffer()));
}

/** pip downloads the wheel and installs it from the hosted index alone. */
async function pipInstalls(project: BuiltProject): Promise<void> {
  const index = `${server.url}/root/hosted/simple/`;
  const venv = await freshPipVenv();
  const pip = join(venv, 'bin', 'pip');
  const dest = tempDir('velodex-pipdl-');
  const spec = `${project.name}==${project.version}`;
  await run(pip, ['download', '--no-cache-dir', '--no-deps', '--only-binary', ':all:', '--index-url', index, '-d', dest, spec], { env: CLEAN_ENV });
  expect(readdirSync(dest)).toEqual([project.wheelFilename]);
  expect(sha256(readFileSync(join(dest, project.wheelFilename)))).toBe(sha256(readFileSync(project.wheel)));
  await run(pip, ['install', '--no-cache-dir', '--index-url', index, spec], { env: CLEAN_ENV });
  const hello = await run(join(venv, 'bin', 'python'), ['-c', `import ${project.name}; print(${project.name}.hello())`]);
  expect(hello.stdout.trim()).toBe(`${project.name} ${project.version}`);
}

/** After a /v2 DELETE the digest is unknown to every /v2 read, DELETE and mount. */
async function goneFromV2(hex: string): Promise<void> {
  await expectOciError(await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { authed: false }), 404, 'BLOB_UNKNOWN');
  const head = await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'HEAD', authed: false });
  expect(head.status).toBe(404);
  await expectOciError(await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}/contents`, { authed: false }), 404, 'BLOB_UNKNOWN');
  await expectOciError(await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
  const mount = await reg.fetch(`/v2/root/oci/elsewhere/blobs/uploads/?mount=sha256:${hex}&from=root/oci/wheels`, { method: 'POST' });
  expect(mount.status).toBe(202);
}

describe('bytes held by Python and by /v2/', () => {
  it('a /v2/ DELETE of a wheel pushed again as a blob keeps the Python file', async () => {
    const delta = await buildProject('delta', '1.0.0');
    await twineUpload(delta.wheel);
    const bytes = readFileSync(delta.wheel);
    const hex = await reg.pushBlob('root/oci/wheels', bytes);
    expect(hex).toBe(sha256(bytes));
    const got = await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { authed: false });
    expect(got.status).toBe(200);
    expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(hex);

    expect((await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    await goneFromV2(hex);
    expect(await stored(hex)).toBe(true);
    expect(await pythonDownload(delta)).toBe(hex);
    await pipInstalls(delta);
  });

  it('the same when the blob was pushed before the wheel was uploaded', async () => {
    const epsilon = await buildProject('epsilon', '1.0.0');
    const bytes = readFileSync(epsilon.wheel);
    const hex = await reg.pushBlob('root/oci/wheels', bytes);
    await twineUpload(epsilon.wheel);
    expect((await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'HEAD', authed: false })).status).toBe(200);

    expect((await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    await goneFromV2(hex);
    expect(await pythonDownload(epsilon)).toBe(hex);
    await pipInstalls(epsilon);
  });

  it('pushing the bytes again makes them visible on /v2/ again', async () => {
    const delta = await buildProject('delta', '1.0.0');
    const hex = await reg.pushBlob('root/oci/wheels', readFileSync(delta.wheel));
    expect((await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'HEAD', authed: false })).status).toBe(200);
    expect((await reg.fetch(`/v2/root/oci/wheels/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    expect(await pythonDownload(delta)).toBe(hex);
  });
});

describe('bytes only /v2/ holds', () => {
  it('go with the DELETE of the last repository holding them: pushed in chunks, mounted elsewhere', async () => {
    const data = Buffer.from('only the registry wants these bytes');
    const hex = sha256(data);
    const location = await reg.openUpload('root/oci/solo');
    const patch = await reg.fetch(location, { method: 'PATCH', body: data, headers: { 'content-type': 'application/octet-stream' } });
    expect(patch.status).toBe(202);
    const commit = await reg.fetch(`${patch.headers.get('location')}${patch.headers.get('location')!.includes('?') ? '&' : '?'}digest=sha256:${hex}`, { method: 'PUT' });
    expect(commit.status, await commit.text()).toBe(201);
    const mount = await reg.fetch(`/v2/root/oci/solo2/blobs/uploads/?mount=sha256:${hex}&from=root/oci/solo`, { method: 'POST' });
    expect(mount.status).toBe(201);
    expect(await stored(hex)).toBe(true);

    // Each repository lets go of its own hold; the other keeps the bytes and still serves them.
    expect((await reg.fetch(`/v2/root/oci/solo2/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    await expectOciError(await reg.fetch(`/v2/root/oci/solo2/blobs/sha256:${hex}`, { authed: false }), 404, 'BLOB_UNKNOWN');
    await expectOciError(await reg.fetch(`/v2/root/oci/solo2/blobs/sha256:${hex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
    expect((await reg.fetch(`/v2/root/oci/solo/blobs/sha256:${hex}`, { authed: false })).status).toBe(200);
    expect(await stored(hex)).toBe(true);

    expect((await reg.fetch(`/v2/root/oci/solo/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    expect(await stored(hex)).toBe(false);
    for (const repo of ['solo', 'solo2']) {
      await expectOciError(await reg.fetch(`/v2/root/oci/${repo}/blobs/sha256:${hex}`, { authed: false }), 404, 'BLOB_UNKNOWN');
    }
    await expectOciError(await reg.fetch(`/v2/root/oci/solo/blobs/sha256:${hex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
  });
});

describe('bytes /v2/ did not create', () => {
  it('cannot delete, read, browse or mount a Python file by its digest', async () => {
    await expectOciError(await reg.fetch(`/v2/root/oci/any/blobs/sha256:${wheelHex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
    expect((await fetch(wheelUrl())).status).toBe(200);
    // Nor read it, or browse it as a layer.
    await expectOciError(await reg.fetch(`/v2/root/oci/any/blobs/sha256:${wheelHex}`, { authed: false }), 404, 'BLOB_UNKNOWN');
    await expectOciError(await reg.fetch(`/v2/root/oci/any/blobs/sha256:${wheelHex}/contents`, { authed: false }), 404, 'BLOB_UNKNOWN');
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
    // Lost behind the server's back (a disk fault, an operator's mistake).
    expect(await (await serverStores(server.dataDir)).blobs.delete(wheelHex)).toBe(true);
    expect((await fetch(wheelUrl())).status).toBe(404);
    await run(tool('twine'), ['upload', '--non-interactive', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, gamma.wheel]);
    const res = await fetch(wheelUrl());
    expect(res.status).toBe(200);
    expect(createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex')).toBe(wheelHex);
  });
});
