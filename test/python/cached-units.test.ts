/** Units of the cached and virtual roles: reading upstream pages and merging members. */
import { describe, expect, it } from 'vitest';
import { toCachedProject } from '../../registry/src/python/read/cached/to-resolved.js';
import { parseUpstreamList } from '../../registry/src/python/read/cached/upstream-list.js';
import { parseUpstreamPage } from '../../registry/src/python/read/cached/upstream-page.js';
import { renderDetailJson } from '../../registry/src/python/handlers/simple/render.js';
import { mergeProjects } from '../../registry/src/python/read/virtual/merge.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const M = 'c'.repeat(64);
const PAGE = 'https://up.example/simple/demo-pkg/';

describe('upstream HTML pages', () => {
  const html = `<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.1">
<META NAME="pypi:project-status" CONTENT="quarantined"><title>Links for Demo.Pkg</title></head><body>
<!-- <a href="commented.whl#sha256=${A}">commented.whl</a> -->
<a href="../../packages/demo_pkg-1.0-py3-none-any.whl#sha256=${A}" data-requires-python="&gt;=3.8" data-core-metadata="sha256=${M}">demo_pkg-1.0-py3-none-any.whl</a><br>
<a href='https://files.example/demo-pkg-1.0.tar.gz#sha256=${B.toUpperCase()}' data-yanked="broken &amp; bad">demo-pkg-1.0.tar.gz</a>
<a href="/packages/demo_pkg-0.9.egg#md5=0123">demo_pkg-0.9.egg</a>
<a href="demo_pkg-2.0-py3-none-any.whl#sha256=${B}" data-yanked data-dist-info-metadata="true" data-gpg-sig="true">demo_pkg-2.0-py3-none-any.whl</a>
</body></html>`;

  it('reads anchors with entities, hashes, yanked markers and metadata; drops files without sha256', () => {
    const page = parseUpstreamPage(Buffer.from(html), 'text/html', PAGE);
    expect(page.name).toBe('Demo.Pkg');
    expect(page.status).toEqual({ status: 'quarantined' });
    expect(page.files.map((f) => f.filename)).toEqual([
      'demo_pkg-1.0-py3-none-any.whl',
      'demo-pkg-1.0.tar.gz',
      'demo_pkg-0.9.egg',
      'demo_pkg-2.0-py3-none-any.whl',
    ]);
    const [wheel, sdist, egg, wheel2] = page.files;
    expect(wheel!.url).toBe('https://up.example/packages/demo_pkg-1.0-py3-none-any.whl');
    expect(wheel!.requiresPython).toBe('>=3.8');
    expect(wheel!.metadata).toEqual({ sha256: M });
    expect(sdist!.sha256).toBe(B);
    expect(sdist!.yanked).toBe('broken & bad');
    expect(egg!.sha256).toBeNull();
    expect(wheel2!.url).toBe('https://up.example/simple/demo-pkg/demo_pkg-2.0-py3-none-any.whl');
    expect(wheel2!.yanked).toBe('');
    expect(wheel2!.metadata).toBe(true);
    expect(wheel2!.gpgSig).toBe(true);

    const { resolved, upstream } = toCachedProject(page, 'demo-pkg');
    expect(resolved.files.map((f) => f.filename)).toEqual(['demo-pkg-1.0.tar.gz', 'demo_pkg-1.0-py3-none-any.whl', 'demo_pkg-2.0-py3-none-any.whl']);
    expect(upstream.has('demo_pkg-0.9.egg')).toBe(false);
    expect(resolved.releases.map((r) => r.version)).toEqual(['1.0', '2.0']);
    expect(resolved.files.find((f) => f.kind === 'sdist')!.metadataUnhashed).toBeUndefined();
    expect(resolved.files.find((f) => f.filename.startsWith('demo_pkg-2.0'))!.metadataUnhashed).toBe(true);
    const doc = JSON.parse(renderDetailJson(resolved)) as { 'project-status': unknown; files: Record<string, unknown>[] };
    expect(doc['project-status']).toEqual({ status: 'quarantined' });
    expect(doc.files[0]).not.toHaveProperty('size');
    expect(doc.files[2]).toMatchObject({ yanked: true, 'core-metadata': true, 'gpg-sig': true });
  });
});

