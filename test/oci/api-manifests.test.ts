/**
 * What a manifest PUT accepts, over raw HTTP: an image manifest only when the target index holds
 * its config and layers (else 400 MANIFEST_BLOB_UNKNOWN naming the digest), an index whatever its
 * children, a subject that is absent; the media type only from the manifest types (Content-Type,
 * or the body's `mediaType` when the header is curl's form type), fixed by the first accepted push.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.js';
import { basicAuth, startVelodex, type Velodex } from '../support/velodex.js';
import { digestOf, expectOciError, imageManifest, OCI_INDEX, OCI_MANIFEST, Registry, sha256, TWO_TEAMS } from './api-support.js';

const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
const FORM = 'application/x-www-form-urlencoded';

let server: Velodex;
let a: Registry;
let b: Registry;
const config = '{"architecture":"amd64","os":"linux"}';
let configHex: string;
let layerHex: string;

beforeAll(async () => {
  server = await startVelodex({ config: TWO_TEAMS });
  a = new Registry(server.url, basicAuth('token-a'));
  b = new Registry(server.url, basicAuth('token-b'));
  // Blobs are per repository: each one the suite pushes manifests to has its own.
  for (const repo of ['app', 'types', 'bad', 'fixed']) {
    configHex = await a.pushBlob(`team-a/oci/${repo}`, config);
    layerHex = await a.pushBlob(`team-a/oci/${repo}`, 'layer bytes');
  }
});

afterAll(async () => {
  await server?.stop();
});

/** A PUT as raw HTTP: exactly these headers, nothing fetch would add. */
function rawPut(name: string, reference: string, body: string, headers: Record<string, string>) {
  const all = { authorization: basicAuth('token-a'), 'content-length': String(Buffer.byteLength(body)), ...headers };
  return rawRequest(server.url, `/v2/${name}/manifests/${reference}`, 'PUT', all, { body });
}

async function served(name: string, ref: string): Promise<{ status: number; type: string | null }> {
  const res = await rawRequest(server.url, `/v2/${name}/manifests/${ref}`);
  const type = res.headers['content-type'];
  return { status: res.status, type: typeof type === 'string' ? type : null };
}

describe('blobs an image manifest names', () => {
  it('refuses a missing layer with 400 MANIFEST_BLOB_UNKNOWN naming it, and stores nothing', async () => {
    const absent = sha256('never pushed');
    const body = imageManifest(configHex, config.length, [{ hex: layerHex, size: 11 }, { hex: absent, size: 12 }]);
    const err = await expectOciError(await a.pushManifest('team-a/oci/app', 'missing-layer', body), 400, 'MANIFEST_BLOB_UNKNOWN');
    expect(err.message).toContain(`sha256:${absent}`);
    await expectOciError(await fetch(`${server.url}/v2/team-a/oci/app/manifests/missing-layer`), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await fetch(`${server.url}/v2/team-a/oci/app/manifests/${digestOf(body)}`), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await fetch(`${server.url}/v2/team-a/oci/app/blobs/${digestOf(body)}`), 404, 'BLOB_UNKNOWN');
  });

  it('refuses a missing config, and blobs only another index holds', async () => {
    const absent = sha256('no such config');
    const err = await expectOciError(await a.pushManifest('team-a/oci/app', 'missing-config', imageManifest(absent, 2, [])), 400, 'MANIFEST_BLOB_UNKNOWN');
    expect(err.message).toContain(`sha256:${absent}`);
    // Team B pushes a manifest naming team A's blobs: B does not hold them.
    const body = imageManifest(configHex, config.length, [{ hex: layerHex, size: 11 }]);
    const other = await expectOciError(await b.pushManifest('team-b/oci/app', 'v1', body), 400, 'MANIFEST_BLOB_UNKNOWN');
    expect(other.message).toContain(`sha256:${configHex}`);
    // A non-sha256 digest can never be stored.
    const sha512 = `sha512:${'ab'.repeat(64)}`;
    const odd = JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config: { mediaType: 'x', digest: sha512, size: 1 }, layers: [] });
    expect((await expectOciError(await a.pushManifest('team-a/oci/app', 'sha512', odd), 400, 'MANIFEST_BLOB_UNKNOWN')).message).toContain(sha512);
    // Once pushed, the same manifest is accepted.
    expect((await a.pushManifest('team-a/oci/app', 'v1', body)).status).toBe(201);
  });

  it('accepts an index whose children are absent, and a subject that is absent', async () => {
    const child = (seed: string) => ({ mediaType: OCI_MANIFEST, digest: digestOf(seed), size: 100, platform: { os: 'linux', architecture: seed } });
    const index = JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [child('amd64'), child('arm64')] });
    const res = await a.pushManifest('team-a/oci/app', 'multi', index, OCI_INDEX);
    expect(res.status, await res.text()).toBe(201);
    expect(await served('team-a/oci/app', 'multi')).toEqual({ status: 200, type: OCI_INDEX });

    const subject = { mediaType: OCI_MANIFEST, digest: digestOf('an absent subject'), size: 10 };
    const referrer = imageManifest(configHex, config.length, [], { subject });
    const put = await a.pushManifest('team-a/oci/app', digestOf(referrer), referrer);
    expect(put.status).toBe(201);
    expect(put.headers.get('oci-subject')).toBe(subject.digest);
  });

  it('does not require non-distributable layers that carry URLs', async () => {
    const nd = { mediaType: 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip', digest: digestOf('elsewhere'), size: 9 };
    const withUrls = imageManifest(configHex, config.length, [], { layers: [{ ...nd, urls: ['https://example.com/layer'] }] });
    expect((await a.pushManifest('team-a/oci/app', 'nd', withUrls)).status).toBe(201);
    const without = imageManifest(configHex, config.length, [], { layers: [nd] });
    await expectOciError(await a.pushManifest('team-a/oci/app', 'nd2', without), 400, 'MANIFEST_BLOB_UNKNOWN');
  });
});

