/**
 * The periodic sweep of stale staged writes (`storage/sweeper.ts`): one pass at start-up, then
 * one per period; a failed pass (store down) is reported and the next one runs anyway; a pass
 * still running when the next is due is not doubled; stopping ends it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { startSweeper } from '../../registry/src/storage/sweeper.js';

async function until(test: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !test(); i++) await sleep(10);
  expect(test()).toBe(true);
}

describe('startSweeper', () => {
  it('sweeps at once, then every period, and reports what each pass removed', async () => {
    let calls = 0;
    const swept: number[] = [];
    const stop = startSweeper({ sweep: async () => ++calls }, { onSwept: (n) => swept.push(n), onError: () => undefined }, 20);
    expect(calls).toBe(1);
    await until(() => swept.length >= 3);
    stop();
    const after = calls;
    await sleep(80);
    expect(calls).toBe(after);
    expect(swept.slice(0, 3)).toEqual([1, 2, 3]);
  });

  it('reports a failed pass and tries again at the next one', async () => {
    let calls = 0;
    const errors: unknown[] = [];
    const swept: number[] = [];
    const stop = startSweeper(
      {
        sweep: async () => {
          calls++;
          if (calls === 1) throw new Error('store down');
          return 0;
        },
      },
      { onSwept: (n) => swept.push(n), onError: (err) => errors.push(err) },
      20,
    );
    await until(() => swept.length >= 1);
    stop();
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/store down/);
  });

  it('skips a turn while a pass is still running', async () => {
    let running = 0;
    let most = 0;
    let calls = 0;
    const stop = startSweeper(
      {
        sweep: async () => {
          calls++;
          running++;
          most = Math.max(most, running);
          await sleep(70);
          running--;
          return 0;
        },
      },
      { onSwept: () => undefined, onError: () => undefined },
      10,
    );
    await until(() => calls >= 3);
    stop();
    expect(most).toBe(1);
  });
});
