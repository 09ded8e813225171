/**
 * The search keeper (search/keeper.ts) over a real fs MetaStore shared by two "processes" (two
 * keepers, each with its own SearchChanges): the background build, a write through one process
 * found by the other's refresh with only the changed names read again, the local write applied
 * without a refresh, and a whole-index rebuild once the change log has forgotten names
 * (`floor`: the process fell behind the change log's window).
 */
import { describe, expect, it } from 'vitest';
import type { IndexConfig } from '../../registry/src/config/types.js';
import { MAX_LOGGED, SearchChanges } from '../../registry/src/search/changes.js';
import type { SearchEntry } from '../../registry/src/search/entry.js';
import { SearchKeeper } from '../../registry/src/search/keeper.js';
import { parseSearchQuery } from '../../registry/src/search/query.js';
import type { SearchSource } from '../../registry/src/search/source.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/temp-dirs.js';

const index = { name: 'hosted', route: 'root/hosted', ecosystem: 'python', role: 'hosted' } as IndexConfig;
const quiet = { warn: () => undefined, info: () => undefined };

/** What the store holds, as the ecosystem would read it; counts the entry reads. */
class FakeSource implements SearchSource {
  readonly projects = new Map<string, string>();
  reads = 0;
  async keys(): Promise<string[]> {
    return [...this.projects.keys()];
  }
  async entry(ix: IndexConfig, key: string): Promise<SearchEntry | null> {
    this.reads += 1;
    const summary = this.projects.get(key);
    return summary === undefined ? null : { ecosystem: 'python', index: ix.name, name: key, key, summary };
  }
  serves(): boolean {
    return true;
  }
  browse(): Record<string, string> {
    return {};
  }
}

/** A source whose listing waits until `open()`: a build that takes its time. */
class GatedSource extends FakeSource {
  #open: () => void = () => undefined;
  readonly #gate = new Promise<void>((resolve) => (this.#open = resolve));
  open(): void {
    this.#open();
  }
  override async keys(): Promise<string[]> {
    await this.#gate;
    return super.keys();
  }
}

function keeperOn(meta: FsMetaStore, source: FakeSource): { keeper: SearchKeeper; changes: SearchChanges } {
  const changes = new SearchChanges(meta, quiet);
  // A long refresh period: the test calls `refresh()` itself.
  return { keeper: new SearchKeeper({ sources: [{ index, source }], changes, refreshSecs: 3600, log: quiet }), changes };
}

const find = (keeper: SearchKeeper, q: string) => keeper.search(parseSearchQuery(new URLSearchParams({ q })), () => true).hits.map((h) => `${h.entry.name}:${h.entry.summary}`).sort();

