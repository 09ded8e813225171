/**
 * The archive walk cap and listings cache, without HTTP: how many walks actually run is only
 * visible here (the routes' suites show the same through the slot queue).
 */
import { describe, expect, it } from 'vitest';
import { ArchiveWalks } from '../../registry/src/archive/walks.js';
import { SlotsBusyError } from '../../registry/src/limits/slots.js';

/** Waits until `cond` holds; gives up after a generous while instead of hanging the suite. */
async function until(cond: () => boolean, what = 'the condition'): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 6000) throw new Error(`${what} never held`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A render that counts its runs and finishes when told to. */
function gatedRender(bytes = Buffer.from('{"members":[]}')) {
  let runs = 0;
  let open: () => void = () => undefined;
  const gate = new Promise<void>((r) => (open = r));
  return {
    render: async () => {
      runs++;
      await gate;
      return bytes;
    },
    runs: () => runs,
    open: () => open(),
  };
}

describe('ArchiveWalks', () => {
  it('runs one walk for twenty concurrent listings of one key, then answers from memory without a slot', async () => {
    const walks = new ArchiveWalks({ limit: 1 });
    const r = gatedRender();
    const all = Promise.all(Array.from({ length: 20 }, () => walks.listing('k', r.render)));
    await until(() => r.runs() === 1);
    expect(walks.waiters).toBe(20);
    expect(walks.slots.inflight).toBe(1);
    r.open();
    const bodies = await all;
    expect(new Set(bodies.map((b) => b.toString())).size).toBe(1);
    expect(r.runs()).toBe(1);
    expect(walks.slots.inflight).toBe(0);

    // Every slot held: a kept listing still answers, and its render is not called again.
    const held = await walks.slots.acquire();
    expect((await walks.listing('k', r.render)).toString()).toBe('{"members":[]}');
    expect(r.runs()).toBe(1);
    held();
  });

  it('keeps no failure: the next request walks again', async () => {
    const walks = new ArchiveWalks({ limit: 2 });
    let runs = 0;
    const failing = async () => {
      runs++;
      throw new Error('corrupt');
    };
    await expect(walks.listing('bad', failing)).rejects.toThrow('corrupt');
    await expect(walks.listing('bad', failing)).rejects.toThrow('corrupt');
    expect(runs).toBe(2);
  });

  it('queues walks beyond the limit in one place per key, and denies them past the wait window', async () => {
    const walks = new ArchiveWalks({ limit: 1, waitMs: 50 });
    const held = await walks.slots.acquire();
    const r = gatedRender();
    const waiting = Array.from({ length: 5 }, () => walks.listing('k', r.render).catch((e: unknown) => e));
    expect(walks.slots.waiting).toBe(1);
    const preview = walks.run(async () => 'page').catch((e: unknown) => e);
    expect(walks.slots.waiting).toBe(2);
    for (const denied of [...(await Promise.all(waiting)), await preview]) expect(denied).toBeInstanceOf(SlotsBusyError);
    expect(r.runs()).toBe(0);
    held();
  });

  it('a caller that leaves stops waiting; when every caller has left, the walk gives up its place in the queue', async () => {
    const walks = new ArchiveWalks({ limit: 1 });
    const held = await walks.slots.acquire();
    const r = gatedRender();
    const [a, b] = [new AbortController(), new AbortController()];
    const first = walks.listing('k', r.render, a.signal).catch((e: unknown) => e);
    const second = walks.listing('k', r.render, b.signal).catch((e: unknown) => e);
    expect(walks.slots.waiting).toBe(1);
    a.abort(new Error('gone'));
    expect(((await first) as Error).message).toBe('gone');
    expect(walks.slots.waiting).toBe(1); // the second caller is still there
    b.abort(new Error('gone too'));
    expect(((await second) as Error).message).toBe('gone too');
    expect(walks.slots.waiting).toBe(0);
    expect(walks.waiters).toBe(0);

    // A later caller starts afresh.
    const third = walks.listing('k', r.render);
    expect(walks.slots.waiting).toBe(1);
    held();
    r.open();
    expect((await third).toString()).toBe('{"members":[]}');
    expect(r.runs()).toBe(1);
  });

  it('bounds the kept listings by bytes: the least recently used is walked again', async () => {
    const walks = new ArchiveWalks({ limit: 2, cacheBytes: 100 });
    let runs = 0;
    const render = (size: number) => async () => (runs++, Buffer.alloc(size));
    await walks.listing('a', render(60));
    await walks.listing('b', render(60)); // a is evicted
    await walks.listing('b', render(60));
    expect(runs).toBe(2);
    await walks.listing('a', render(60));
    expect(runs).toBe(3);
  });
});
