/**
 * NameSet (storage/name-set.ts): the one-document set of names that spares request paths a
 * listing. Built once from the owner's recount when absent, kept by add and remove, and a removal
 * racing with a writer that brings the name back leaves the name in.
 */
import { describe, expect, it } from 'vitest';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { NameSet } from '../../registry/src/storage/name-set.js';
import { tempDir } from '../support/velodex.js';

async function store(): Promise<FsMetaStore> {
  const meta = new FsMetaStore(tempDir('velodex-name-set-'));
  await meta.init();
  return meta;
}

describe('NameSet', () => {
  it('is built once from the recount when absent, then read from its document', async () => {
    const meta = await store();
    let recounts = 0;
    const set = new NameSet(meta, 'idx/names', async () => {
      recounts++;
      return ['b', 'a', 'b'];
    });
    const first = await set.read();
    expect(first.names).toEqual(['a', 'b']);
    expect(await set.read()).toEqual(first);
    expect(recounts).toBe(1);
    expect((await meta.get<{ names: string[] }>('idx/names'))?.doc).toEqual({ names: ['a', 'b'] });
  });

  it('adds without a write when present, removes only what is gone, and changes its version with its names', async () => {
    const meta = await store();
    const set = new NameSet(meta, 'idx/names', async () => []);
    await set.add('zeta');
    await set.add('alpha');
    const v1 = await set.read();
    expect(v1.names).toEqual(['alpha', 'zeta']);
    await set.add('alpha');
    expect((await set.read()).version).toBe(v1.version);
    await set.remove('zeta', async () => true);
    expect((await set.read()).names).toEqual(['alpha', 'zeta']);
    await set.remove('zeta', async () => false);
    const v2 = await set.read();
    expect(v2.names).toEqual(['alpha']);
    expect(v2.version).not.toBe(v1.version);
  });

  it('an add on an absent document starts from the recount, so nothing stored earlier is lost', async () => {
    const meta = await store();
    const set = new NameSet(meta, 'idx/names', async () => ['old-one', 'old-two']);
    await set.add('new');
    expect((await set.read()).names).toEqual(['new', 'old-one', 'old-two']);
  });

  it('puts the name back when it came back while the removal ran', async () => {
    const meta = await store();
    const set = new NameSet(meta, 'idx/names', async () => []);
    await set.add('p');
    // The writer's document commits after the removal's check inside its compare-and-swap, and
    // its add saw the name still listed: only the check after the write can catch it.
    const answers = [false, true];
    await set.remove('p', async () => answers.shift()!);
    expect((await set.read()).names).toEqual(['p']);
  });
});
