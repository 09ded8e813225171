/**
 * The store-call counter the warm-read suites and the bench rely on: calls issued together share a
 * round trip, a call started after another finished is one later, and a reset starts over.
 */
import { describe, expect, it } from 'vitest';
import { StoreCallCounter } from '../../registry/src/storage/counted.js';

/** A store call that answers after `ms`. */
const call = (counter: StoreCallCounter, name: string, ms = 5) => counter.track(name, () => new Promise<string>((r) => setTimeout(() => r(name), ms)));

describe('StoreCallCounter', () => {
  it('counts calls issued together as one round trip, and calls one after another as more', async () => {
    const counter = new StoreCallCounter();
    await Promise.all([call(counter, 'meta.get'), call(counter, 'meta.get'), call(counter, 'blobs.stat')]);
    expect(counter.snapshot()).toEqual({ calls: { 'meta.get': 2, 'blobs.stat': 1 }, total: 3, rounds: 1 });
    await call(counter, 'blobs.get');
    expect(counter.snapshot().rounds).toBe(2);
    counter.reset();
    expect(counter.snapshot()).toEqual({ calls: {}, total: 0, rounds: 0 });
  });

  it('counts a call that waited for a finished one as a round later, even while another is still out', async () => {
    const counter = new StoreCallCounter();
    const slow = call(counter, 'meta.get', 40);
    await call(counter, 'meta.get', 1);
    // Started after the quick one finished (it may depend on it), while the slow one is in flight.
    await call(counter, 'meta.get', 1);
    await slow;
    expect(counter.snapshot().rounds).toBe(2);
  });

  it('passes answers and failures through', async () => {
    const counter = new StoreCallCounter();
    expect(await call(counter, 'x')).toBe('x');
    await expect(counter.track('y', () => Promise.reject(new Error('store down')))).rejects.toThrow('store down');
    await expect(
      counter.track('z', () => {
        throw new Error('thrown before a promise');
      }),
    ).rejects.toThrow('thrown before a promise');
    expect(counter.snapshot().total).toBe(3);
  });
});