describe('media types', () => {
  const image = () => imageManifest(configHex, config.length, [{ hex: layerHex, size: 11 }]);

  it("takes the body's mediaType when Content-Type is curl's form type or absent", async () => {
    for (const [tag, headers] of [
      ['form', { 'content-type': FORM }],
      ['none', {}],
      ['octets', { 'content-type': 'application/octet-stream' }],
    ] as const) {
      const res = await rawPut('team-a/oci/types', tag, image(), headers);
      expect(res.status, res.body).toBe(201);
      expect(await served('team-a/oci/types', tag)).toEqual({ status: 200, type: OCI_MANIFEST });
    }
  });

  it('refuses a media type that is not a manifest type, or that the body contradicts, with 400 MANIFEST_INVALID', async () => {
    const noType = JSON.stringify({ schemaVersion: 2, config: { mediaType: 'x', digest: `sha256:${configHex}`, size: config.length } });
    const cases: [string, string | undefined][] = [
      [noType, FORM],
      [noType, undefined],
      [noType, 'application/json'],
      [image(), DOCKER_MANIFEST],
      [image(), OCI_INDEX],
      [image().replace(OCI_MANIFEST, 'text/plain'), FORM],
      [image().replace(OCI_MANIFEST, 'application/vnd.oci.artifact.manifest.v1+json'), 'application/vnd.oci.artifact.manifest.v1+json'],
      // A Docker manifest must say what it is.
      [noType, DOCKER_MANIFEST],
      ['not json at all', OCI_MANIFEST],
      ['{"schemaVersion": 2, "mediaType": "' + OCI_MANIFEST + '"', OCI_MANIFEST],
      [image().replace('"schemaVersion":2', '"schemaVersion":1'), OCI_MANIFEST],
      [image().replace(`sha256:${layerHex}`, 'sha256:NOTHEX'), OCI_MANIFEST],
      [JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX }), OCI_INDEX],
    ];
    for (const [i, [body, type]] of cases.entries()) {
      const res = await rawPut('team-a/oci/bad', `case${i}`, body, type === undefined ? {} : { 'content-type': type });
      expect(res.status, `case ${i}: ${res.body}`).toBe(400);
      expect((JSON.parse(res.body) as { errors: { code: string }[] }).errors[0]?.code, `case ${i}`).toBe('MANIFEST_INVALID');
      expect((await served('team-a/oci/bad', `case${i}`)).status).toBe(404);
    }
    expect(await (await fetch(`${server.url}/v2/team-a/oci/bad/tags/list`)).json()).toEqual({ name: 'team-a/oci/bad', tags: [] });
  });

  it('keeps the media type of the first accepted push for every tag of the digest', async () => {
    // Valid both as an image manifest and as an index: only the first push decides.
    const both = JSON.stringify({ schemaVersion: 2, config: { mediaType: 'x', digest: `sha256:${configHex}`, size: config.length }, manifests: [] });
    expect((await rawPut('team-a/oci/fixed', 'first', both, { 'content-type': OCI_MANIFEST })).status).toBe(201);
    expect((await rawPut('team-a/oci/fixed', 'second', both, { 'content-type': OCI_INDEX })).status).toBe(201);
    expect((await rawPut('team-a/oci/fixed', 'third', both, { 'content-type': FORM })).status).toBe(400);
    for (const ref of ['first', 'second', digestOf(both)]) expect(await served('team-a/oci/fixed', ref)).toEqual({ status: 200, type: OCI_MANIFEST });

    // A curl re-push of a typed manifest is a no-op for its type.
    const body = image();
    expect((await rawPut('team-a/oci/fixed', 'typed', body, { 'content-type': OCI_MANIFEST })).status).toBe(201);
    expect((await rawPut('team-a/oci/fixed', 'typed', body, { 'content-type': FORM })).status).toBe(201);
    expect(await served('team-a/oci/fixed', 'typed')).toEqual({ status: 200, type: OCI_MANIFEST });
  });
});
