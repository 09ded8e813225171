/**
 * Blobs are per repository (issue 23, item 7): a repository sees a blob when it was pushed or
 * mounted there, or named by one of its manifests; a DELETE in one repository lets go of that
 * repository's hold only, is refused while one of its manifests still names the blob, and the
 * bytes leave the store with the last holder. Driven with crane (pushes and whole pulls) and raw
 * HTTP, on one server with two teams' hosted indexes and a virtual index over both (TWO_TEAMS).
 * The upgrade path: holds an earlier version wrote for a whole index, made here through the
 * store's API behind the server's back, stay readable in every repository of that index and are
 * never released by a repository's DELETE.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobOf, buildImage, buildIndex, layoutMismatches, MT, readLayout, writeLayout, type Blob, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { serverStores, storeProbe, type StoreProbe } from '../support/store-probe.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { expectOciError, Registry, TWO_TEAMS } from './api-support.js';

let server: Velodex;
let host: string;
let work: string;
let store: StoreProbe;
let a: Registry;

beforeAll(async () => {
  server = await startVelodex({ config: TWO_TEAMS });
  host = `127.0.0.1:${server.port}`;
  work = tempDir('velodex-repo-blobs-');
  store = await storeProbe(server.dataDir);
  a = new Registry(server.url, basicAuth('token-a'));
  await crane(['auth', 'login', host, '-u', '__token__', '--password-stdin'], { input: 'token-a' });
});

afterAll(async () => {
  await server?.stop();
});

function crane(args: string[], opts: { input?: string; allowFailure?: boolean } = {}): Promise<RunResult> {
  const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  return run(tool('crane'), [...args, '--insecure'], { env, input: opts.input, allowFailure: opts.allowFailure, timeoutMs: 180_000 });
}

const hexOf = (b: Blob) => b.descriptor.digest.slice('sha256:'.length);
const blobPath = (name: string, b: Blob) => `/v2/${name}/blobs/${b.descriptor.digest}`;
const deleteBlob = (name: string, b: Blob) => a.fetch(blobPath(name, b), { method: 'DELETE' });

async function expectUnknown(name: string, b: Blob): Promise<void> {
  await expectOciError(await fetch(`${server.url}${blobPath(name, b)}`), 404, 'BLOB_UNKNOWN');
  expect((await fetch(`${server.url}${blobPath(name, b)}`, { method: 'HEAD' })).status, name).toBe(404);
}

async function expectServed(name: string, b: Blob): Promise<void> {
  const res = await fetch(`${server.url}${blobPath(name, b)}`);
  expect(res.status, name).toBe(200);
  expect(Buffer.from(await res.arrayBuffer()).equals(b.bytes)).toBe(true);
}

/** The refusal of a DELETE that would take bytes from under a manifest: 405, naming the manifest. */
async function expectReferenced(res: Response, manifest: Blob): Promise<void> {
  const allow = res.headers.get('allow');
  const err = await expectOciError(res, 405, 'UNSUPPORTED');
  expect(err.message).toContain(manifest.descriptor.digest);
  expect(allow).toBe('GET, HEAD');
}

/** crane pulls the whole image from `ref` into a fresh layout, byte for byte. */
async function pullsWhole(ref: string, image: Image, dir: string): Promise<void> {
  const out = join(work, dir);
  await crane(['pull', '--format', 'oci', ref, out]);
  expect(layoutMismatches(readLayout(out), [image.manifest, image.config, ...image.layers])).toEqual([]);
}

/** An image with `base`'s config and `other`'s layers: a second image sharing the config blob. */
function sharingConfig(base: Image, other: Image, title: string): Image {
  const manifestJson = {
    schemaVersion: 2,
    mediaType: MT.manifest,
    config: base.config.descriptor,
    layers: other.layers.map((l) => l.descriptor),
    annotations: { 'org.opencontainers.image.title': title },
  };
  const manifest = blobOf(MT.manifest, Buffer.from(JSON.stringify(manifestJson, null, 2) + '\n'));
  return { manifest, config: base.config, layers: other.layers, files: other.files, platform: base.platform };
}

async function push(image: Image, ref: string, dir: string): Promise<void> {
  await crane(['push', writeLayout(join(work, dir), [{ tag: 'v1', item: image }]), ref]);
}

