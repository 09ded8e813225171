/**
 * The collector's pacer (lifecycle/pace.ts) on a CPU clock the test moves: no pause before a
 * slice of CPU is used, then a pause that makes the CPU used `share` of the time passed, one pause
 * for every worker waiting at once, and none at all with a whole core.
 */
import { describe, expect, it } from 'vitest';
import { Pacer } from '../../registry/src/lifecycle/pace.js';

describe('the pacer', () => {
  it('pauses so that the CPU used is its share of the time', async () => {
    let cpu = 0;
    const pacer = new Pacer(0.25, () => cpu);
    cpu = 10;
    let t = performance.now();
    await pacer.step();
    expect(performance.now() - t).toBeLessThan(15);
    cpu = 40; // 40 ms of CPU at a quarter of a core: 120 ms of pause
    t = performance.now();
    await Promise.all([pacer.step(), pacer.step(), pacer.step()]);
    const paused = performance.now() - t;
    expect(paused).toBeGreaterThanOrEqual(115);
    expect(paused).toBeLessThan(400);
    // The slice starts again after the pause.
    t = performance.now();
    await pacer.step();
    expect(performance.now() - t).toBeLessThan(15);
  });

  it('never pauses with a whole core', async () => {
    let cpu = 0;
    const pacer = new Pacer(1, () => cpu);
    cpu = 10_000;
    const t = performance.now();
    await pacer.step();
    expect(performance.now() - t).toBeLessThan(15);
  });
});