describe('upstream JSON pages', () => {
  it('keeps size, upload-time, provenance, extra hashes and versions without files', () => {
    const json = {
      meta: { 'api-version': '1.4' },
      name: 'demo-pkg',
      versions: ['0.5', '1.0'],
      'project-status': { status: 'deprecated', reason: 'use other' },
      files: [
        {
          filename: 'demo_pkg-1.0-py3-none-any.whl',
          url: 'https://files.example/x/demo_pkg-1.0-py3-none-any.whl',
          hashes: { sha256: A, md5: 'ABCD' },
          'requires-python': null,
          size: 1234,
          'upload-time': '2024-01-02T03:04:05.123456Z',
          yanked: 'oops',
          'core-metadata': { sha256: M },
          provenance: 'https://user:pw@up.example/integrity/demo/1.0/provenance?token=x',
        },
        { filename: '../evil.whl', url: 'evil.whl', hashes: { sha256: B } },
      ],
    };
    const page = parseUpstreamPage(Buffer.from(JSON.stringify(json)), 'application/vnd.pypi.simple.v1+json', PAGE);
    const { resolved } = toCachedProject(page, 'demo-pkg');
    expect(resolved.files).toHaveLength(1);
    const doc = JSON.parse(renderDetailJson(resolved)) as { versions: string[]; 'project-status': unknown; files: Record<string, unknown>[] };
    expect(doc.versions).toEqual(['0.5', '1.0']);
    expect(doc['project-status']).toEqual({ status: 'deprecated', reason: 'use other' });
    expect(doc.files[0]).toMatchObject({
      size: 1234,
      'upload-time': '2024-01-02T03:04:05.123456Z',
      yanked: 'oops',
      hashes: { sha256: A, md5: 'abcd' },
      'core-metadata': { sha256: M },
      provenance: 'https://up.example/integrity/demo/1.0/provenance',
    });
  });

  it('reads project lists in both formats as normalized names', () => {
    expect(parseUpstreamList(Buffer.from('{"projects":[{"name":"Foo_Bar"},{"name":"baz"},{"name":"foo-bar"}]}'), 'application/vnd.pypi.simple.v1+json')).toEqual([
      'baz',
      'foo-bar',
    ]);
    expect(parseUpstreamList(Buffer.from('<a href="x/">X.Y</a><a href="z/">z</a>'), 'text/html', 1)).toEqual(['x-y']);
  });
});

describe('virtual merge', () => {
  it('joins files by filename, first member wins, versions are the union', () => {
    const first = toCachedProject(
      parseUpstreamPage(Buffer.from(JSON.stringify({ name: 'P', files: [{ filename: 'p-1.0.tar.gz', url: 'a', hashes: { sha256: A } }] })), 'application/json', PAGE),
      'p',
    ).resolved;
    const second = toCachedProject(
      parseUpstreamPage(
        Buffer.from(
          JSON.stringify({
            name: 'p',
            files: [
              { filename: 'p-1.0.tar.gz', url: 'b', hashes: { sha256: B } },
              { filename: 'p-2.0.tar.gz', url: 'c', hashes: { sha256: B } },
            ],
          }),
        ),
        'application/json',
        PAGE,
      ),
      'p',
    ).resolved;
    const merged = mergeProjects('p', [first, second]);
    expect(merged.name).toBe('P');
    expect(merged.files.map((f) => `${f.filename}:${f.sha256[0]}`)).toEqual(['p-1.0.tar.gz:a', 'p-2.0.tar.gz:b']);
    expect(merged.releases.map((r) => r.version)).toEqual(['1.0', '2.0']);
  });
});
