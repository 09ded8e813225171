/**
 * The read side over HTTP against the real server, with records seeded straight into the store
 * (the way a second server process, or the upload path, would leave them): Simple HTML/JSON and
 * negotiation, validators, redirects, file downloads with ranges, metadata siblings, legacy JSON.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectRecords, type FileRecord, type ProjectRecord } from '../../registry/src/python/model/records.js';
import type { BlobStore } from '../../registry/src/storage/types.js';
import { serverStores } from '../support/store-probe.js';
import { rawRequest } from '../support/raw-http.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const PIP_ACCEPT = 'application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01';
const JSON_TYPE = 'application/vnd.pypi.simple.v1+json';
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

interface SimpleFile {
  filename: string;
  url: string;
  hashes: { sha256: string };
  'requires-python': string | null;
  size: number;
  'upload-time': string;
  yanked: boolean | string;
  'core-metadata': { sha256: string } | false;
  'dist-info-metadata': { sha256: string } | false;
}
interface SimpleDetail {
  meta: { 'api-version': string };
  name: string;
  versions: string[];
  files: SimpleFile[];
}
interface LegacyFile {
  filename: string;
  url: string;
  digests: { sha256: string; md5: null; blake2b_256: null };
  size: number;
  upload_time: string;
  upload_time_iso_8601: string;
  yanked: boolean;
  yanked_reason: string | null;
  requires_python: string | null;
  packagetype: string;
}
interface LegacyDoc {
  info: { name: string; version: string; requires_python: string | null; yanked: boolean; downloads: { last_day: number } };
  last_serial: number;
  releases: Record<string, LegacyFile[]>;
  urls: LegacyFile[];
  vulnerabilities: unknown[];
}

let server: Velodex;
let records: ProjectRecords;
let base: string;
const blobs: Record<string, Buffer> = {};

async function addBlob(store: BlobStore, bytes: Buffer): Promise<string> {
  const info = await store.put(Readable.from([bytes]));
  blobs[info.digest] = bytes;
  return info.digest;
}

async function seedFile(store: BlobStore, project: string, file: Omit<FileRecord, 'sha256' | 'size' | 'metadataSha256'>, withMetadata = true): Promise<FileRecord> {
  const bytes = Buffer.from(`bytes of ${file.filename} `.repeat(50));
  const digest = await addBlob(store, bytes);
  const metadataSha256 = withMetadata ? await addBlob(store, Buffer.from(`Metadata-Version: 2.1\nName: ${project}\nVersion: ${file.version}\n`)) : undefined;
  return { ...file, sha256: digest, size: bytes.length, ...(metadataSha256 ? { metadataSha256 } : {}) };
}

function put(project: string, record: ProjectRecord): Promise<unknown> {
  return records.update('hosted', project, () => record);
}

beforeAll(async () => {
  const dataDir = tempDir();
  // Seeded through the store's interface, as the server will open it, before the server starts.
  const { blobs: blobStore, meta } = await serverStores(dataDir);
  records = new ProjectRecords(meta);
  const files: FileRecord[] = [];
  const t = (n: number) => `2024-0${n}-01T10:00:00.${n}00Z`;
  for (const [i, v] of ['1.9', '1.10', '0.9.dev1', '2.0rc1', '1.0'].entries()) {
    files.push(await seedFile(blobStore, 'demo-pkg', { filename: `demo_pkg-${v}-py3-none-any.whl`, version: v, kind: 'wheel', uploadTime: t(i + 1), requiresPython: '>=3.8,<4' }));
  }
  files.push(await seedFile(blobStore, 'demo-pkg', { filename: 'demo_pkg-1.10.tar.gz', version: '1.10', kind: 'sdist', uploadTime: t(6) }, false));
  // 1.11 exists but is yanked: installers and legacy JSON `urls` must skip it.
  files.push(await seedFile(blobStore, 'demo-pkg', { filename: 'demo_pkg-1.11-py3-none-any.whl', version: '1.11', kind: 'wheel', uploadTime: t(7), yanked: 'broken <build> & "bad"' }));
  files.push(await seedFile(blobStore, 'demo-pkg', { filename: 'demo_pkg-1.12-py3-none-any.whl', version: '1.12', kind: 'wheel', uploadTime: t(8), yanked: '' }));
  await put('demo-pkg', { name: 'Demo_Pkg', files: Object.fromEntries(files.map((f) => [f.filename, f])) });
  const other = await seedFile(blobStore, 'other', { filename: 'other-0.1-py3-none-any.whl', version: '0.1', kind: 'wheel', uploadTime: t(1) });
  await put('other', { name: 'other', files: { [other.filename]: other } });
  server = await startVelodex({ dataDir });
  base = `${server.url}/root/hosted`;
});

afterAll(async () => {
  await server?.stop();
});

async function simpleJson(project: string): Promise<SimpleDetail> {
  const res = await fetch(`${base}/simple/${project}/`, { headers: { accept: PIP_ACCEPT } });
  expect(res.status).toBe(200);
  return (await res.json()) as SimpleDetail;
}

describe('Simple API', () => {
  it('lists projects in HTML and JSON', async () => {
    const html = await fetch(`${base}/simple/`);
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(html.headers.get('vary')).toBe('Accept');
    const body = await html.text();
    expect(body).toContain('<meta name="pypi:repository-version" content="1.4">');
    expect(body).toContain('<a href="demo-pkg/">demo-pkg</a>');
    expect(body).toContain('<a href="other/">other</a>');

    const json = await fetch(`${base}/simple/`, { headers: { accept: PIP_ACCEPT } });
    expect(json.headers.get('content-type')).toBe(JSON_TYPE);
    expect(json.headers.get('vary')).toBe('Accept');
    expect(await json.json()).toEqual({ meta: { 'api-version': '1.4' }, projects: [{ name: 'demo-pkg' }, { name: 'other' }] });
  });

  it('serves the PEP 691/700 JSON detail page', async () => {
    const doc = await simpleJson('demo-pkg');
    expect(doc.meta['api-version']).toBe('1.4');
    // PEP 691: the normalized name, however the project was first spelled.
    expect(doc.name).toBe('demo-pkg');
    expect(doc.versions).toEqual(['0.9.dev1', '1.0', '1.9', '1.10', '1.11', '1.12', '2.0rc1']);
    const byName = new Map(doc.files.map((f) => [f.filename, f]));
    const wheel = byName.get('demo_pkg-1.10-py3-none-any.whl')!;
    expect(wheel.url).toBe(`../../files/${wheel.hashes.sha256}/demo_pkg-1.10-py3-none-any.whl`);
    expect(wheel.size).toBe(blobs[wheel.hashes.sha256]!.length);
    expect(wheel['upload-time']).toBe('2024-02-01T10:00:00.200000Z');
    expect(wheel['requires-python']).toBe('>=3.8,<4');
    expect(wheel.yanked).toBe(false);
    expect(wheel['core-metadata']).toEqual(wheel['dist-info-metadata']);
    expect(wheel['core-metadata']).toMatchObject({ sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const sdist = byName.get('demo_pkg-1.10.tar.gz')!;
    expect(sdist['core-metadata']).toBe(false);
    expect(sdist['requires-python']).toBeNull();
    expect(byName.get('demo_pkg-1.11-py3-none-any.whl')!.yanked).toBe('broken <build> & "bad"');
    expect(byName.get('demo_pkg-1.12-py3-none-any.whl')!.yanked).toBe(true);
  });

  it('serves the PEP 503 HTML detail page with escaped data attributes', async () => {
    const res = await fetch(`${base}/simple/demo-pkg/`, { headers: { accept: 'text/html' } });
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('vary')).toBe('Accept');
    const html = await res.text();
    expect(html).toContain('<meta name="pypi:repository-version" content="1.4">');
    expect(html).toContain('<title>Links for Demo_Pkg</title>');
    const doc = await simpleJson('demo-pkg');
    const wheel = doc.files.find((f) => f.filename === 'demo_pkg-1.10-py3-none-any.whl')!;
    const md = (wheel['core-metadata'] as { sha256: string }).sha256;
    expect(html).toContain(
      `<a href="../../files/${wheel.hashes.sha256}/demo_pkg-1.10-py3-none-any.whl#sha256=${wheel.hashes.sha256}" data-requires-python="&gt;=3.8,&lt;4" ` +
        `data-dist-info-metadata="sha256=${md}" data-core-metadata="sha256=${md}">demo_pkg-1.10-py3-none-any.whl</a>`,
    );
    expect(html).toContain('data-yanked="broken &lt;build&gt; &amp; &quot;bad&quot;">demo_pkg-1.11-py3-none-any.whl</a>');
    expect(html).toContain('data-yanked="">demo_pkg-1.12-py3-none-any.whl</a>');
    expect(html).not.toMatch(/demo_pkg-1\.10\.tar\.gz"[^>]*data-core-metadata/);
  });

  it('negotiates the media type from Accept', async () => {
    const typeFor = async (accept: string) => (await fetch(`${base}/simple/demo-pkg/`, { headers: { accept } })).headers.get('content-type');
    expect(await typeFor('application/vnd.pypi.simple.latest+json')).toBe(JSON_TYPE);
    expect(await typeFor('application/vnd.pypi.simple.v1+html')).toBe('application/vnd.pypi.simple.v1+html');
    expect(await typeFor('application/vnd.pypi.simple.v1+json;q=0.2, text/html')).toBe('text/html; charset=utf-8');
    expect(await typeFor('*/*')).toBe('text/html; charset=utf-8');
  });

  it('answers If-None-Match with 304 and sees a change written by another process', async () => {
    const first = await fetch(`${base}/simple/other/`, { headers: { accept: PIP_ACCEPT } });
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]+"$/);
    const again = await fetch(`${base}/simple/other/`, { headers: { accept: PIP_ACCEPT, 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(again.headers.get('vary')).toBe('Accept');
    expect(again.headers.get('etag')).toBe(etag);
    // The HTML variant has its own validator.
    const html = await fetch(`${base}/simple/other/`, { headers: { 'if-none-match': etag } });
    expect(html.status).toBe(200);

    // This test process writes the record, as a second server over the same store would.
    await records.update('hosted', 'other', (r) =>
      r ? { ...r, files: Object.fromEntries(Object.entries(r.files).map(([k, f]) => [k, { ...f, yanked: 'by another process' }])) } : r,
    );
    const changed = await fetch(`${base}/simple/other/`, { headers: { accept: PIP_ACCEPT, 'if-none-match': etag } });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);
    expect(((await changed.json()) as SimpleDetail).files[0]!.yanked).toBe('by another process');
  });

  it('redirects non-normalized names and missing slashes with a relative Location', async () => {
    for (const [path, location, canonical] of [
      ['/simple/Demo_Pkg/', '../demo-pkg/', '/simple/demo-pkg/'],
      ['/simple/demo.pkg', 'demo-pkg/', '/simple/demo-pkg/'],
      ['/simple/demo-pkg', 'demo-pkg/', '/simple/demo-pkg/'],
      ['/simple/Demo_Pkg/?x=1', '../demo-pkg/?x=1', '/simple/demo-pkg/?x=1'],
      ['/simple', 'simple/', '/simple/'],
      ['/Demo.Pkg/json', '../demo-pkg/json', '/demo-pkg/json'],
      ['/Demo.Pkg/1.0/json', '../../demo-pkg/1.0/json', '/demo-pkg/1.0/json'],
    ]) {
      const res = await rawRequest(server.url, `/root/hosted${path}`);
      expect(res.status, path).toBe(301);
      expect(res.headers.location, path).toBe(location);
      // Behind a proxy that mounts velodex under /mirror/, the client stays under /mirror/.
      const proxied = new URL(res.headers.location as string, `https://proxy.example/mirror/root/hosted${path}`);
      expect(proxied.pathname + proxied.search, path).toBe(`/mirror/root/hosted${canonical}`);
    }
    // Both the redirect and its target carry Vary, as every Simple answer does.
    expect((await rawRequest(server.url, '/root/hosted/simple/Demo_Pkg/')).headers.vary).toBe('Accept');
  });

  it('carries Vary: Accept on every Simple answer, errors included', async () => {
    for (const [method, path, status] of [
      ['GET', '/simple/a!b/', 404],
      ['GET', '/simple/nope/', 404],
      ['POST', '/simple/', 405],
      ['POST', '/simple/demo-pkg/', 405],
    ] as const) {
      const res = await rawRequest(server.url, `/root/hosted${path}`, method, { accept: PIP_ACCEPT });
      expect(res.status, `${method} ${path}`).toBe(status);
      expect(res.headers.vary, `${method} ${path}`).toBe('Accept');
    }
  });

  it('answers every 405 with an Allow header naming all the methods the path takes', async () => {
    for (const [method, path, allow] of [
      // The project list to GET, a delete of a project named "simple".
      ['POST', '/simple/', 'GET, HEAD, DELETE'],
      // A detail page to GET, a yank of project "simple" to PUT/DELETE, a delete of its version.
      ['POST', '/simple/yank', 'GET, HEAD, PUT, DELETE'],
      ['PATCH', '/simple/demo-pkg/', 'GET, HEAD, DELETE'],
      ['GET', '/', 'POST'],
      // Legacy JSON to GET, a delete of a version named "json".
      ['PUT', '/demo-pkg/json', 'GET, HEAD, DELETE'],
      ['POST', `/files/${'a'.repeat(64)}/x-1.0.tar.gz`, 'GET, HEAD'],
      ['DELETE', `/inspect/${'a'.repeat(64)}/x-1.0.tar.gz`, 'GET, HEAD'],
      ['GET', '/demo-pkg/1.0/promote', 'PUT'],
      ['OPTIONS', '/demo-pkg/restore', 'GET, HEAD, PUT, DELETE'],
    ] as const) {
      const res = await rawRequest(server.url, `/root/hosted${path}`, method);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.allow, `${method} ${path}`).toBe(allow);
    }
  });

  it('gives 404 for unknown projects and paths, 405 for other methods', async () => {
    const missing = await fetch(`${base}/simple/nope/`, { headers: { accept: PIP_ACCEPT } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('vary')).toBe('Accept');
    expect((await fetch(`${base}/nope/json`)).status).toBe(404);
    expect((await fetch(`${base}/demo-pkg/9.9/json`)).status).toBe(404);
    expect((await fetch(`${base}/simple/demo-pkg/extra/`)).status).toBe(404);
    expect((await fetch(`${base}/whatever`)).status).toBe(404);
    const post = await fetch(`${base}/simple/`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD, DELETE');
    const head = await fetch(`${base}/simple/demo-pkg/`, { method: 'HEAD', headers: { accept: PIP_ACCEPT } });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe(JSON_TYPE);
  });

  it('answers names no project can have with 404, on every path that takes a project', async () => {
    const sha = 'a'.repeat(64);
    const tooLong = 'a'.repeat(201);
    for (const [method, path] of [
      ['GET', '/simple/a!b/'],
      ['GET', '/simple/%C3%A9t%C3%A9/'],
      ['GET', `/simple/${tooLong}/`],
      ['GET', '/a!b/json'],
      ['GET', '/a!b/1.0/json'],
      ['GET', `/files/${sha}/a!b-1.0.tar.gz`],
      ['GET', `/inspect/${sha}/a!b-1.0.tar.gz`],
      ['PUT', '/a!b/yank'],
      ['DELETE', '/a!b/1.0/'],
    ] as const) {
      const res = await rawRequest(server.url, `/root/hosted${path}`, method);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect((JSON.parse(res.body) as { message: string }).message).toMatch(/not a valid project name|no file|no project/);
    }
  });
});

