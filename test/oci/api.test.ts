/**
 * The hosted `/v2/` API over plain HTTP, against the embedded default (`root/oci`): every bad
 * input the spec names answers its code and status in the distribution-spec error shape, and no
 * failed request leaves anything partial visible.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.js';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { digestOf, expectOciError, imageManifest, OCI_INDEX, OCI_MANIFEST, Registry, sha256 } from './api-support.js';

let server: Velodex;
let reg: Registry;
const config = Buffer.from('{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}');

beforeAll(async () => {
  server = await startVelodex();
  reg = new Registry(server.url, basicAuth(defaultToken(server)));
});

afterAll(async () => {
  await server?.stop();
});

describe('version check and names', () => {
  it('answers /v2/ and /v2 with 200 and the API version header to a caller with credentials', async () => {
    for (const path of ['/v2/', '/v2']) {
      const res = await reg.fetch(path);
      expect(res.status).toBe(200);
      expect(res.headers.get('docker-distribution-api-version')).toBe('registry/2.0');
      expect(await res.text()).toBe('');
    }
  });

  it('challenges a caller without credentials on /v2/ to the token realm (docker logs in only after that)', async () => {
    for (const path of ['/v2/', '/v2']) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.headers.get('docker-distribution-api-version')).toBe('registry/2.0');
      expect(res.headers.get('www-authenticate')).toBe(`Bearer realm="${server.url}/v2/token",service="velodex"`);
      await expectOciError(res, 401, 'UNAUTHORIZED');
    }
  });

  it('answers a name under no OCI route with 404 NAME_UNKNOWN', async () => {
    await expectOciError(await fetch(`${server.url}/v2/elsewhere/app/tags/list`), 404, 'NAME_UNKNOWN');
    await expectOciError(await fetch(`${server.url}/v2/root/hosted/app/manifests/latest`), 404, 'NAME_UNKNOWN');
    // The route alone names no repository.
    await expectOciError(await fetch(`${server.url}/v2/root/oci/manifests/latest`), 404, 'NAME_UNKNOWN');
  });

  it('refuses names outside the grammar with 400 NAME_INVALID', async () => {
    await expectOciError(await fetch(`${server.url}/v2/root/oci/App/tags/list`), 400, 'NAME_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/a..b/tags/list`), 400, 'NAME_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/-a/tags/list`), 400, 'NAME_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/${'a'.repeat(250)}/tags/list`), 400, 'NAME_INVALID');
    for (const path of ['/v2/root/oci/%2e%2e/x/tags/list', '/v2/root/oci/a%2fb/tags/list', '/v2/root/oci/../oci/x/tags/list']) {
      const res = await rawRequest(server.url, path);
      expect([400, 404]).toContain(res.status);
      expect(JSON.parse(res.body)).toHaveProperty('errors');
    }
  });

  it('accepts the separators of the name grammar', async () => {
    for (const repo of ['a.b', 'a_b', 'a__b', 'a---b', 'x/y.z/w__v']) {
      const res = await fetch(`${server.url}/v2/root/oci/${repo}/tags/list`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ name: `root/oci/${repo}`, tags: [] });
    }
  });

  it('answers an undefined method with 405 UNSUPPORTED', async () => {
    await expectOciError(await reg.fetch('/v2/root/oci/app/manifests/latest', { method: 'POST' }), 405, 'UNSUPPORTED');
    await expectOciError(await reg.fetch('/v2/root/oci/app/tags/list', { method: 'DELETE' }), 405, 'UNSUPPORTED');
  });
});

describe('authentication', () => {
  const writes: [string, string][] = [
    ['POST', '/v2/root/oci/auth/blobs/uploads/'],
    ['PUT', '/v2/root/oci/auth/manifests/latest'],
    ['DELETE', '/v2/root/oci/auth/manifests/latest'],
    ['DELETE', `/v2/root/oci/auth/blobs/${digestOf('x')}`],
    ['PATCH', '/v2/root/oci/auth/blobs/uploads/some-session'],
    ['PUT', `/v2/root/oci/auth/blobs/uploads/some-session?digest=${digestOf('x')}`],
    ['GET', '/v2/root/oci/auth/blobs/uploads/some-session'],
    ['DELETE', '/v2/root/oci/auth/blobs/uploads/some-session'],
  ];

  it('answers every write without credentials with 401 UNAUTHORIZED and a Basic challenge', async () => {
    for (const [method, path] of writes) {
      const res = await reg.fetch(path, { method, authed: false, body: method === 'GET' || method === 'DELETE' ? undefined : '{}' });
      expect(res.headers.get('www-authenticate'), `${method} ${path}`).toBe('Basic realm="velodex"');
      await expectOciError(res, 401, 'UNAUTHORIZED');
    }
  });

  it('answers a wrong token with 401 and stores nothing', async () => {
    const res = await reg.fetch('/v2/root/oci/auth/manifests/latest', {
      method: 'PUT',
      body: imageManifest(sha256(config), config.length, []),
      headers: { authorization: basicAuth('wrong'), 'content-type': OCI_MANIFEST },
    });
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
    await expectOciError(res, 401, 'UNAUTHORIZED');
    expect(await (await fetch(`${server.url}/v2/root/oci/auth/tags/list`)).json()).toEqual({ name: 'root/oci/auth', tags: [] });
  });

  it('serves reads without credentials', async () => {
    const hex = await reg.pushBlob('root/oci/auth', 'public bytes');
    const res = await fetch(`${server.url}/v2/root/oci/auth/blobs/sha256:${hex}`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('public bytes');
  });
});

describe('blob uploads', () => {
  it('stores a monolithic POST ?digest= and answers 201 with Location and digest', async () => {
    const data = Buffer.from('monolithic blob');
    const res = await reg.fetch(`/v2/root/oci/up/blobs/uploads/?digest=${digestOf(data)}`, { method: 'POST', body: data });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v2/root/oci/up/blobs/${digestOf(data)}`);
    expect(res.headers.get('docker-content-digest')).toBe(digestOf(data));
    const get = await fetch(`${server.url}${res.headers.get('location')}`);
    expect(Buffer.from(await get.arrayBuffer())).toEqual(data);
  });

  it('refuses a monolithic POST whose bytes do not match the digest, and stores neither', async () => {
    const claimed = digestOf('what the client promised');
    const res = await reg.fetch(`/v2/root/oci/up/blobs/uploads/?digest=${claimed}`, { method: 'POST', body: 'something else' });
    await expectOciError(res, 400, 'DIGEST_INVALID');
    for (const d of [claimed, digestOf('something else')]) {
      expect((await fetch(`${server.url}/v2/root/oci/up/blobs/${d}`, { method: 'HEAD' })).status).toBe(404);
    }
  });

  it('refuses non-sha256 and malformed digests with 400 DIGEST_INVALID', async () => {
    const sha512 = `sha512:${'a'.repeat(128)}`;
    await expectOciError(await reg.fetch(`/v2/root/oci/up/blobs/uploads/?digest=${sha512}`, { method: 'POST', body: 'x' }), 400, 'DIGEST_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/up/blobs/${sha512}`), 400, 'DIGEST_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/up/blobs/sha256:nothex`), 400, 'DIGEST_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/up/referrers/md5:abc`), 400, 'DIGEST_INVALID');
    const loc = await reg.openUpload('root/oci/up');
    await expectOciError(await reg.fetch(`${loc}?digest=${sha512}`, { method: 'PUT', body: 'x' }), 400, 'DIGEST_INVALID');
  });

  it('walks the chunked state table: 416 keeps the bytes, a wrong commit keeps the session, a commit ends it', async () => {
    const data = Buffer.from('Hello, how are you today? Chunked uploads keep their bytes.');
    const hex = sha256(data);
    const loc = await reg.openUpload('root/oci/chunks');
    const id = loc.split('/').pop() as string;

    let res = await reg.fetch(loc, { method: 'PATCH', body: data.subarray(0, 10), headers: { 'content-range': '0-9' } });
    expect(res.status).toBe(202);
    expect(res.headers.get('range')).toBe('0-9');
    expect(res.headers.get('docker-upload-uuid')).toBe(id);
    expect(res.headers.get('location')).toBe(loc);

    // Out of order: skips ahead, then repeats the first chunk. Both 416, nothing appended.
    for (const range of ['20-29', '0-9']) {
      res = await reg.fetch(loc, { method: 'PATCH', body: data.subarray(0, 10), headers: { 'content-range': range } });
      expect(res.status).toBe(416);
      expect(res.headers.get('range')).toBe('0-9');
      await res.text();
    }
    res = await reg.fetch(loc);
    expect(res.status).toBe(204);
    expect(res.headers.get('range')).toBe('0-9');
    expect(res.headers.get('location')).toBe(loc);
    expect(res.headers.get('docker-upload-uuid')).toBe(id);

    // The right chunk continues; a chunk without Content-Range appends too.
    res = await reg.fetch(loc, { method: 'PATCH', body: data.subarray(10, 30), headers: { 'content-range': '10-29' } });
    expect(res.status).toBe(202);
    expect(res.headers.get('range')).toBe('0-29');
    res = await reg.fetch(loc, { method: 'PATCH', body: data.subarray(30, 40) });
    expect(res.headers.get('range')).toBe('0-39');

    // A commit with the wrong digest, or none, keeps the session as it was.
    await expectOciError(await reg.fetch(`${loc}?digest=${digestOf('nope')}`, { method: 'PUT', body: data.subarray(40) }), 400, 'DIGEST_INVALID');
    await expectOciError(await reg.fetch(loc, { method: 'PUT' }), 400, 'DIGEST_INVALID');
    res = await reg.fetch(loc);
    expect(res.status).toBe(204);
    expect(res.headers.get('range')).toBe('0-39');
    expect((await fetch(`${server.url}/v2/root/oci/chunks/blobs/sha256:${hex}`, { method: 'HEAD' })).status).toBe(404);

    // The commit carries the trailing bytes.
    res = await reg.fetch(`${loc}?digest=sha256:${hex}`, { method: 'PUT', body: data.subarray(40) });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v2/root/oci/chunks/blobs/sha256:${hex}`);
    expect(res.headers.get('docker-content-digest')).toBe(`sha256:${hex}`);
    const blob = await fetch(`${server.url}/v2/root/oci/chunks/blobs/sha256:${hex}`);
    expect(Buffer.from(await blob.arrayBuffer())).toEqual(data);

    // A committed session is unknown afterwards.
    await expectOciError(await reg.fetch(loc), 404, 'BLOB_UPLOAD_UNKNOWN');
    await expectOciError(await reg.fetch(loc, { method: 'PATCH', body: 'more' }), 404, 'BLOB_UPLOAD_UNKNOWN');
    await expectOciError(await reg.fetch(`${loc}?digest=sha256:${hex}`, { method: 'PUT' }), 404, 'BLOB_UPLOAD_UNKNOWN');
  });

  it('answers unknown sessions with 404 BLOB_UPLOAD_UNKNOWN, also from another repository', async () => {
    await expectOciError(await reg.fetch('/v2/root/oci/up/blobs/uploads/no-such-session'), 404, 'BLOB_UPLOAD_UNKNOWN');
    const loc = await reg.openUpload('root/oci/one');
    await expectOciError(await reg.fetch(loc.replace('/root/oci/one/', '/root/oci/two/')), 404, 'BLOB_UPLOAD_UNKNOWN');
  });

  it('cancels a session with DELETE', async () => {
    const loc = await reg.openUpload('root/oci/up');
    expect((await reg.fetch(loc, { method: 'DELETE' })).status).toBe(204);
    await expectOciError(await reg.fetch(loc), 404, 'BLOB_UPLOAD_UNKNOWN');
  });

  it('commits an empty blob', async () => {
    const loc = await reg.openUpload('root/oci/up');
    const res = await reg.fetch(`${loc}?digest=${digestOf('')}`, { method: 'PUT' });
    expect(res.status).toBe(201);
    const head = await fetch(`${server.url}/v2/root/oci/up/blobs/${digestOf('')}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('0');
  });

  it('mounts a stored digest with 201 and opens an ordinary session for a missing one', async () => {
    const hex = await reg.pushBlob('root/oci/source', 'mount me');
    let res = await reg.fetch(`/v2/root/oci/target/blobs/uploads/?mount=sha256:${hex}&from=root/oci/source`, { method: 'POST' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v2/root/oci/target/blobs/sha256:${hex}`);
    expect(res.headers.get('docker-content-digest')).toBe(`sha256:${hex}`);
    res = await reg.fetch(`/v2/root/oci/target/blobs/uploads/?mount=${digestOf('never pushed')}&from=root/oci/source`, { method: 'POST' });
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toMatch(/^\/v2\/root\/oci\/target\/blobs\/uploads\/.+/);
    expect(res.headers.get('docker-upload-uuid')).toBeTruthy();
    expect(res.headers.get('range')).toBe('0-0');
  });
});

describe('blob reads and deletes', () => {
  const data = Buffer.from('0123456789abcdefghij');
  let path: string;

  beforeAll(async () => {
    const hex = await reg.pushBlob('root/oci/read', data);
    path = `/v2/root/oci/read/blobs/sha256:${hex}`;
  });

  it('serves GET and HEAD with the blob headers, in the repository that has the blob only', async () => {
    const res = await fetch(`${server.url}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(res.headers.get('docker-content-digest')).toBe(digestOf(data));
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('content-length')).toBe(String(data.length));
    expect(Buffer.from(await res.arrayBuffer())).toEqual(data);
    await expectOciError(await fetch(`${server.url}${path.replace('/read/', '/elsewhere/')}`), 404, 'BLOB_UNKNOWN');
    expect((await fetch(`${server.url}${path.replace('/read/', '/elsewhere/')}`, { method: 'HEAD' })).status).toBe(404);
    const head = await fetch(`${server.url}${path}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(data.length));
    expect(head.headers.get('docker-content-digest')).toBe(digestOf(data));
  });

  it('serves one bytes range with 206 and Content-Range', async () => {
    const cases: [string, number, number][] = [
      ['bytes=2-5', 2, 5],
      ['bytes=15-', 15, 19],
      ['bytes=-4', 16, 19],
      ['bytes=10-999', 10, 19],
    ];
    for (const [range, start, end] of cases) {
      const res = await fetch(`${server.url}${path}`, { headers: { range } });
      expect(res.status, range).toBe(206);
      expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/${data.length}`);
      expect(res.headers.get('content-length')).toBe(String(end - start + 1));
      expect(Buffer.from(await res.arrayBuffer())).toEqual(data.subarray(start, end + 1));
    }
  });

  it('answers unsatisfiable or malformed bytes ranges with 416 and bytes */size', async () => {
    for (const range of ['bytes=20-30', 'bytes=5-2', 'bytes=abc', 'bytes=-0', 'bytes=-']) {
      const res = await fetch(`${server.url}${path}`, { headers: { range } });
      expect(res.status, range).toBe(416);
      expect(res.headers.get('content-range')).toBe(`bytes */${data.length}`);
      await res.text();
    }
  });

  it('ignores a range in another unit and serves the whole blob', async () => {
    const res = await fetch(`${server.url}${path}`, { headers: { range: 'items=0-3' } });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(data);
  });

  it('answers an unknown blob with 404 BLOB_UNKNOWN', async () => {
    await expectOciError(await fetch(`${server.url}/v2/root/oci/read/blobs/${digestOf('absent')}`), 404, 'BLOB_UNKNOWN');
    const head = await fetch(`${server.url}/v2/root/oci/read/blobs/${digestOf('absent')}`, { method: 'HEAD' });
    expect(head.status).toBe(404);
  });

  it('deletes a blob globally with 202; afterwards 404 BLOB_UNKNOWN', async () => {
    const hex = await reg.pushBlob('root/oci/del', 'short-lived');
    const res = await reg.fetch(`/v2/root/oci/del/blobs/sha256:${hex}`, { method: 'DELETE' });
    expect(res.status).toBe(202);
    await expectOciError(await fetch(`${server.url}/v2/root/oci/del/blobs/sha256:${hex}`), 404, 'BLOB_UNKNOWN');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/other/blobs/sha256:${hex}`), 404, 'BLOB_UNKNOWN');
    await expectOciError(await reg.fetch(`/v2/root/oci/del/blobs/sha256:${hex}`, { method: 'DELETE' }), 404, 'BLOB_UNKNOWN');
  });
});

describe('manifests', () => {
  let configHex: string;
  let layerHex: string;

  beforeAll(async () => {
    // Blobs are per repository: each one the suite pushes manifests to has its own.
    for (const repo of ['app', 'big', 'gone', 'left']) {
      configHex = await reg.pushBlob(`root/oci/${repo}`, config);
      layerHex = await reg.pushBlob(`root/oci/${repo}`, 'layer bytes');
    }
  });

  const manifest = (extra: Record<string, unknown> = {}) => imageManifest(configHex, config.length, [{ hex: layerHex, size: 11 }], extra);

  it('stores a manifest by tag byte for byte and serves it by tag and digest', async () => {
    const body = `${manifest()}\n  `; // odd whitespace must survive: the digest is of the bytes
    const res = await reg.pushManifest('root/oci/app', 'v1', body);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v2/root/oci/app/manifests/${digestOf(body)}`);
    expect(res.headers.get('docker-content-digest')).toBe(digestOf(body));
    expect(res.headers.get('oci-subject')).toBeNull();
    for (const ref of ['v1', digestOf(body)]) {
      const get = await fetch(`${server.url}/v2/root/oci/app/manifests/${ref}`);
      expect(get.status).toBe(200);
      expect(get.headers.get('content-type')).toBe(OCI_MANIFEST);
      expect(get.headers.get('docker-content-digest')).toBe(digestOf(body));
      expect(get.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
      expect(await get.text()).toBe(body);
      const head = await fetch(`${server.url}/v2/root/oci/app/manifests/${ref}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
      expect(head.headers.get('docker-content-digest')).toBe(digestOf(body));
    }
  });

  it('stores by digest, keeps the media type and serves image indexes', async () => {
    const index = JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [] });
    const res = await reg.pushManifest('root/oci/app', digestOf(index), index, OCI_INDEX);
    expect(res.status).toBe(201);
    const get = await fetch(`${server.url}/v2/root/oci/app/manifests/${digestOf(index)}`);
    expect(get.headers.get('content-type')).toBe(OCI_INDEX);
    expect(await get.text()).toBe(index);
  });

  it('refuses a body that does not match the digest reference with 400 DIGEST_INVALID', async () => {
    const body = manifest({ annotations: { n: 'mismatch' } });
    const wrong = digestOf('not this');
    await expectOciError(await reg.pushManifest('root/oci/app', wrong, body), 400, 'DIGEST_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/app/manifests/${digestOf(body)}`), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await reg.pushManifest('root/oci/app', 'sha256:totallywrong', 'blablabla'), 400, 'DIGEST_INVALID');
    await expectOciError(await reg.pushManifest('root/oci/app', `sha512:${'a'.repeat(128)}`, body), 400, 'DIGEST_INVALID');
  });

  it('refuses a body over 4 MiB with 400 MANIFEST_INVALID and keeps the tag absent', async () => {
    const limit = 4 * 1024 * 1024;
    const head = manifest({ annotations: { pad: '' } });
    const pad = (total: number) => head.replace('"pad":""', `"pad":"${'x'.repeat(total - head.length)}"`);
    const tooBig = pad(limit + 1);
    expect(Buffer.byteLength(tooBig)).toBe(limit + 1);
    await expectOciError(await reg.pushManifest('root/oci/big', 'huge', tooBig), 400, 'MANIFEST_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/big/manifests/huge`), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/big/manifests/${digestOf(tooBig)}`), 404, 'MANIFEST_UNKNOWN');
    expect(await (await fetch(`${server.url}/v2/root/oci/big/tags/list`)).json()).toEqual({ name: 'root/oci/big', tags: [] });
    // Exactly at the limit is fine.
    const atLimit = pad(limit);
    expect((await reg.pushManifest('root/oci/big', 'limit', atLimit)).status).toBe(201);
  });

  it('refuses a body that is not a JSON object with 400 MANIFEST_INVALID', async () => {
    await expectOciError(await reg.pushManifest('root/oci/app', 'junk', 'blablabla'), 400, 'MANIFEST_INVALID');
    await expectOciError(await reg.pushManifest('root/oci/app', 'junk', '[1,2]'), 400, 'MANIFEST_INVALID');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/app/manifests/junk`), 404, 'MANIFEST_UNKNOWN');
  });

  it('refuses a bad tag on PUT with 400 TAG_INVALID; reads of a bad tag find nothing', async () => {
    for (const tag of ['.hidden', '-dash', 'a'.repeat(129), 'sp%20ace']) {
      await expectOciError(await reg.pushManifest('root/oci/app', tag, manifest()), 400, 'TAG_INVALID');
    }
    await expectOciError(await fetch(`${server.url}/v2/root/oci/app/manifests/.INVALID_MANIFEST_NAME`), 404, 'MANIFEST_UNKNOWN');
    const res = await fetch(`${server.url}/v2/root/oci/app/tags/list`);
    expect(((await res.json()) as { tags: string[] }).tags.every((t) => !t.startsWith('.') && !t.startsWith('-'))).toBe(true);
  });

  it('deletes a tag (manifest stays), then the manifest by digest with its tags', async () => {
    const body = manifest({ annotations: { n: 'to-delete' } });
    expect((await reg.pushManifest('root/oci/gone', 'a', body)).status).toBe(201);
    expect((await reg.pushManifest('root/oci/gone', 'b', body)).status).toBe(201);

    expect((await reg.fetch('/v2/root/oci/gone/manifests/a', { method: 'DELETE' })).status).toBe(202);
    await expectOciError(await fetch(`${server.url}/v2/root/oci/gone/manifests/a`), 404, 'MANIFEST_UNKNOWN');
    expect((await fetch(`${server.url}/v2/root/oci/gone/manifests/${digestOf(body)}`)).status).toBe(200);
    await expectOciError(await reg.fetch('/v2/root/oci/gone/manifests/a', { method: 'DELETE' }), 404, 'MANIFEST_UNKNOWN');

    expect((await reg.fetch(`/v2/root/oci/gone/manifests/${digestOf(body)}`, { method: 'DELETE' })).status).toBe(202);
    await expectOciError(await fetch(`${server.url}/v2/root/oci/gone/manifests/${digestOf(body)}`), 404, 'MANIFEST_UNKNOWN');
    await expectOciError(await fetch(`${server.url}/v2/root/oci/gone/manifests/b`), 404, 'MANIFEST_UNKNOWN');
    expect(await (await fetch(`${server.url}/v2/root/oci/gone/tags/list`)).json()).toEqual({ name: 'root/oci/gone', tags: [] });
    await expectOciError(await reg.fetch(`/v2/root/oci/gone/manifests/${digestOf(body)}`, { method: 'DELETE' }), 404, 'MANIFEST_UNKNOWN');
  });

  it('keeps manifests per repository', async () => {
    const body = manifest({ annotations: { n: 'per-repo' } });
    expect((await reg.pushManifest('root/oci/left', 'x', body)).status).toBe(201);
    await expectOciError(await fetch(`${server.url}/v2/root/oci/right/manifests/${digestOf(body)}`), 404, 'MANIFEST_UNKNOWN');
  });
});

describe('tags list', () => {
  const tags = ['b', 'a', 'c', 'e', 'd', '1.0', 'latest'];

  beforeAll(async () => {
    const cfg = await reg.pushBlob('root/oci/tagged', config);
    const body = imageManifest(cfg, config.length, []);
    for (const t of tags) expect((await reg.pushManifest('root/oci/tagged', t, body)).status).toBe(201);
  });

  it('lists all tags sorted', async () => {
    const res = await fetch(`${server.url}/v2/root/oci/tagged/tags/list`);
    expect(res.status).toBe(200);
    expect(res.headers.get('link')).toBeNull();
    expect(await res.json()).toEqual({ name: 'root/oci/tagged', tags: [...tags].sort() });
  });

  it('pages with n and last, linking to the next page while truncated', async () => {
    const seen: string[] = [];
    let path: string | null = '/v2/root/oci/tagged/tags/list?n=3';
    const links: string[] = [];
    while (path) {
      const res: Response = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { tags: string[] };
      expect(page.tags.length).toBeLessThanOrEqual(3);
      seen.push(...page.tags);
      const link = res.headers.get('link');
      if (link) links.push(link);
      path = link ? (/^<([^>]+)>; rel="next"$/.exec(link)?.[1] ?? null) : null;
    }
    expect(seen).toEqual([...tags].sort());
    expect(links[0]).toBe('</v2/root/oci/tagged/tags/list?n=3&last=b>; rel="next"');
    expect(links).toHaveLength(2);
  });

  it('resumes after last without n', async () => {
    const res = await fetch(`${server.url}/v2/root/oci/tagged/tags/list?last=c`);
    expect(((await res.json()) as { tags: string[] }).tags).toEqual(['d', 'e', 'latest']);
  });

  it('answers an unknown repository with an empty list', async () => {
    expect(await (await fetch(`${server.url}/v2/root/oci/never/tags/list`)).json()).toEqual({ name: 'root/oci/never', tags: [] });
  });
});

describe('referrers', () => {
  it('lists the manifests that declare a subject, with artifactType and annotations', async () => {
    const name = 'root/oci/refs';
    const cfg = await reg.pushBlob(name, config);
    const empty = await reg.pushBlob(name, '{}');
    const subjectBody = imageManifest(cfg, config.length, []);
    expect((await reg.pushManifest(name, 'base', subjectBody)).status).toBe(201);
    const subject = { mediaType: OCI_MANIFEST, digest: digestOf(subjectBody), size: Buffer.byteLength(subjectBody) };

    // An artifact with artifactType and annotations, and one whose type comes from its config.
    const signature = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      artifactType: 'application/vnd.example.signature',
      config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: `sha256:${empty}`, size: 2 },
      layers: [],
      subject,
      annotations: { 'org.example.kind': 'signature' },
    });
    const sbom = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: 'application/vnd.example.sbom.config', digest: `sha256:${empty}`, size: 2 },
      layers: [],
      subject,
    });
    for (const body of [signature, sbom]) {
      const res = await reg.pushManifest(name, digestOf(body), body);
      expect(res.status).toBe(201);
      expect(res.headers.get('oci-subject')).toBe(subject.digest);
    }

    const res = await fetch(`${server.url}/v2/${name}/referrers/${subject.digest}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(OCI_INDEX);
    const index = (await res.json()) as { schemaVersion: number; mediaType: string; manifests: Record<string, unknown>[] };
    expect(index.schemaVersion).toBe(2);
    expect(index.mediaType).toBe(OCI_INDEX);
    expect(index.manifests).toHaveLength(2);
    expect(index.manifests).toContainEqual({
      mediaType: OCI_MANIFEST,
      digest: digestOf(signature),
      size: Buffer.byteLength(signature),
      artifactType: 'application/vnd.example.signature',
      annotations: { 'org.example.kind': 'signature' },
    });
    expect(index.manifests).toContainEqual({
      mediaType: OCI_MANIFEST,
      digest: digestOf(sbom),
      size: Buffer.byteLength(sbom),
      artifactType: 'application/vnd.example.sbom.config',
    });

    // No artifactType filtering is applied.
    const filtered = await fetch(`${server.url}/v2/${name}/referrers/${subject.digest}?artifactType=application/vnd.example.signature`);
    expect(filtered.headers.get('oci-filters-applied')).toBeNull();
    expect(((await filtered.json()) as { manifests: unknown[] }).manifests).toHaveLength(2);

    // Deleting a referrer removes its entry.
    expect((await reg.fetch(`/v2/${name}/manifests/${digestOf(sbom)}`, { method: 'DELETE' })).status).toBe(202);
    const after = (await (await fetch(`${server.url}/v2/${name}/referrers/${subject.digest}`)).json()) as { manifests: { digest: string }[] };
    expect(after.manifests.map((m) => m.digest)).toEqual([digestOf(signature)]);
  });

  it('answers an empty image index when nothing refers to the digest', async () => {
    const res = await fetch(`${server.url}/v2/root/oci/refs/referrers/${digestOf('nothing')}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(OCI_INDEX);
    expect(await res.json()).toEqual({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [] });
  });
});
