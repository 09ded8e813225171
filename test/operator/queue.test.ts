/** The operator's keyed work queue: one run per key at a time, bursts coalesced, the earliest timer wins, backoff on failure. */
import { describe, expect, it } from 'vitest';
import { KeyedQueue } from '../../operator/src/reconcile/queue.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await sleep(10);
}

describe('KeyedQueue', () => {
  it('runs a key once at a time; adds during a run give exactly one more run', async () => {
    const runs: string[] = [];
    let release: () => void = () => undefined;
    const q = new KeyedQueue(async (key) => {
      runs.push(key);
      if (runs.length === 1) await new Promise<void>((r) => (release = r));
    });
    q.add('ns');
    await sleep(10);
    for (let i = 0; i < 5; i++) q.add('ns');
    release();
    await q.idle();
    await sleep(10);
    expect(runs).toEqual(['ns', 'ns']);
    q.stop();
  });

  it('coalesces a burst within the grace period into one run, and an event is not held back by a later resync', async () => {
    let runs = 0;
    const q = new KeyedQueue(async () => void runs++);
    q.addAfter('ns', 60_000); // a resync a minute away
    for (let i = 0; i < 10; i++) q.addAfter('ns', 50);
    await until(() => runs > 0);
    await sleep(200);
    expect(runs).toBe(1);
    q.stop();
  });

  it('retries a failed run after a growing backoff, and reports each failure', async () => {
    const seen: number[] = [];
    let calls = 0;
    const q = new KeyedQueue(
      async () => {
        calls++;
        if (calls < 3) throw new Error('api down');
      },
      { baseDelayMs: 20, onError: (_k, _e, retryInMs) => seen.push(retryInMs) },
    );
    q.add('ns');
    await until(() => calls === 3);
    await sleep(100);
    expect(calls).toBe(3);
    expect(seen).toEqual([20, 40]);
    q.stop();
  });
});
