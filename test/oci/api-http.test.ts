/**
 * The `/v2/` API at the HTTP level, where `fetch` hides what matters: a refused write reads a
 * small body before it answers (containerd writes the whole body first) and answers a large one
 * at once; a 405 names the allowed methods; HEAD answers wherever GET does; the upload status
 * answers while a chunk is still streaming; a client that goes away is no server error.
 */
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawConnection, rawRequest, requestHead } from '../support/raw-http.js';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { digestOf, imageManifest, OCI_MANIFEST, Registry, sha256 } from './api-support.js';

let server: Velodex;
let reg: Registry;
const MiB = 1024 * 1024;
/** Long enough for a server that answers early to have answered; the assertions never rest on speed. */
const SETTLE_MS = 300;

beforeAll(async () => {
  server = await startVelodex();
  reg = new Registry(server.url, basicAuth(defaultToken(server)));
  // The blobs of the manifest the refused-write tests push: an index accepts an image manifest
  // only when it holds what the manifest names.
  await reg.pushBlob('root/oci/refused', 'cfg');
  await reg.pushBlob('root/oci/refused', 'layer');
});

afterAll(async () => {
  await server?.stop();
});

/** A server log line parsed, for assertions on level and message. */
function logLines(): { level: number; msg: string; reqId?: string }[] {
  return server
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; reqId?: string });
}

describe('a refused write', () => {
  const manifest = imageManifest(sha256('cfg'), 3, [{ hex: sha256('layer'), size: 5 }]);

  it('reads a small body to its end before 401, and keeps the connection for the retry', async () => {
    const conn = await RawConnection.open(server.url);
    const body = Buffer.from(manifest);
    const path = '/v2/root/oci/refused/manifests/v1';
    await conn.write(requestHead('PUT', path, { 'Content-Type': OCI_MANIFEST, 'Content-Length': String(body.length) }));
    await conn.write(body.subarray(0, 10));
    await sleep(SETTLE_MS);
    // Containerd writes the rest before it reads: the answer must not have come yet.
    expect(conn.answered).toBe(false);
    await conn.write(body.subarray(10));
    const refused = await conn.response();
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Basic realm="velodex"');
    expect(refused.headers.connection).not.toBe('close');

    // The retry, with credentials, on the same connection.
    await conn.write(requestHead('PUT', path, { 'Content-Type': OCI_MANIFEST, 'Content-Length': String(body.length), Authorization: reg.auth }));
    await conn.write(body);
    const stored = await conn.response();
    expect(stored.status, stored.body).toBe(201);
    expect(stored.headers['docker-content-digest']).toBe(digestOf(manifest));
    expect(conn.isEnded).toBe(false);
    conn.close();
  });

  it('reads a small chunked body before 401 on every write verb', async () => {
    const writes: [string, string][] = [
      ['PUT', '/v2/root/oci/refused/manifests/v2'],
      ['POST', `/v2/root/oci/refused/blobs/uploads/?digest=${digestOf('blob')}`],
      ['PATCH', '/v2/root/oci/refused/blobs/uploads/some-session'],
      ['PUT', `/v2/root/oci/refused/blobs/uploads/some-session?digest=${digestOf('blob')}`],
      ['DELETE', '/v2/root/oci/refused/manifests/v2'],
    ];
    const conn = await RawConnection.open(server.url);
    for (const [method, path] of writes) {
      await conn.write(requestHead(method, path, { 'Transfer-Encoding': 'chunked', Authorization: basicAuth('wrong') }));
      await conn.write('5\r\nhello\r\n');
      await sleep(SETTLE_MS);
      expect(conn.answered, `${method} ${path}`).toBe(false);
      await conn.write('0\r\n\r\n');
      const res = await conn.response();
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(JSON.parse(res.body)).toMatchObject({ errors: [{ code: 'UNAUTHORIZED' }] });
    }
    expect(conn.isEnded).toBe(false);
    conn.close();
  });

  it('answers 401 at once to a Content-Length over 4 MiB and closes the connection', async () => {
    const conn = await RawConnection.open(server.url);
    await conn.write(requestHead('PUT', '/v2/root/oci/refused/manifests/huge', { 'Content-Type': OCI_MANIFEST, 'Content-Length': String(5 * MiB) }));
    await conn.write(Buffer.alloc(1024, 0x20));
    const res = await conn.response();
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe('close');
    await conn.ended;
  });

  it('stops reading a chunked body once it passes 4 MiB, answers 401 and closes', async () => {
    const conn = await RawConnection.open(server.url);
    await conn.write(requestHead('PATCH', '/v2/root/oci/refused/blobs/uploads/some-session', { 'Transfer-Encoding': 'chunked' }));
    const chunk = Buffer.alloc(MiB, 0x61);
    for (let i = 0; i < 5 && !conn.answered; i++) {
      await conn.write(`${chunk.length.toString(16)}\r\n`);
      await conn.write(chunk);
      await conn.write('\r\n');
    }
    const res = await conn.response();
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe('close');
    await conn.ended;
  });
});