describe('SearchKeeper', () => {
  it('builds in the background, follows another process through the change log, and applies its own writes at once', async () => {
    const meta = new FsMetaStore(tempDir('velodex-keeper-'));
    await meta.init();
    const store = new FakeSource();
    store.projects.set('alpha', 'first words');
    store.projects.set('beta', 'other words');
    const one = keeperOn(meta, store);
    const two = keeperOn(meta, store);
    expect(one.keeper.complete).toBe(false);
    one.keeper.start();
    two.keeper.start();
    await Promise.all([one.keeper.ready(), two.keeper.ready()]);
    expect(one.keeper.complete).toBe(true);
    expect(find(two.keeper, 'words')).toEqual(['alpha:first words', 'beta:other words']);

    // A write through process one: its own index has it without a refresh.
    store.projects.set('alpha', 'changed text');
    await one.changes.record('hosted', ['alpha']);
    await new Promise((r) => setTimeout(r, 20));
    expect(find(one.keeper, 'changed')).toEqual(['alpha:changed text']);
    // Process two reads the change log and only the name that moved.
    expect(find(two.keeper, 'changed')).toEqual([]);
    store.reads = 0;
    await two.keeper.refresh();
    expect(store.reads).toBe(1);
    expect(find(two.keeper, 'changed')).toEqual(['alpha:changed text']);
    // A refresh with nothing new reads nothing.
    await two.keeper.refresh();
    expect(store.reads).toBe(1);

    // A delete: the entry is gone on both.
    store.projects.delete('beta');
    await one.changes.record('hosted', ['beta']);
    await two.keeper.refresh();
    await new Promise((r) => setTimeout(r, 20));
    expect(find(one.keeper, 'other')).toEqual([]);
    expect(find(two.keeper, 'other')).toEqual([]);
    await Promise.all([one.keeper.close(), two.keeper.close()]);
  });

  it("does not read its own writes again at the refresh, unless another process's change came just before", async () => {
    const meta = new FsMetaStore(tempDir('velodex-keeper-own-'));
    await meta.init();
    const store = new FakeSource();
    store.projects.set('alpha', 'first words');
    const one = keeperOn(meta, store);
    const two = keeperOn(meta, store);
    one.keeper.start();
    two.keeper.start();
    await Promise.all([one.keeper.ready(), two.keeper.ready()]);
    const settle = () => new Promise((r) => setTimeout(r, 20));

    // A write through process one, read again at once: its refresh finds its own append and reads nothing.
    store.projects.set('alpha', 'own write');
    await one.changes.record('hosted', ['alpha']);
    await settle();
    store.reads = 0;
    await one.keeper.refresh();
    expect(store.reads).toBe(0);
    expect(find(one.keeper, 'own')).toEqual(['alpha:own write']);
    // Process two still reads it.
    await two.keeper.refresh();
    expect(store.reads).toBe(1);
    expect(find(two.keeper, 'own')).toEqual(['alpha:own write']);

    // Process two changes the name, then process one does, before one refreshed: one's read at
    // its write may have come before two's, so its refresh reads the name again.
    store.projects.set('alpha', 'their write');
    await two.changes.record('hosted', ['alpha']);
    store.projects.set('alpha', 'mine again');
    await one.changes.record('hosted', ['alpha']);
    await settle();
    store.reads = 0;
    await one.keeper.refresh();
    expect(store.reads).toBe(1);

    // A name only another process changed is read as before.
    store.projects.set('beta', 'new words');
    await two.changes.record('hosted', ['beta']);
    await settle();
    store.reads = 0;
    await one.keeper.refresh();
    expect(store.reads).toBe(1);
    expect(find(one.keeper, 'new')).toEqual(['beta:new words']);
    await Promise.all([one.keeper.close(), two.keeper.close()]);
  });

  it('leaves an index the first build is reading to it: a refresh meanwhile reads no entry again', async () => {
    const meta = new FsMetaStore(tempDir('velodex-keeper-first-'));
    await meta.init();
    const store = new GatedSource();
    for (let i = 0; i < 50; i++) store.projects.set(`p${i}`, 'some words');
    const { keeper } = keeperOn(meta, store);
    keeper.start();
    // The refresh timer fires while the build still waits for the listing.
    const refreshed = keeper.refresh();
    store.open();
    await Promise.all([keeper.ready(), refreshed]);
    expect(keeper.complete).toBe(true);
    expect(store.reads).toBe(50);
    await keeper.refresh();
    expect(store.reads).toBe(50);
    await keeper.close();
  });

  it('reads the whole index again once the change log has forgotten names it had not seen (it fell behind the window)', async () => {
    const meta = new FsMetaStore(tempDir('velodex-keeper-floor-'));
    await meta.init();
    const store = new FakeSource();
    store.projects.set('gone', 'to be deleted');
    const one = keeperOn(meta, store);
    const two = keeperOn(meta, store);
    two.keeper.start();
    await two.keeper.ready();
    expect(find(two.keeper, 'deleted')).toEqual(['gone:to be deleted']);
    // More changes than the log keeps, the deletion first: it is forgotten by the end.
    store.projects.delete('gone');
    await one.changes.record('hosted', ['gone']);
    const names = Array.from({ length: MAX_LOGGED + 1 }, (_, i) => `p${i}`);
    for (const n of names) store.projects.set(n, 'bulk');
    await one.changes.record('hosted', names);
    const doc = await one.changes.read('hosted');
    expect(doc?.floor).toBeGreaterThan(0);
    expect(Object.keys(doc?.changed ?? {}).length).toBeLessThanOrEqual(MAX_LOGGED);
    await two.keeper.refresh();
    expect(find(two.keeper, 'deleted')).toEqual([]);
    expect(two.keeper.index.size).toBe(names.length);
    await two.keeper.close();
  });
});