describe('files', () => {
  async function wheel(): Promise<SimpleFile> {
    const doc = await simpleJson('demo-pkg');
    return doc.files.find((f) => f.filename === 'demo_pkg-1.10-py3-none-any.whl')!;
  }
  const fileUrl = (f: SimpleFile) => new URL(f.url, `${base}/simple/demo-pkg/`).href;

  it('streams the artifact with validators, and HEAD without a body', async () => {
    const f = await wheel();
    const bytes = blobs[f.hashes.sha256]!;
    const res = await fetch(fileUrl(f));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String(bytes.length));
    expect(res.headers.get('etag')).toBe(`"${f.hashes.sha256}"`);
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes);

    const head = await rawRequest(server.url, new URL(fileUrl(f)).pathname, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(bytes.length));
    expect(head.body).toBe('');

    const cond = await fetch(fileUrl(f), { headers: { 'if-none-match': `"${f.hashes.sha256}"` } });
    expect(cond.status).toBe(304);
  });

  it('serves single ranges, refuses unsatisfiable and malformed ones, serves multiple ranges and other units whole', async () => {
    const f = await wheel();
    const bytes = blobs[f.hashes.sha256]!;
    const part = await fetch(fileUrl(f), { headers: { range: 'bytes=10-19' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 10-19/${bytes.length}`);
    expect(part.headers.get('content-length')).toBe('10');
    expect(Buffer.from(await part.arrayBuffer())).toEqual(bytes.subarray(10, 20));

    const tail = await fetch(fileUrl(f), { headers: { range: 'bytes=-5' } });
    expect(tail.status).toBe(206);
    expect(Buffer.from(await tail.arrayBuffer())).toEqual(bytes.subarray(bytes.length - 5));

    const bad = await fetch(fileUrl(f), { headers: { range: `bytes=${bytes.length}-` } });
    expect(bad.status).toBe(416);
    expect(bad.headers.get('content-range')).toBe(`bytes */${bytes.length}`);

    // Malformed bytes ranges are refused as on /v2/ (one parser); other units are ignored.
    for (const range of ['bytes=abc', 'bytes=9-2']) {
      const malformed = await fetch(fileUrl(f), { headers: { range } });
      expect(malformed.status, range).toBe(416);
      expect(malformed.headers.get('content-range'), range).toBe(`bytes */${bytes.length}`);
    }
    const otherUnit = await fetch(fileUrl(f), { headers: { range: 'items=0-1' } });
    expect(otherUnit.status).toBe(200);
    expect(Buffer.from(await otherUnit.arrayBuffer()).length).toBe(bytes.length);

    const multi = await fetch(fileUrl(f), { headers: { range: 'bytes=0-1,5-6' } });
    expect(multi.status).toBe(200);
    expect(Buffer.from(await multi.arrayBuffer()).length).toBe(bytes.length);

    const headRange = await rawRequest(server.url, new URL(fileUrl(f)).pathname, 'HEAD', { range: 'bytes=0-9' });
    expect(headRange.status).toBe(206);
    expect(headRange.headers['content-length']).toBe('10');
  });

  it('serves the PEP 658 metadata sibling', async () => {
    const f = await wheel();
    const md = (f['core-metadata'] as { sha256: string }).sha256;
    const res = await fetch(`${fileUrl(f)}.metadata`);
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    expect(sha(body)).toBe(md);
    expect(body.toString()).toContain('Version: 1.10');
    expect(res.headers.get('etag')).toBe(`"${md}"`);
    // The sdist was seeded without metadata: no sibling.
    const doc = await simpleJson('demo-pkg');
    const sdist = doc.files.find((x) => x.filename.endsWith('.tar.gz'))!;
    expect((await fetch(`${new URL(sdist.url, `${base}/simple/demo-pkg/`).href}.metadata`)).status).toBe(404);
  });

  it('answers 404 for a wrong digest, a foreign filename or a bad digest', async () => {
    const f = await wheel();
    const other = (await simpleJson('other')).files[0]!;
    expect((await fetch(`${base}/files/${other.hashes.sha256}/${f.filename}`)).status).toBe(404);
    expect((await fetch(`${base}/files/${f.hashes.sha256}/demo_pkg-9.9-py3-none-any.whl`)).status).toBe(404);
    expect((await fetch(`${base}/files/${f.hashes.sha256}/other-0.1-py3-none-any.whl`)).status).toBe(404);
    expect((await fetch(`${base}/files/xyz/${f.filename}`)).status).toBe(404);
    expect((await fetch(`${base}/files/${f.hashes.sha256}/${f.filename}`, { method: 'DELETE' })).status).toBe(405);
  });
});

describe('legacy JSON', () => {
  it('agrees with the Simple detail page', async () => {
    const simple = await simpleJson('demo-pkg');
    const res = await fetch(`${base}/demo-pkg/json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const doc = (await res.json()) as LegacyDoc;
    expect(doc.info.name).toBe('Demo_Pkg');
    // Newest final release with a live file: 1.11 and 1.12 are yanked, 2.0rc1 is a pre-release.
    expect(doc.info.version).toBe('1.10');
    expect(doc.info.requires_python).toBe('>=3.8,<4');
    expect(doc.info.downloads.last_day).toBe(-1);
    expect(doc.last_serial).toBe(-1);
    expect(doc.vulnerabilities).toEqual([]);
    expect(Object.keys(doc.releases)).toEqual(simple.versions);
    expect(doc.urls.map((u) => u.filename)).toEqual(['demo_pkg-1.10-py3-none-any.whl', 'demo_pkg-1.10.tar.gz']);

    const legacy = Object.values(doc.releases).flat();
    expect(legacy).toHaveLength(simple.files.length);
    for (const s of simple.files) {
      const l = legacy.find((x) => x.filename === s.filename)!;
      expect(l.digests).toEqual({ sha256: s.hashes.sha256, md5: null, blake2b_256: null });
      expect(l.size).toBe(s.size);
      expect(l.upload_time_iso_8601).toBe(s['upload-time']);
      expect(l.upload_time).toBe(s['upload-time'].slice(0, 19));
      expect(l.requires_python).toBe(s['requires-python']);
      expect(l.yanked).toBe(s.yanked !== false);
      expect(l.yanked_reason).toBe(typeof s.yanked === 'string' ? s.yanked : null);
      expect(l.url).toBe(new URL(s.url, `${base}/simple/demo-pkg/`).href);
      expect(l.packagetype).toBe(s.filename.endsWith('.whl') ? 'bdist_wheel' : 'sdist');
    }
  });

  it('serves one release, and 404 for an unknown version', async () => {
    const res = await fetch(`${base}/demo-pkg/1.11/json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as LegacyDoc;
    expect(doc.info.version).toBe('1.11');
    expect(doc.info.yanked).toBe(true);
    expect(doc.urls.map((u) => u.filename)).toEqual(['demo_pkg-1.11-py3-none-any.whl']);
    expect(doc.urls[0]!.yanked_reason).toBe('broken <build> & "bad"');
    expect((await fetch(`${base}/demo-pkg/1.13/json`)).status).toBe(404);
  });

  it('finds a release by any PEP 440 spelling of its version', async () => {
    for (const spelling of ['1.10.0', '1.10.0.0', '01.10', '1.10', 'v1.10']) {
      const res = await fetch(`${base}/demo-pkg/${spelling}/json`);
      expect(res.status, spelling).toBe(200);
      const doc = (await res.json()) as LegacyDoc;
      expect(doc.info.version, spelling).toBe('1.10');
      expect(Object.keys(doc.releases), spelling).toEqual(['1.10']);
    }
    expect((await fetch(`${base}/demo-pkg/2.0.0rc1/json`)).status).toBe(200);
    expect((await fetch(`${base}/demo-pkg/1.1/json`)).status).toBe(404);
  });
});
