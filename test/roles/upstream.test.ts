/** The upstream client against a real HTTP server: credentials, validators, redirects, deadlines, redaction. */
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { Secret } from '../../registry/src/config/secret.js';
import { UpstreamSlots } from '../../registry/src/limits/upstream-slots.js';
import { UpstreamClient } from '../../registry/src/roles/upstream.js';
import { UpstreamError } from '../../registry/src/roles/upstream-error.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { freePort } from '../support/pypiserver.js';
import { Origin } from './origin.js';

let origin: Origin;
let other: Origin;
let proxy: FaultProxy;

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

beforeAll(async () => {
  origin = await new Origin().start();
  other = await new Origin().start();
  origin.docs.set('/doc', { body: 'hello', etag: '"v1"', lastModified: 'Wed, 21 Oct 2026 07:28:00 GMT' });
  other.docs.set('/elsewhere', { body: 'moved here' });
  origin.docs.set('/to-same', { body: '', status: 302, headers: { location: '/doc' } });
  origin.docs.set('/to-other', { body: '', status: 307, headers: { location: `${other.url}/elsewhere` } });
  origin.docs.set('/loop', { body: '', status: 302, headers: { location: '/loop' } });
  origin.files.set('/slow', 1024 * 1024);
  proxy = await FaultProxy.start(origin.url);
});

afterAll(async () => {
  await proxy.close();
  await origin.close();
  await other.close();
});

const lastSeen = (o: Origin, path: string) => [...o.seen].reverse().find((s) => s.path === path)!.headers;

describe('UpstreamClient', () => {
  it('streams a GET with Basic credentials from Secrets and sends conditional headers', async () => {
    const client = new UpstreamClient({ baseUrl: origin.url, username: new Secret('alice', 'inline'), password: new Secret('s3cret', 'inline') });
    const res = await client.get('/doc', { etag: '"v0"', lastModified: 'Tue, 20 Oct 2026 07:28:00 GMT' });
    expect(res.status).toBe(200);
    expect(await text(res.body)).toBe('hello');
    const seen = lastSeen(origin, '/doc');
    expect(seen.authorization).toBe(basic('alice', 's3cret'));
    expect(seen['if-none-match']).toBe('"v0"');
    expect(seen['if-modified-since']).toBe('Tue, 20 Oct 2026 07:28:00 GMT');
    expect(seen['accept-encoding']).toBe('identity');

    const revalidated = await client.get('/doc', { etag: '"v1"' });
    expect(revalidated.status).toBe(304);
    revalidated.body.resume();
    client.close();
  });

  it('takes credentials from the URL user info but never shows them', async () => {
    const client = new UpstreamClient({ baseUrl: origin.url.replace('http://', 'http://bob:pa%40ss@') });
    expect(client.displayUrl).not.toContain('bob');
    const res = await client.get('/doc');
    expect(res.url).toBe(displayUrl(`${origin.url}/doc`));
    expect(res.url).not.toContain('/doc');
    res.body.resume();
    expect(lastSeen(origin, '/doc').authorization).toBe(basic('bob', 'pa@ss'));
    client.close();
  });

  it('follows redirects, sending credentials only to the upstream origin', async () => {
    const client = new UpstreamClient({ baseUrl: origin.url, username: new Secret('alice', 'inline'), password: new Secret('s3cret', 'inline') });
    const same = await client.get('/to-same');
    expect(same.status).toBe(200);
    expect(await text(same.body)).toBe('hello');
    expect(lastSeen(origin, '/doc').authorization).toBe(basic('alice', 's3cret'));

    const moved = await client.get('/to-other');
    expect(moved.status).toBe(200);
    expect(moved.url).toBe(displayUrl(`${other.url}/elsewhere`));
    expect(await text(moved.body)).toBe('moved here');
    expect(lastSeen(other, '/elsewhere').authorization).toBeUndefined();

    await expect(client.get('/loop')).rejects.toMatchObject({ kind: 'redirect' });
    client.close();
  });

  it("sends a caller's own Authorization (a bearer token) to the origin asked only, not where it redirects", async () => {
    const client = new UpstreamClient({ baseUrl: origin.url });
    const same = await client.get('/to-same', { headers: { Authorization: 'Bearer registry-token' } });
    await text(same.body);
    expect(lastSeen(origin, '/to-same').authorization).toBe('Bearer registry-token');
    expect(lastSeen(origin, '/doc').authorization).toBe('Bearer registry-token');

    const moved = await client.get('/to-other', { headers: { Authorization: 'Bearer registry-token' } });
    expect(await text(moved.body)).toBe('moved here');
    expect(lastSeen(origin, '/to-other').authorization).toBe('Bearer registry-token');
    expect(lastSeen(other, '/elsewhere').authorization).toBeUndefined();
    client.close();
  });

  it('returns every status instead of throwing', async () => {
    const client = new UpstreamClient({ baseUrl: origin.url });
    const res = await client.get('/absent');
    expect(res.status).toBe(404);
    res.body.resume();
    client.close();
  });

  it('keeps credentials, paths and query strings out of error messages', async () => {
    const port = await freePort();
    const client = new UpstreamClient({
      baseUrl: `http://carol:hunter2@127.0.0.1:${port}/base/?token=topsecret#frag`,
      password: new Secret('pw-from-secret', 'inline'),
    });
    const err = await client.get('/simple/x/?sig=abcdef').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    const message = (err as Error).message;
    // Scheme and host, and a fingerprint of the URL fetched: a path may carry a token.
    expect(message).toContain(displayUrl(`http://127.0.0.1:${port}/simple/x/?sig=abcdef`));
    for (const leak of ['carol', 'hunter2', 'pw-from-secret', 'topsecret', 'sig=', 'abcdef', '/simple/x/', '/base/']) expect(message).not.toContain(leak);
    expect((err as UpstreamError).url).not.toContain('/simple/x/');
    expect((err as UpstreamError).kind).toBe('connect');
    client.close();
  });

  it('gives up when the response headers do not come in time', async () => {
    proxy.on('/doc', { kind: 'stall' }, 1);
    const client = new UpstreamClient({ baseUrl: proxy.url, headersTimeoutMs: 300 });
    await expect(client.get('/doc')).rejects.toMatchObject({ name: 'UpstreamError', kind: 'timeout' });
    proxy.release();
    client.close();
  });

  it('errors the body when it goes idle mid-transfer', async () => {
    proxy.on('/slow', { kind: 'stall', afterBytes: 1000 }, 1);
    const client = new UpstreamClient({ baseUrl: proxy.url, idleTimeoutMs: 300 });
    const res = await client.get('/slow');
    expect(res.status).toBe(200);
    const err = await text(res.body).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UpstreamError', kind: 'timeout' });
    proxy.release();
    client.close();
  });

  it('holds an upstream slot from the request until the body closes', async () => {
    const slots = new UpstreamSlots({ limit: 2 });
    const client = new UpstreamClient({ baseUrl: origin.url, slots });
    const res = await client.get('/doc');
    expect(slots.inflight).toBe(1);
    await text(res.body);
    await new Promise((r) => setImmediate(r));
    expect(slots.inflight).toBe(0);
    const port = await freePort();
    const dead = new UpstreamClient({ baseUrl: `http://127.0.0.1:${port}`, slots });
    await expect(dead.get('/x')).rejects.toBeInstanceOf(UpstreamError);
    expect(slots.inflight).toBe(0);
    client.close();
    dead.close();
  });
});
