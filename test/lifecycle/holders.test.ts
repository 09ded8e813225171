/**
 * Which index a holder belongs to, and which holders' documents reference a digest: the markers'
 * `owns`/`indexOf` for Python (`python.<index>`, the legacy `python`) and OCI (`oci.<index>`,
 * `oci.<index>/<repo>`, the plain `oci`), `Marks.holdersOf`, and the Python mark on fs stores:
 * a digest a document of index B names is marked for `python.B` and for the legacy `python`, and
 * a file a cached index's stored page lists for that cached index.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { buildConfig } from '../../registry/src/config/load.js';
import { Marks, type MarkServices } from '../../registry/src/lifecycle/marks.js';
import { ociHoldsMarker } from '../../registry/src/oci/lifecycle/holds-marker.js';
import { pythonHoldsMarker } from '../../registry/src/python/lifecycle.js';
import { projectKey, pythonHolder } from '../../registry/src/python/model/records.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/velodex.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function services(): Promise<MarkServices> {
  const root = tempDir('velodex-holders-');
  const blobs = new FsBlobStore(root);
  const meta = new FsMetaStore(root);
  await blobs.init();
  await meta.init();
  const { indexes } = buildConfig(
    {
      index: [
        { name: 'a', route: 'root/a', hosted: true },
        { name: 'b', route: 'root/b', hosted: true },
        { name: 'img', route: 'team/img', hosted: true, ecosystem: 'oci' },
      ],
    },
    'test',
    { ecosystems, env: {} },
  );
  return { meta, blobs, indexes };
}

describe('holders per index', () => {
  it('Python: python.<index> belongs to <index>; the legacy python to none; both are owned', async () => {
    const marker = pythonHoldsMarker(await services());
    expect(pythonHolder('team.stable-1')).toBe('python.team.stable-1');
    expect(marker.indexOf('python.team.stable-1')).toBe('team.stable-1');
    expect(marker.indexOf('python.a')).toBe('a');
    expect(marker.indexOf('python')).toBeNull();
    expect(marker.owns('python')).toBe(true);
    // Not configured here, but its documents are marked all the same (every index in the store).
    expect(marker.owns('python.elsewhere')).toBe(true);
    for (const other of ['python.', 'pythonx', 'python.a/b', 'oci.a', 'oci']) {
      expect(marker.owns(other), other).toBe(false);
      expect(marker.indexOf(other), other).toBeNull();
    }
  });

  it('OCI: oci.<index> and oci.<index>/<repo> belong to <index>; the plain oci to none', async () => {
    const marker = ociHoldsMarker(await services());
    expect(marker.indexOf('oci.img')).toBe('img');
    expect(marker.indexOf('oci.img/team/app')).toBe('img');
    expect(marker.indexOf('oci.other.ix/app')).toBe('other.ix');
    expect(marker.indexOf('oci')).toBeNull();
    expect(marker.indexOf('oci.')).toBeNull();
    expect(marker.indexOf('python.a')).toBeNull();
    expect(marker.owns('oci.img/app')).toBe(true);
    expect(marker.owns('oci.other/app')).toBe(false);
  });

  it('Marks.holdersOf: every holder whose documents name a digest, none for an unnamed one', () => {
    const marks = new Marks();
    const one = sha('one');
    marks.add('python.a', one);
    marks.add('python', one);
    marks.add('python.a', one);
    marks.add('oci.img/app', sha('two'));
    marks.add('python.a', 'not a digest');
    expect([...marks.holdersOf(one)].sort()).toEqual(['python', 'python.a']);
    expect([...marks.holdersOf(sha('two'))]).toEqual(['oci.img/app']);
    expect(marks.holdersOf(sha('none')).size).toBe(0);
    expect(marks.has('python.a', one)).toBe(true);
    expect(marks.has('python.b', one)).toBe(false);
    expect(marks.size).toBe(2);
  });

  it('the Python mark names each digest for the index whose documents reference it, and for the legacy holder', async () => {
    const svc = await services();
    const shared = sha('promoted wheel');
    const onlyA = sha('a only');
    const file = (hex: string, name: string) => ({ filename: name, version: '1.0', kind: 'wheel', sha256: hex, size: 1, uploadTime: '2024-01-01T00:00:00Z' });
    await svc.meta.put(projectKey('a', 'lib'), { name: 'lib', files: { 'x.whl': file(shared, 'x.whl'), 'y.whl': file(onlyA, 'y.whl') } });
    // A promotion copies the record: B's document names the same bytes.
    await svc.meta.put(projectKey('b', 'lib'), { name: 'lib', files: { 'x.whl': file(shared, 'x.whl') } });
    const marks = new Marks();
    await pythonHoldsMarker(svc).mark(marks);
    expect([...marks.holdersOf(shared)].sort()).toEqual(['python', 'python.a', 'python.b']);
    expect([...marks.holdersOf(onlyA)].sort()).toEqual(['python', 'python.a']);
  });

  it('the Python mark names the files a cached page lists for its cached index', async () => {
    const svc = await services();
    const wheel = sha('cached wheel');
    const page = Buffer.from(`<html><body><a href="https://files.example/lib-1.0-py3-none-any.whl#sha256=${wheel}">lib-1.0-py3-none-any.whl</a></body></html>`);
    const pageHex = sha(page.toString());
    await svc.blobs.put(Readable.from([page]), pageHex);
    await svc.meta.put('python/mirror/cache/pages/lib', { fetchedAt: Date.now(), ttlSecs: 600, digest: pageHex, size: page.length, contentType: 'text/html' });
    const marks = new Marks();
    await pythonHoldsMarker(svc).mark(marks);
    expect([...marks.holdersOf(pageHex)].sort()).toEqual(['python', 'python.mirror']);
    expect([...marks.holdersOf(wheel)].sort()).toEqual(['python', 'python.mirror']);
  });
});
