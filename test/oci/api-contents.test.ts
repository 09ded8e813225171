/**
 * The layer contents browser: listing a gzip or plain tar layer, paging a text member in bounded
 * chunks, and the 404 / 415 / 416 / 422 answers.
 */
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { digestOf, expectOciError, Registry } from './api-support.js';

let server: Velodex;
let reg: Registry;
let gzLayer: string;
let plainLayer: string;

const text = Buffer.from(Array.from({ length: 3000 }, (_, i) => `line ${i}: ünïcödé text in a layer\n`).join(''));
const binary = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3, 0, 0, 0xff]);

async function tarOf(entries: { name: string; type?: 'file' | 'directory' | 'symlink'; body?: Buffer; linkname?: string }[]): Promise<Buffer> {
  const p = pack();
  for (const e of entries) {
    if (e.type === 'directory') p.entry({ name: e.name, type: 'directory' });
    else if (e.type === 'symlink') p.entry({ name: e.name, type: 'symlink', linkname: e.linkname ?? '' });
    else p.entry({ name: e.name }, e.body ?? Buffer.alloc(0));
  }
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

beforeAll(async () => {
  server = await startVelodex();
  reg = new Registry(server.url, basicAuth(defaultToken(server)));
  const tar = await tarOf([
    { name: 'etc/', type: 'directory' },
    { name: 'etc/notes.txt', body: text },
    { name: 'etc/empty', body: Buffer.alloc(0) },
    { name: 'bin/tool', body: binary },
    { name: 'bin/link', type: 'symlink', linkname: 'tool' },
  ]);
  gzLayer = `sha256:${await reg.pushBlob('root/oci/layers', gzipSync(tar))}`;
  plainLayer = `sha256:${await reg.pushBlob('root/oci/layers', tar)}`;
});

afterAll(async () => {
  await server?.stop();
});

const contents = (digest: string, query = '') => fetch(`${server.url}/v2/root/oci/layers/blobs/${digest}/contents${query}`);

describe('listing', () => {
  it('lists the members of a gzip and of a plain tar layer', async () => {
    for (const digest of [gzLayer, plainLayer]) {
      const res = await contents(digest);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({
        members: [
          { path: 'etc/', size: 0, kind: 'directory', previewable: false },
          { path: 'etc/notes.txt', size: text.length, kind: 'file', previewable: true },
          { path: 'etc/empty', size: 0, kind: 'file', previewable: true },
          { path: 'bin/tool', size: binary.length, kind: 'file', previewable: false },
          { path: 'bin/link', size: 0, kind: 'symlink', previewable: false },
        ],
      });
    }
  });

  it('answers a blob that is no tar layer with 422', async () => {
    const notTar = `sha256:${await reg.pushBlob('root/oci/layers', Buffer.from('{"just":"json, not a tar archive at all"}'.repeat(20)))}`;
    let res = await contents(notTar);
    expect(res.status).toBe(422);
    expect((await res.json()) as unknown).toHaveProperty('errors');
    const badGzip = `sha256:${await reg.pushBlob('root/oci/layers', Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0]), Buffer.alloc(64, 7)]))}`;
    res = await contents(badGzip);
    expect(res.status).toBe(422);
    await res.text();
  });

  it('answers an unknown blob with 404 BLOB_UNKNOWN and a bad digest with 400', async () => {
    await expectOciError(await contents(digestOf('absent')), 404, 'BLOB_UNKNOWN');
    await expectOciError(await contents('sha1:abc'), 400, 'DIGEST_INVALID');
  });
});

describe('preview', () => {
  it('pages a text member in 64 KiB chunks with size, offset and next-offset headers', async () => {
    const parts: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const res = await contents(gzLayer, `?member=etc/notes.txt&offset=${offset}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(res.headers.get('x-velodex-member-size')).toBe(String(text.length));
      expect(res.headers.get('x-velodex-member-offset')).toBe(String(offset));
      const chunk = Buffer.from(await res.arrayBuffer());
      expect(chunk.length).toBeLessThanOrEqual(64 * 1024);
      parts.push(chunk);
      const next = res.headers.get('x-velodex-next-offset');
      if (next === null) break;
      expect(Number(next)).toBe(offset + chunk.length);
      offset = Number(next);
    }
    expect(parts.length).toBeGreaterThan(1);
    expect(Buffer.concat(parts)).toEqual(text);
  });

  it('previews from an offset, accepts a ./ prefix, and serves an empty member', async () => {
    let res = await contents(plainLayer, '?member=./etc/notes.txt&offset=100');
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(text.subarray(100, 100 + 64 * 1024));
    res = await contents(plainLayer, '?member=etc/empty');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-velodex-member-size')).toBe('0');
    expect(res.headers.get('x-velodex-next-offset')).toBeNull();
    expect(await res.text()).toBe('');
  });

  it('answers a binary member or a directory with 415', async () => {
    for (const member of ['bin/tool', 'etc/', 'bin/link']) {
      const res = await contents(gzLayer, `?member=${member}&offset=0`);
      expect(res.status, member).toBe(415);
      expect((await res.json()) as unknown).toHaveProperty('errors');
    }
  });

  it('answers an unknown member with 404', async () => {
    const res = await contents(gzLayer, '?member=etc/missing.txt&offset=0');
    expect(res.status).toBe(404);
    expect((await res.json()) as unknown).toHaveProperty('errors');
  });

  it('answers an offset past the member with 416', async () => {
    const res = await contents(gzLayer, `?member=etc/notes.txt&offset=${text.length + 1}`);
    expect(res.status).toBe(416);
    await res.text();
    expect((await contents(gzLayer, '?member=etc/notes.txt&offset=-5')).status).toBe(416);
  });
});
