/**
 * Two hosted OCI indexes (two teams, two tokens) and a virtual index over both, in one server with
 * one blob store. Each index sees only the blobs it holds: a blob pushed to team A is unknown
 * through team B, B's token cannot delete it, a mount copies it only from where the caller could
 * read it, and the bytes leave the store with the last index that holds them. Manifests are per
 * index too, by tag and by digest.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeProbe, type StoreProbe } from '../support/store-probe.js';
import { basicAuth, startVelodex, type Velodex } from '../support/velodex.js';
import { digestOf, expectOciError, imageManifest, Registry, sha256, TWO_TEAMS } from './api-support.js';

let server: Velodex;
let a: Registry;
let b: Registry;
let store: StoreProbe;

beforeAll(async () => {
  server = await startVelodex({ config: TWO_TEAMS });
  a = new Registry(server.url, basicAuth('token-a'));
  b = new Registry(server.url, basicAuth('token-b'));
  // The store's public interface, as the server opens it: whether bytes are still stored at all.
  store = await storeProbe(server.dataDir);
});

afterAll(async () => {
  await server?.stop();
});

const read = (name: string, hex: string, method = 'GET') => fetch(`${server.url}/v2/${name}/blobs/sha256:${hex}`, { method });

async function expectUnknown(name: string, hex: string): Promise<void> {
  await expectOciError(await read(name, hex), 404, 'BLOB_UNKNOWN');
  expect((await read(name, hex, 'HEAD')).status).toBe(404);
  await expectOciError(await fetch(`${server.url}/v2/${name}/blobs/sha256:${hex}/contents`), 404, 'BLOB_UNKNOWN');
}

async function expectServed(name: string, hex: string): Promise<void> {
  const res = await read(name, hex);
  expect(res.status, name).toBe(200);
  expect(sha256(Buffer.from(await res.arrayBuffer()))).toBe(hex);
}

describe('blobs are per index', () => {
  it("are unknown through another team's index, and its token cannot delete them", async () => {
    const hex = await a.pushBlob('team-a/oci/app', 'team A only');
    await expectServed('team-a/oci/app', hex);
    // Nor through another repository of the same index: blobs are per repository.
    await expectUnknown('team-a/oci/elsewhere', hex);
    await expectUnknown('team-b/oci/app', hex);
    await expectUnknown('only-b/oci/app', hex);
    // A virtual index sees what its members hold.
    await expectServed('all/oci/app', hex);

    await expectOciError(await b.fetch(`/v2/team-b/oci/app/blobs/sha256:${hex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
    // Team A's token does not open team B's index either.
    await expectOciError(await a.fetch(`/v2/team-b/oci/app/blobs/sha256:${hex}`, { method: 'DELETE' }), 401, 'UNAUTHORIZED');
    await expectServed('team-a/oci/app', hex);
  });

  it('stay unknown to an index whose push of the same digest failed', async () => {
    const secret = "team A's private layer";
    const hex = await a.pushBlob('team-a/oci/app', secret);
    // Team B knows the digest (from a manifest, say) but not the bytes: a push with other bytes
    // under that digest is refused, and must not leave B holding the digest.
    const wrong = await b.fetch(`/v2/team-b/oci/app/blobs/uploads/?digest=sha256:${hex}`, { method: 'POST', body: 'guessed bytes' });
    await expectOciError(wrong, 400, 'DIGEST_INVALID');
    await expectUnknown('team-b/oci/app', hex);
    await expectOciError(await b.fetch(`/v2/team-b/oci/app/blobs/sha256:${hex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
    expect((await b.fetch(`/v2/team-b/oci/other/blobs/uploads/?mount=sha256:${hex}`, { method: 'POST' })).status).toBe(202);
    await expectServed('team-a/oci/app', hex);
  });

  it('go from the store only when every index holding them has deleted them', async () => {
    const data = 'pushed by both teams';
    const hex = await a.pushBlob('team-a/oci/app', data);
    expect(await b.pushBlob('team-b/oci/app', data)).toBe(hex);

    expect((await b.fetch(`/v2/team-b/oci/app/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    await expectUnknown('team-b/oci/app', hex);
    await expectServed('team-a/oci/app', hex);
    await expectServed('all/oci/app', hex);
    expect(await store.has(hex)).toBe(true);

    expect((await a.fetch(`/v2/team-a/oci/app/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    await expectUnknown('team-a/oci/app', hex);
    await expectUnknown('all/oci/app', hex);
    expect(await store.has(hex)).toBe(false);
  });
});

describe('cross-repository mount', () => {
  const mount = (reg: Registry, name: string, hex: string, from?: string) =>
    reg.fetch(`/v2/${name}/blobs/uploads/?mount=sha256:${hex}${from === undefined ? '' : `&from=${from}`}`, { method: 'POST' });

  it('copies a blob from an index the caller can read it through', async () => {
    const hex = await a.pushBlob('team-a/oci/src', 'mount me across teams');
    const res = await mount(b, 'team-b/oci/dst', hex, 'team-a/oci/src');
    expect(res.status).toBe(201);
    expect(res.headers.get('docker-content-digest')).toBe(`sha256:${hex}`);
    await expectServed('team-b/oci/dst', hex);
    // Through a virtual index that has A as a member, too.
    expect((await mount(b, 'team-b/oci/dst2', await a.pushBlob('team-a/oci/src', 'via the virtual index'), 'all/oci/src')).status).toBe(201);
    // B now holds its own copy: A's DELETE leaves it to B.
    expect((await a.fetch(`/v2/team-a/oci/src/blobs/sha256:${hex}`, { method: 'DELETE' })).status).toBe(202);
    await expectServed('team-b/oci/dst', hex);
    await expectUnknown('team-a/oci/src', hex);
  });

  it('within one index, from a repository that has the blob, or without from (anonymous) from any', async () => {
    const hex = await b.pushBlob('team-b/oci/one', 'mount within B');
    expect((await mount(b, 'team-b/oci/two', hex, 'team-b/oci/one')).status).toBe(201);
    await expectServed('team-b/oci/two', hex);
    expect((await mount(b, 'team-b/oci/three', hex)).status).toBe(201);
    await expectServed('team-b/oci/three', hex);
    // A from that does not have it opens an ordinary session, however many others have it.
    const res = await mount(b, 'team-b/oci/four', hex, 'team-b/oci/none');
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toMatch(/^\/v2\/team-b\/oci\/four\/blobs\/uploads\//);
    await expectUnknown('team-b/oci/four', hex);
  });

  it('opens an ordinary session when the blob is not visible where from points', async () => {
    const hex = await a.pushBlob('team-a/oci/src', 'not mountable into B without from');
    for (const from of [undefined, 'team-b/oci/src', 'only-b/oci/src', 'nowhere/at/all', 'Bad..Name']) {
      const res = await mount(b, 'team-b/oci/dst', hex, from);
      expect(res.status, String(from)).toBe(202);
      expect(res.headers.get('location')).toMatch(/^\/v2\/team-b\/oci\/dst\/blobs\/uploads\//);
    }
    await expectUnknown('team-b/oci/dst', hex);
  });
});

describe('manifests are per index', () => {
  it('are unknown through another index by tag and by digest, also as blobs', async () => {
    const config = '{"os":"linux","architecture":"amd64"}';
    const configHex = await a.pushBlob('team-a/oci/img', config);
    const body = imageManifest(configHex, config.length, []);
    expect((await a.pushManifest('team-a/oci/img', 'v1', body)).status).toBe(201);
    expect((await fetch(`${server.url}/v2/team-a/oci/img/manifests/${digestOf(body)}`)).status).toBe(200);
    expect((await fetch(`${server.url}/v2/all/oci/img/manifests/${digestOf(body)}`)).status).toBe(200);

    for (const ref of ['v1', digestOf(body)]) {
      await expectOciError(await fetch(`${server.url}/v2/team-b/oci/img/manifests/${ref}`), 404, 'MANIFEST_UNKNOWN');
    }
    await expectUnknown('team-b/oci/img', sha256(body));
    await expectOciError(await b.fetch(`/v2/team-b/oci/img/manifests/${digestOf(body)}`, { method: 'DELETE' }), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await b.fetch(`/v2/team-b/oci/img/blobs/${digestOf(body)}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
    expect((await fetch(`${server.url}/v2/team-a/oci/img/manifests/v1`)).status).toBe(200);
  });
});