describe('methods', () => {
  it('answers 405 with Allow naming the route methods', async () => {
    const cases: [string, string, string][] = [
      ['POST', '/v2/root/oci/app/manifests/latest', 'GET, HEAD, PUT, DELETE'],
      ['DELETE', '/v2/root/oci/app/tags/list', 'GET, HEAD'],
      ['PUT', `/v2/root/oci/app/blobs/${digestOf('x')}`, 'GET, HEAD, DELETE'],
      ['GET', '/v2/root/oci/app/blobs/uploads/', 'POST'],
      ['POST', '/v2/root/oci/app/blobs/uploads/some-session', 'GET, HEAD, PUT, PATCH, DELETE'],
      ['POST', '/v2/_catalog', 'GET, HEAD'],
      ['DELETE', '/v2/', 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await rawRequest(server.url, path, method, { authorization: reg.auth });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.allow, `${method} ${path}`).toBe(allow);
      expect(JSON.parse(res.body)).toMatchObject({ errors: [{ code: 'UNSUPPORTED' }] });
    }
  });

  it('answers HEAD wherever GET answers, with the same status and headers and no body', async () => {
    const cfg = await reg.pushBlob('root/oci/heads', 'config');
    const body = imageManifest(cfg, 6, []);
    expect((await reg.pushManifest('root/oci/heads', 'v1', body)).status).toBe(201);
    const paths = ['/v2/', '/v2/_catalog', '/v2/root/oci/heads/tags/list', `/v2/root/oci/heads/referrers/${digestOf(body)}`, '/v2/root/oci/heads/tags/list?n=1'];
    for (const path of paths) {
      // With credentials: without them the version check is the token realm's challenge (401).
      const get = await rawRequest(server.url, path, 'GET', { authorization: reg.auth });
      const head = await rawRequest(server.url, path, 'HEAD', { authorization: reg.auth });
      expect(head.status, path).toBe(get.status);
      expect(get.status, path).toBe(200);
      expect(head.headers['content-type'], path).toBe(get.headers['content-type']);
      expect(head.headers['content-length'], path).toBe(get.headers['content-length']);
      expect(head.body, path).toBe('');
    }
  });
});

describe('upload status', () => {
  it('answers 204 with the committed range while a PATCH is still streaming', async () => {
    const loc = await reg.openUpload('root/oci/status');
    const first = await reg.fetch(loc, { method: 'PATCH', body: '0123456789', headers: { 'content-range': '0-9' } });
    expect(first.status).toBe(202);

    const url = new URL(`${server.url}${loc}`);
    const patch = request({ host: url.hostname, port: url.port, method: 'PATCH', path: url.pathname, headers: { authorization: reg.auth, 'content-range': '10-19' } });
    const patched = new Promise<number>((resolve, reject) => {
      patch.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      patch.on('error', reject);
    });
    patch.write('abcde');
    await sleep(SETTLE_MS);

    const status = await reg.fetch(loc);
    expect(status.status).toBe(204);
    expect(status.headers.get('range')).toBe('0-9');
    expect(status.headers.get('location')).toBe(loc);

    patch.end('fghij');
    expect(await patched).toBe(202);
    const after = await reg.fetch(loc);
    expect(after.headers.get('range')).toBe('0-19');
  });
});

describe('a client that goes away', () => {
  it('is logged at info, not as a server error', async () => {
    const loc = await reg.openUpload('root/oci/gone');
    const conn = await RawConnection.open(server.url);
    const id = `gone-${Date.now()}`;
    await conn.write(requestHead('PATCH', loc, { Authorization: reg.auth, 'Content-Length': '1000', 'X-Request-Id': id }));
    await conn.write('only part of it');
    await sleep(SETTLE_MS);
    conn.close();
    // The server logs the abandoned request once its handler ended; wait (bounded) for that line.
    const settled = (l: { level: number; msg: string }) => l.level >= 50 || /client closed/.test(l.msg);
    let lines: ReturnType<typeof logLines> = [];
    for (let i = 0; i < 100 && !lines.some(settled); i++) {
      await sleep(100);
      lines = logLines().filter((l) => l.reqId === id);
    }
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(lines.some((l) => l.level === 30 && /client closed/.test(l.msg))).toBe(true);
  });
});
