/**
 * The scratch budget (registry/src/storage/scratch-budget.ts) on its own, and through the fs
 * backend's stages: declared lengths refused at once above the limit, waiting (then refused for
 * now) above what is free, bytes without a declared length cut as they pass it, and every claim
 * given back on every path. The property: whatever claims do, in any order, the budget never holds
 * more than its limit, and holds exactly what its claims hold.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { ScratchBudget, ScratchBusyError, ScratchTooLargeError, type ScratchClaim } from '../../registry/src/storage/scratch-budget.js';
import type { BlobStage } from '../../registry/src/storage/types.js';
import { tempDir } from '../support/temp-dirs.js';
import { toml } from '../support/config.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { scratchBudgetOf } from '../../registry/src/storage/index.js';

const KiB = 1024;

function bytes(n: number): Buffer {
  return Buffer.alloc(n, 7);
}

/** A body of `n` bytes in chunks of `chunk` bytes. */
function body(n: number, chunk = 4 * KiB): Readable {
  const parts: Buffer[] = [];
  for (let left = n; left > 0; left -= chunk) parts.push(bytes(Math.min(chunk, left)));
  return Readable.from(parts);
}

describe('ScratchBudget', () => {
  it('refuses a declared length above the whole limit at once, and one above what is free after its wait', async () => {
    const budget = new ScratchBudget({ limitBytes: 100, waitMs: 50, retryAfterSecs: 3 });
    const first = budget.claim();
    await first.reserve(70);
    await expect(budget.claim().reserve(101)).rejects.toBeInstanceOf(ScratchTooLargeError);
    const started = Date.now();
    const busy = await budget.claim().reserve(40).catch((err: unknown) => err);
    expect(busy).toBeInstanceOf(ScratchBusyError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(40);
    expect((busy as ScratchBusyError).retryAfterSecs).toBe(3);
    expect((busy as Error).message).toMatch(/40 B needed, 30 B of 100 B free; retry in 3 s/);
    expect(budget.used).toBe(70);
    first.release();
    expect(budget.used).toBe(0);
  });

  it('grants a waiting declared length as soon as another write gives its bytes back, in arrival order', async () => {
    const budget = new ScratchBudget({ limitBytes: 100, waitMs: 60_000 });
    const holder = budget.claim();
    await holder.reserve(80);
    const order: string[] = [];
    const a = budget.claim();
    const b = budget.claim();
    const waitingA = a.reserve(50).then(() => order.push('a'));
    const waitingB = b.reserve(40).then(() => order.push('b'));
    expect(budget.waiting).toBe(2);
    holder.release();
    await Promise.all([waitingA, waitingB]);
    expect(order).toEqual(['a', 'b']);
    expect(budget.used).toBe(90);
    a.release();
    b.release();
    expect(budget.used).toBe(0);
  });

  it('covers bytes without a declared length as they land, without waiting', () => {
    const budget = new ScratchBudget({ limitBytes: 100 });
    const other = budget.claim();
    other.cover(60);
    const claim = budget.claim();
    claim.cover(30);
    expect(() => claim.cover(41)).toThrow(ScratchBusyError);
    expect(() => claim.cover(101)).toThrow(ScratchTooLargeError);
    expect(claim.held).toBe(30);
    claim.shrink(10);
    expect(budget.used).toBe(70);
  });

  it('never holds more than its limit, and holds what its claims hold, whatever they do', async () => {
    const step = fc.oneof(
      fc.record({ op: fc.constant('cover' as const), claim: fc.nat(3), total: fc.nat(150) }),
      fc.record({ op: fc.constant('reserve' as const), claim: fc.nat(3), total: fc.nat(150) }),
      fc.record({ op: fc.constant('shrink' as const), claim: fc.nat(3), total: fc.nat(150) }),
      fc.record({ op: fc.constant('release' as const), claim: fc.nat(3), total: fc.constant(0) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
        const budget = new ScratchBudget({ limitBytes: 100, waitMs: 1 });
        const claims: ScratchClaim[] = [0, 1, 2, 3].map(() => budget.claim());
        const pending: Promise<unknown>[] = [];
        for (const { op, claim, total } of steps) {
          const c = claims[claim]!;
          if (op === 'cover') {
            try {
              c.cover(total);
            } catch (err) {
              expect(err instanceof ScratchBusyError || err instanceof ScratchTooLargeError).toBe(true);
            }
          } else if (op === 'reserve') {
            // One reservation per claim at a time, as one append at a time per stage.
            pending.push(c.reserve(total).catch(() => undefined));
            await Promise.all(pending.splice(0));
          } else if (op === 'shrink') {
            c.shrink(total);
          } else {
            c.release();
          }
          expect(budget.used).toBeLessThanOrEqual(100);
          expect(budget.used).toBe(claims.reduce((n, x) => n + x.held, 0));
        }
        for (const c of claims) c.release();
        expect(budget.used).toBe(0);
      }),
      { numRuns: 300 },
    );
  });
});

describe('the scratch budget of a server', () => {
  it('gives each worker process an equal share of [storage] scratch_limit, so together they never pass it', () => {
    const cfg = parseConfigText(toml({ storage: { scratch_limit: '10GiB', scratch_wait_secs: 3 } }), 't', { ecosystems, env: {} }).storage;
    expect(cfg.scratchLimitBytes).toBe(10 * 1024 ** 3);
    expect(scratchBudgetOf(cfg).limitBytes).toBe(10 * 1024 ** 3);
    expect(scratchBudgetOf(cfg).waitMs).toBe(3000);
    for (const workers of [2, 3, 7]) expect(scratchBudgetOf(cfg, workers).limitBytes! * workers).toBeLessThanOrEqual(10 * 1024 ** 3);
    expect(scratchBudgetOf(cfg, 4).limitBytes).toBe(2.5 * 1024 ** 3);
    // No key: no limit, today's behaviour.
    expect(scratchBudgetOf(parseConfigText(toml({}), 't', { ecosystems, env: {} }).storage).limitBytes).toBeUndefined();
  });

  it('refuses a scratch_limit that is not a size', () => {
    expect(() => parseConfigText(toml({ storage: { scratch_limit: 'lots' } }), 't', { ecosystems, env: {} })).toThrow(/scratch_limit/);
    expect(() => parseConfigText(toml({ storage: { scratch_limit: 0 } }), 't', { ecosystems, env: {} })).toThrow(/scratch_limit/);
  });
});

describe('stages of the fs backend on a scratch budget', () => {
  async function store(limitBytes: number, waitMs = 50) {
    const root = tempDir('velodex-scratch-');
    const budget = new ScratchBudget({ limitBytes, waitMs });
    const blobs = new FsBlobStore(root, { scratch: budget });
    await blobs.init();
    const staged = async () => (await readdir(join(root, 'staging'))).length;
    return { blobs, budget, staged };
  }

  it('refuses a stage whose declared length is above the limit before anything is written', async () => {
    const { blobs, budget, staged } = await store(64 * KiB);
    await expect(blobs.stage({ declared: 64 * KiB + 1 })).rejects.toBeInstanceOf(ScratchTooLargeError);
    expect(await staged()).toBe(0);
    expect(budget.used).toBe(0);
  });

  it('cuts an append without a declared length once it passes the limit, undoes it and leaves nothing staged after abort', async () => {
    const { blobs, budget, staged } = await store(64 * KiB);
    const stage = await blobs.stage();
    await stage.append(body(16 * KiB));
    await expect(stage.append(body(100 * KiB))).rejects.toBeInstanceOf(ScratchTooLargeError);
    // Undone like any failed append: the bytes before it are intact, and only they are held.
    expect(stage.size).toBe(16 * KiB);
    expect(budget.used).toBe(16 * KiB);
    await stage.abort();
    expect(budget.used).toBe(0);
    expect(await staged()).toBe(0);
  });

  it('gives back a declared length larger than what came, and everything after commit and abort', async () => {
    const { blobs, budget } = await store(64 * KiB);
    const stage = await blobs.stage({ declared: 40 * KiB });
    expect(budget.used).toBe(40 * KiB);
    await stage.append(body(10 * KiB));
    expect(budget.used).toBe(10 * KiB);
    const info = await stage.commit();
    await stage.abort();
    expect(budget.used).toBe(0);
    expect((await blobs.stat(info.digest))?.size).toBe(10 * KiB);
  });

  it('lets a second declared write wait for the first, then refuses it for now when the first holds on', async () => {
    const { blobs, budget } = await store(64 * KiB, 100);
    const first = await blobs.stage({ declared: 40 * KiB });
    await expect(blobs.stage({ declared: 40 * KiB })).rejects.toBeInstanceOf(ScratchBusyError);
    const second = blobs.stage({ declared: 40 * KiB });
    await first.abort();
    const stage = await second;
    expect(budget.used).toBe(40 * KiB);
    await stage.abort();
    expect(budget.used).toBe(0);
  });

  it('holds exactly what the open stages have written, whatever stages do, and nothing once they end', async () => {
    const LIMIT = 64 * KiB;
    const op = fc.oneof(
      fc.record({ op: fc.constant('open' as const), declared: fc.option(fc.nat(80 * KiB), { nil: undefined }) }),
      fc.record({ op: fc.constant('append' as const), stage: fc.nat(3), bytes: fc.nat(40 * KiB), declare: fc.boolean() }),
      fc.record({ op: fc.constant('commit' as const), stage: fc.nat(3) }),
      fc.record({ op: fc.constant('abort' as const), stage: fc.nat(3) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 12 }), async (ops) => {
        const { blobs, budget, staged } = await store(LIMIT, 1);
        const open: BlobStage[] = [];
        // A stage's declared length is held from its start until its first append ends, then only its bytes.
        const declared = new Map<BlobStage, number>();
        for (const step of ops) {
          try {
            if (step.op === 'open') {
              const stage = await blobs.stage(step.declared === undefined ? {} : { declared: step.declared });
              open.push(stage);
              if (step.declared !== undefined) declared.set(stage, step.declared);
            } else if (open.length > 0) {
              const stage = open[step.stage % open.length]!;
              declared.delete(stage);
              if (step.op === 'append') await stage.append(body(step.bytes), step.declare ? { declared: step.bytes } : {});
              else if (step.op === 'commit') {
                await stage.commit();
                await stage.abort();
                open.splice(open.indexOf(stage), 1);
              } else {
                await stage.abort();
                open.splice(open.indexOf(stage), 1);
              }
            }
          } catch (err) {
            expect(err instanceof ScratchBusyError || err instanceof ScratchTooLargeError, String(err)).toBe(true);
          }
          expect(budget.used).toBeLessThanOrEqual(LIMIT);
          expect(budget.used).toBe(open.reduce((n, s) => n + s.size + (declared.get(s) ?? 0), 0));
        }
        for (const stage of open) await stage.abort();
        expect(budget.used).toBe(0);
        expect(await staged()).toBe(0);
      }),
      { numRuns: 40 },
    );
  });
});
