/**
 * The override document that cached files get (yank, un-yank, hide, restore) and its
 * application to a resolved project, against a real fs MetaStore.
 */
import { describe, expect, it } from 'vitest';
import {
  applyAction,
  applyOverrides,
  overridesKey,
  ProjectOverrides,
  withOverridesVersion,
} from '../../registry/src/python/model/overrides.js';
import { assembleProject, projectVersions, type ResolvedFile } from '../../registry/src/python/model/resolved.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/velodex.js';

function file(filename: string, version: string, yanked: string | false = false): ResolvedFile {
  return {
    filename,
    version,
    kind: filename.endsWith('.whl') ? 'wheel' : 'sdist',
    sha256: 'a'.repeat(64),
    size: 10,
    requiresPython: null,
    uploadTime: '2024-01-01T00:00:00.000000Z',
    yanked,
    metadataSha256: null,
  };
}

const W1 = file('up-1.0-py3-none-any.whl', '1.0');
const S1 = file('up-1.0.tar.gz', '1.0');
const W2 = file('up-2.0-py3-none-any.whl', '2.0', 'upstream says no');
const project = () => assembleProject('Up', 'up', [W1, S1, W2]);

describe('applyAction', () => {
  it('yanks visible files once, and counts only real changes', () => {
    const first = applyAction(undefined, [W1, S1, W2], 'yank', 'bad');
    expect(first.changed).toEqual([W1.filename, S1.filename]);
    expect(first.doc.files).toEqual({ [W1.filename]: { yanked: 'bad' }, [S1.filename]: { yanked: 'bad' } });
    expect(applyAction(first.doc, [W1, S1, W2], 'yank', 'again').changed).toEqual([]);
  });

  it('un-yank drops our own yank, and overrides an upstream one explicitly', () => {
    const yanked = applyAction(undefined, [W1], 'yank', '').doc;
    const back = applyAction(yanked, [W1, S1, W2], 'unyank', '');
    expect(back.changed).toEqual([W1.filename, W2.filename]);
    expect(back.doc.files).toEqual({ [W2.filename]: { yanked: false } });
  });

  it('hides and restores; hidden files take no yank', () => {
    const hidden = applyAction(undefined, [W1, S1], 'delete', '');
    expect(hidden.changed).toEqual([W1.filename, S1.filename]);
    expect(applyAction(hidden.doc, [W1], 'yank', 'x').changed).toEqual([]);
    expect(applyAction(hidden.doc, [W1], 'delete', '').changed).toEqual([]);
    const restored = applyAction(hidden.doc, [W1, S1, W2], 'restore', '');
    expect(restored.changed).toEqual([W1.filename, S1.filename]);
    expect(restored.doc.files).toEqual({});
  });
});

describe('applyOverrides', () => {
  it('hides files, drops emptied releases from versions, and overrides yank state', () => {
    const doc = { files: { [W1.filename]: { hidden: true }, [S1.filename]: { hidden: true }, [W2.filename]: { yanked: false as const } } };
    const out = applyOverrides(project(), doc);
    expect(out.files.map((f) => f.filename)).toEqual([W2.filename]);
    expect(projectVersions(out)).toEqual(['2.0']);
    expect(out.releases[0]?.yanked).toBe(false);
    expect(out.files[0]?.yanked).toBe(false);
  });

  it('leaves the project alone without overrides', () => {
    const p = project();
    expect(applyOverrides(p, null)).toBe(p);
    expect(applyOverrides(p, { files: {} })).toBe(p);
  });
});

describe('ProjectOverrides', () => {
  it('stores one document per index and project, with a version for page caches', async () => {
    const meta = new FsMetaStore(tempDir('velodex-overrides-'));
    await meta.init();
    const store = new ProjectOverrides(meta);
    expect(await store.get('dev', 'up')).toBeNull();
    expect(await store.change('dev', 'up', [W1, S1], 'delete')).toEqual([W1.filename, S1.filename]);
    const loaded = await store.get('dev', 'up');
    expect(loaded?.doc.files[W1.filename]).toEqual({ hidden: true });
    expect(await meta.get(overridesKey('dev', 'up'))).not.toBeNull();
    // Nothing to change: no write, same version.
    expect(await store.change('dev', 'up', [W1], 'delete')).toEqual([]);
    expect((await store.get('dev', 'up'))?.version).toBe(loaded?.version);
    expect(withOverridesVersion('r1', loaded)).toBe(`r1+${loaded?.version}`);
    expect(withOverridesVersion('r1', null)).toBe('r1');

    // Concurrent changes to different files all land (compare-and-swap with retries).
    await Promise.all([store.change('dev', 'up', [W2], 'unyank'), store.change('dev', 'up', [W1, S1], 'restore')]);
    expect((await store.get('dev', 'up'))?.doc.files).toEqual({ [W2.filename]: { yanked: false } });
  });
});
