/** The general FIFO semaphore behind the upstream and archive-walk caps. */
import { describe, expect, it } from 'vitest';
import { answerNeutral } from '../../registry/src/ecosystem/answers.js';
import { JSON_ANSWERS } from '../../registry/src/ecosystem/json-answers.js';
import { OCI_ANSWERS } from '../../registry/src/oci/handlers/answers.js';
import { DEFAULT_SLOT_WAIT_MS, Slots, SlotsBusyError } from '../../registry/src/limits/slots.js';

/** Lets queued promise callbacks run (no timers involved). */
const settle = () => new Promise((r) => setImmediate(r));

describe('Slots', () => {
  it('admits up to the limit at once and refuses a limit that is not a positive integer', async () => {
    const slots = new Slots({ limit: 2 });
    expect(slots.waitMs).toBe(DEFAULT_SLOT_WAIT_MS);
    const a = await slots.acquire();
    const b = await slots.acquire();
    expect(slots.inflight).toBe(2);
    let third = false;
    const c = slots.acquire().then((r) => ((third = true), r));
    await settle();
    expect(third).toBe(false);
    expect(slots.waiting).toBe(1);
    a();
    a(); // a second release is a no-op, not a second free slot
    (await c)();
    b();
    expect(slots.inflight).toBe(0);
    expect(() => new Slots({ limit: 1.5, what: 'the walk limit' })).toThrow(/the walk limit must be a positive integer/);
    expect(() => new Slots({ limit: 0 })).toThrow(/positive integer/);
  });

  it('grants in FIFO order; a waiter whose signal fires leaves the queue', async () => {
    const slots = new Slots({ limit: 1 });
    const first = await slots.acquire();
    const order: string[] = [];
    const abort = new AbortController();
    const a = slots.acquire().then((r) => (order.push('a'), r));
    const gone = slots.acquire(abort.signal).catch((e: unknown) => (order.push('gone'), e));
    const b = slots.acquire().then((r) => (order.push('b'), r));
    abort.abort(new Error('client left'));
    expect(((await gone) as Error).message).toBe('client left');
    expect(slots.waiting).toBe(2);
    first();
    (await a)();
    (await b)();
    expect(order).toEqual(['gone', 'a', 'b']);
    await expect(slots.acquire(AbortSignal.abort())).rejects.toThrow();
    expect(slots.inflight).toBe(0);
  });

  it('denies a wait past the window with a 429 carrying Retry-After and the caller\'s busy message', async () => {
    const slots = new Slots({ limit: 1, waitMs: 50, retryAfterSecs: 3, busy: 'the server is busy: no walk slot freed in time' });
    const held = await slots.acquire();
    const denied = await slots.acquire().catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(SlotsBusyError);
    expect((denied as SlotsBusyError).retryAfterSecs).toBe(3);
    // Neutral: the limit says "busy"; each ecosystem turns that into its own 429.
    expect(answerNeutral(JSON_ANSWERS, denied)).toMatchObject({ status: 429, headers: { 'Retry-After': '3' } });
    expect(answerNeutral(OCI_ANSWERS, denied)).toMatchObject({ status: 429, code: 'TOOMANYREQUESTS', headers: { 'Retry-After': '3' } });
    expect((denied as Error).message).toBe('the server is busy: no walk slot freed in time; retry in 3 s');
    expect(slots.denied).toBe(1);
    expect(slots.waiting).toBe(0);
    held();
  });

  it('run releases the slot when the work fails; without a limit nothing waits', async () => {
    const slots = new Slots({ limit: 1 });
    await expect(slots.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(slots.inflight).toBe(0);
    expect(await slots.run(async () => 7)).toBe(7);
    const free = new Slots();
    const releases = await Promise.all(Array.from({ length: 20 }, () => free.acquire()));
    expect(free.inflight).toBe(20);
    for (const r of releases) r();
    expect(free.inflight).toBe(0);
  });
});
