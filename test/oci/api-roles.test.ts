/**
 * Which index a write lands in: a hosted index with a token accepts it, a hosted index without
 * one and a virtual index without an upload target answer 403 DENIED, and a virtual index routes
 * writes to its upload target while reading through its members.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oci, toml } from '../support/config.js';
import { RawConnection, requestHead } from '../support/raw-http.js';
import { basicAuth, startVelodex, type Velodex } from '../support/velodex.js';
import { digestOf, expectOciError, imageManifest, Registry } from './api-support.js';

let server: Velodex;
let reg: Registry;

const CONFIG = toml(
  oci.hosted('images', { route: 'team/images', token: 'images-token' }),
  oci.hosted('locked', { route: 'team/locked' }),
  oci.virtual('all', ['images', 'locked'], { route: 'team/all', uploadTarget: 'images' }),
  oci.virtual('mirror', ['images'], { route: 'team/mirror' }),
  oci.hosted('nested', { route: 'team/images/nested', token: 'nested-token' }),
);

const config = Buffer.from('{"os":"linux"}');

beforeAll(async () => {
  server = await startVelodex({ config: CONFIG });
  reg = new Registry(server.url, basicAuth('images-token'));
});

afterAll(async () => {
  await server?.stop();
});

describe('read-only indexes', () => {
  it('answers writes to a hosted index without an upload token with 403 DENIED', async () => {
    await expectOciError(await reg.fetch('/v2/team/locked/app/blobs/uploads/', { method: 'POST' }), 403, 'DENIED');
    await expectOciError(await reg.pushManifest('team/locked/app', 'v1', imageManifest(digestOf(config).slice(7), config.length, [])), 403, 'DENIED');
    await expectOciError(await reg.fetch(`/v2/team/locked/app/blobs/${digestOf(config)}`, { method: 'DELETE' }), 403, 'DENIED');
  });

  it('answers writes to a virtual index without an upload target with 403 DENIED, and stores nothing', async () => {
    const body = imageManifest(digestOf(config).slice(7), config.length, []);
    await expectOciError(await reg.pushManifest('team/mirror/app', 'v1', body), 403, 'DENIED');
    await expectOciError(await reg.fetch(`/v2/team/mirror/app/blobs/uploads/?digest=${digestOf('x')}`, { method: 'POST', body: 'x' }), 403, 'DENIED');
    expect((await fetch(`${server.url}/v2/team/mirror/app/blobs/${digestOf('x')}`, { method: 'HEAD' })).status).toBe(404);
    await expectOciError(await fetch(`${server.url}/v2/team/images/app/manifests/v1`), 404, 'MANIFEST_UNKNOWN');
  });

  it('reads a small body to its end before 403 DENIED (containerd writes it all before reading)', async () => {
    const conn = await RawConnection.open(server.url);
    await conn.write(requestHead('PUT', '/v2/team/locked/app/manifests/v2', { 'Content-Length': '4', Authorization: reg.auth }));
    await conn.write('{"');
    // Long enough for a server that answers early to have answered; nothing rests on speed.
    await sleep(300);
    expect(conn.answered).toBe(false);
    await conn.write('a"');
    const refused = await conn.response();
    expect(refused.status).toBe(403);
    expect(refused.headers.connection).not.toBe('close');
    await conn.write(requestHead('GET', '/v2/team/locked/app/tags/list', {}));
    expect((await conn.response()).status).toBe(200);
    conn.close();
  });

  it('still wants credentials on a writable target', async () => {
    const res = await reg.fetch('/v2/team/all/app/blobs/uploads/', { method: 'POST', headers: { authorization: basicAuth('nested-token') } });
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
    await expectOciError(res, 401, 'UNAUTHORIZED');
  });
});

describe('virtual index', () => {
  it('routes writes to the upload target and reads through the members', async () => {
    const cfg = await reg.pushBlob('team/all/app', config);
    const body = imageManifest(cfg, config.length, []);
    const res = await reg.pushManifest('team/all/app', 'v1', body);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v2/team/all/app/manifests/${digestOf(body)}`);

    for (const name of ['team/all/app', 'team/images/app', 'team/mirror/app']) {
      const get = await fetch(`${server.url}/v2/${name}/manifests/v1`);
      expect(get.status, name).toBe(200);
      expect(await get.text()).toBe(body);
      expect(await (await fetch(`${server.url}/v2/${name}/tags/list`)).json()).toEqual({ name, tags: ['v1'] });
    }
  });

  it('continues a chunked upload opened through the virtual route', async () => {
    const loc = await reg.openUpload('team/all/chunky');
    expect((await reg.fetch(loc, { method: 'PATCH', body: 'abc' })).status).toBe(202);
    const res = await reg.fetch(`${loc}?digest=${digestOf('abcdef')}`, { method: 'PUT', body: 'def' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v2/team/all/chunky/blobs/${digestOf('abcdef')}`);
  });
});

describe('route resolution', () => {
  it('picks the longest OCI route on whole segments', async () => {
    const nested = new Registry(server.url, basicAuth('nested-token'));
    const cfg = await nested.pushBlob('team/images/nested/tool', config);
    expect((await nested.pushManifest('team/images/nested/tool', 'v1', imageManifest(cfg, config.length, []))).status).toBe(201);
    // The nested index holds it; the outer index's repository "nested/tool" does not.
    expect((await fetch(`${server.url}/v2/team/images/nested/tool/manifests/v1`)).status).toBe(200);
    expect(await (await fetch(`${server.url}/v2/team/all/nested/tool/tags/list`)).json()).toEqual({ name: 'team/all/nested/tool', tags: [] });
    // "team/images/nestedx" aligns with "team/images" only.
    expect(await (await fetch(`${server.url}/v2/team/images/nestedx/tool/tags/list`)).json()).toEqual({ name: 'team/images/nestedx/tool', tags: [] });
  });
});

describe('catalog', () => {
  it('lists each index under its route, a virtual index with what its members hold', async () => {
    const res = await fetch(`${server.url}/v2/_catalog`);
    expect(res.status).toBe(200);
    // "chunky" holds a blob and no manifest: no repository yet.
    expect(await res.json()).toEqual({
      repositories: ['team/all/app', 'team/images/app', 'team/images/nested/tool', 'team/mirror/app'],
    });
  });
});