describe('what a repository sees', () => {
  it('a blob only in the repositories that pushed it or whose manifests name it; a DELETE in one leaves the others whole', async () => {
    const base = buildImage({ seed: 'repo-blobs-b', layers: 1, bigFileSize: 4096 });
    const other = buildImage({ seed: 'repo-blobs-a', layers: 1, bigFileSize: 4096 });
    const inA = sharingConfig(base, other, 'repo-a');
    const layerA = inA.layers[0]!;
    await push(base, `${host}/team-a/oci/repo-b:v1`, 'layout-b');
    await push(inA, `${host}/team-a/oci/repo-a:v1`, 'layout-a');

    // A blob pushed only to repo-a is unknown in the other repositories of the index.
    await expectServed('team-a/oci/repo-a', layerA);
    for (const name of ['team-a/oci/repo-c', 'team-a/oci/repo-b', 'all/oci/repo-c']) await expectUnknown(name, layerA);
    await expectOciError(await fetch(`${server.url}${blobPath('team-a/oci/repo-c', layerA)}/contents`), 404, 'BLOB_UNKNOWN');
    await expectUnknown('team-a/oci/repo-c', base.config);
    await expectServed('all/oci/repo-b', base.config);
    expect((await crane(['blob', `${host}/team-a/oci/repo-c@${layerA.descriptor.digest}`], { allowFailure: true })).code).not.toBe(0);

    // The shared config goes from repo-a once its manifest has gone; repo-b keeps it.
    expect((await a.fetch(`/v2/team-a/oci/repo-a/manifests/${inA.manifest.descriptor.digest}`, { method: 'DELETE' })).status).toBe(202);
    expect((await deleteBlob('team-a/oci/repo-a', base.config)).status).toBe(202);
    await expectUnknown('team-a/oci/repo-a', base.config);
    await expectOciError(await deleteBlob('team-a/oci/repo-a', base.config), 404, 'BLOB_UNKNOWN');
    await expectServed('team-a/oci/repo-b', base.config);
    expect(await store.has(hexOf(base.config))).toBe(true);
    await pullsWhole(`${host}/team-a/oci/repo-b:v1`, base, 'pull-b');

    // A blob no other repository holds leaves the store with its repository's DELETE.
    expect((await deleteBlob('team-a/oci/repo-a', layerA)).status).toBe(202);
    await expectUnknown('team-a/oci/repo-a', layerA);
    expect(await store.has(hexOf(layerA))).toBe(false);
  });

  it('a mount from a repository that does not have the blob opens an ordinary session and gives no access', async () => {
    const hex = await a.pushBlob('team-a/oci/m-source', 'mounted only from where it is');
    const blob = blobOf('application/octet-stream', Buffer.from('mounted only from where it is'));
    for (const from of ['team-a/oci/m-other', 'all/oci/m-other', 'team-b/oci/m-source']) {
      const res = await a.fetch(`/v2/team-a/oci/m-target/blobs/uploads/?mount=sha256:${hex}&from=${from}`, { method: 'POST' });
      expect(res.status, from).toBe(202);
      expect(res.headers.get('location')).toMatch(/^\/v2\/team-a\/oci\/m-target\/blobs\/uploads\//);
    }
    await expectUnknown('team-a/oci/m-target', blob);
    // From where it is, the mount copies it; so does an anonymous mount (no from) within the index.
    const ok = await a.fetch(`/v2/team-a/oci/m-target/blobs/uploads/?mount=sha256:${hex}&from=all/oci/m-source`, { method: 'POST' });
    expect(ok.status).toBe(201);
    await expectServed('team-a/oci/m-target', blob);
    expect((await a.fetch(`/v2/team-a/oci/m-anon/blobs/uploads/?mount=sha256:${hex}`, { method: 'POST' })).status).toBe(201);
    await expectServed('team-a/oci/m-anon', blob);
  });

  it('a manifest PUT needs its config and layers in its own repository', async () => {
    const image = buildImage({ seed: 'repo-blobs-put', layers: 1, bigFileSize: 1024 });
    await push(image, `${host}/team-a/oci/put-here:v1`, 'layout-put');
    const err = await expectOciError(await a.pushManifest('team-a/oci/put-there', 'v1', image.manifest.bytes), 400, 'MANIFEST_BLOB_UNKNOWN');
    expect(err.message).toContain('team-a/oci/put-there');
  });
});

describe('a DELETE never removes bytes a manifest of its repository names', () => {
  it('refuses the config and the layers of a recorded manifest, and the image still pulls', async () => {
    const image = buildImage({ seed: 'repo-blobs-keep', layers: 2, bigFileSize: 4096 });
    await push(image, `${host}/team-a/oci/keep:v1`, 'layout-keep');
    for (const b of [image.config, ...image.layers]) {
      await expectReferenced(await deleteBlob('team-a/oci/keep', b), image.manifest);
      expect(await store.has(hexOf(b))).toBe(true);
    }
    await pullsWhole(`${host}/team-a/oci/keep:v1`, image, 'pull-keep');
    // A tag DELETE leaves the manifest recorded, so it still names them.
    expect((await a.fetch('/v2/team-a/oci/keep/manifests/v1', { method: 'DELETE' })).status).toBe(202);
    await expectReferenced(await deleteBlob('team-a/oci/keep', image.config), image.manifest);
    await pullsWhole(`${host}/team-a/oci/keep@${image.manifest.descriptor.digest}`, image, 'pull-keep-digest');
  });

  it('keeps the child manifests an image index names, also after their manifest DELETE', async () => {
    const multi = buildIndex('repo-blobs-index', undefined, 1);
    await crane(['push', writeLayout(join(work, 'layout-index'), [{ tag: 'v1', item: multi }]), `${host}/team-a/oci/multi:v1`]);
    const child = multi.images[0]!.manifest;
    await expectReferenced(await deleteBlob('team-a/oci/multi', child), multi.index);
    // The child's record goes, its bytes stay held: the index still names them.
    expect((await a.fetch(`/v2/team-a/oci/multi/manifests/${child.descriptor.digest}`, { method: 'DELETE' })).status).toBe(202);
    await expectOciError(await fetch(`${server.url}/v2/team-a/oci/multi/manifests/${child.descriptor.digest}`), 404, 'MANIFEST_UNKNOWN');
    await expectServed('team-a/oci/multi', child);
    await expectReferenced(await deleteBlob('team-a/oci/multi', child), multi.index);
    // Once the index has gone, so can the child's bytes, and then its layers.
    expect((await a.fetch(`/v2/team-a/oci/multi/manifests/${multi.index.descriptor.digest}`, { method: 'DELETE' })).status).toBe(202);
    expect((await deleteBlob('team-a/oci/multi', child)).status).toBe(202);
    expect(await store.has(hexOf(child))).toBe(false);
    expect((await deleteBlob('team-a/oci/multi', multi.images[0]!.config)).status).toBe(202);
  });

  it('a manifest DELETE by digest lets go of its bytes in that repository only', async () => {
    const image = buildImage({ seed: 'repo-blobs-twice', layers: 1, bigFileSize: 1024 });
    await push(image, `${host}/team-a/oci/twice-1:v1`, 'layout-twice-1');
    await push(image, `${host}/team-a/oci/twice-2:v1`, 'layout-twice-2');
    expect((await a.fetch(`/v2/team-a/oci/twice-1/manifests/${image.manifest.descriptor.digest}`, { method: 'DELETE' })).status).toBe(202);
    await expectUnknown('team-a/oci/twice-1', image.manifest);
    await pullsWhole(`${host}/team-a/oci/twice-2:v1`, image, 'pull-twice-2');
    expect((await a.fetch(`/v2/team-a/oci/twice-2/manifests/${image.manifest.descriptor.digest}`, { method: 'DELETE' })).status).toBe(202);
    expect(await store.has(hexOf(image.manifest))).toBe(false);
    // The blobs it named stay held until a blob DELETE (or a collector) lets them go.
    await expectServed('team-a/oci/twice-2', image.config);
  });
});

describe('holds an earlier version wrote for a whole index', () => {
  it('stay visible in every repository of that index and are never released by a repository DELETE', async () => {
    const image = buildImage({ seed: 'repo-blobs-legacy', layers: 1, bigFileSize: 1024 });
    await push(image, `${host}/team-a/oci/old:v1`, 'layout-legacy');
    // Rewrite the holds as an earlier version left them: index-wide, none per repository.
    const stores = await serverStores(server.dataDir);
    for (const b of [image.manifest, image.config, ...image.layers]) {
      expect(await stores.holds.hold(hexOf(b), 'oci.team-a')).toBe(true);
      expect((await stores.holds.release(hexOf(b), 'oci.team-a/old')).released).toBe(true);
      expect(await stores.holds.holders(hexOf(b))).toEqual(['oci.team-a']);
    }

    await pullsWhole(`${host}/team-a/oci/old:v1`, image, 'pull-legacy');
    await expectServed('team-a/oci/anywhere', image.layers[0]!);
    await expectServed('all/oci/anywhere', image.config);
    await expectUnknown('team-b/oci/old', image.config);

    for (const name of ['team-a/oci/old', 'team-a/oci/anywhere']) {
      const res = await deleteBlob(name, image.config);
      const err = await expectOciError(res, 405, 'UNSUPPORTED');
      expect(err.message).toContain('earlier version');
    }
    expect(await store.has(hexOf(image.config))).toBe(true);
    await pullsWhole(`${host}/team-a/oci/old:v1`, image, 'pull-legacy-2');

    // A new manifest naming those blobs is accepted in any repository of the index, which then holds them too.
    const again = sharingConfig(image, image, 'again');
    expect((await a.pushManifest('team-a/oci/new', 'v1', again.manifest.bytes)).status).toBe(201);
    expect((await stores.holds.holders(hexOf(image.config))).sort()).toEqual(['oci.team-a', 'oci.team-a/new']);
    await pullsWhole(`${host}/team-a/oci/new:v1`, again, 'pull-legacy-new');
    // Its manifest DELETE takes nothing the earlier version's hold keeps.
    expect((await a.fetch(`/v2/team-a/oci/old/manifests/${image.manifest.descriptor.digest}`, { method: 'DELETE' })).status).toBe(202);
    expect(await store.has(hexOf(image.manifest))).toBe(true);
  });
});
