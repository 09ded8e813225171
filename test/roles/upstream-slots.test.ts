/** The per-index upstream concurrency cap: FIFO waiting, 429 with Retry-After past the wait window. */
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerNeutral } from '../../registry/src/ecosystem/answers.js';
import { JSON_ANSWERS } from '../../registry/src/ecosystem/json-answers.js';
import { DEFAULT_SLOT_WAIT_MS, SlotWaitTimeoutError, UpstreamSlots } from '../../registry/src/limits/upstream-slots.js';
import { UpstreamClient } from '../../registry/src/roles/upstream.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { Origin } from './origin.js';

let origin: Origin;
let proxy: FaultProxy;

beforeAll(async () => {
  origin = await new Origin().start();
  origin.docs.set('/slow', { body: 'slow' });
  origin.docs.set('/doc', { body: 'doc' });
  proxy = await FaultProxy.start(origin.url);
});

afterAll(async () => {
  await proxy.close();
  await origin.close();
});

/** Lets queued promise callbacks run (no timers involved). */
const settle = () => new Promise((r) => setImmediate(r));

describe('UpstreamSlots', () => {
  it('waits 30 seconds by default, as the spec says, and has no cap unless configured', async () => {
    const free = new UpstreamSlots();
    expect(free.waitMs).toBe(DEFAULT_SLOT_WAIT_MS);
    expect(DEFAULT_SLOT_WAIT_MS).toBe(30_000);
    const releases = await Promise.all(Array.from({ length: 50 }, () => free.acquire()));
    expect(free.inflight).toBe(50);
    for (const r of releases) r();
    expect(free.inflight).toBe(0);
    expect(() => new UpstreamSlots({ limit: 0 })).toThrow(/positive integer/);
  });

  it('grants slots in FIFO order and forgets a waiter that gave up', async () => {
    const slots = new UpstreamSlots({ limit: 1, waitMs: 60_000 });
    const first = await slots.acquire();
    const order: string[] = [];
    const abort = new AbortController();
    const a = slots.acquire().then((r) => (order.push('a'), r));
    const gone = slots.acquire(abort.signal).catch(() => (order.push('gone'), undefined));
    const b = slots.acquire().then((r) => (order.push('b'), r));
    expect(slots.waiting).toBe(3);
    abort.abort();
    await gone;
    expect(slots.waiting).toBe(2);
    first();
    (await a)();
    (await b)();
    expect(order).toEqual(['gone', 'a', 'b']);
    expect(slots.inflight).toBe(0);
    expect(slots.denied).toBe(0);
  });

  it('with a cap of 1 and a stalled upstream, the next request waits and one beyond the wait window gets 429 with Retry-After', async () => {
    const slots = new UpstreamSlots({ limit: 1, waitMs: 1_000, retryAfterSecs: 7 });
    const client = new UpstreamClient({ baseUrl: proxy.url, slots });
    proxy.on('/slow', { kind: 'stall' }, 2);

    // 1: holds the only slot; the upstream does not answer.
    const first = client.get('/slow');
    await proxy.stalled(1);
    expect(slots.inflight).toBe(1);

    // 2: waits for the slot, and gets it once the first fetch is done.
    let secondDone = false;
    const second = client.get('/doc').then((r) => ((secondDone = true), r));
    await settle();
    expect(slots.waiting).toBe(1);
    expect(secondDone).toBe(false);
    proxy.release();
    expect(await text((await first).body)).toBe('slow');
    expect(await text((await second).body)).toBe('doc');

    // 3: the slot is held by another stalled fetch for longer than the wait window: 429.
    const third = client.get('/slow');
    await proxy.stalled(2);
    const denied = await client.get('/doc').catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(SlotWaitTimeoutError);
    expect((denied as SlotWaitTimeoutError).retryAfterSecs).toBe(7);
    expect(answerNeutral(JSON_ANSWERS, denied)).toMatchObject({ status: 429, headers: { 'Retry-After': '7' } });
    expect(slots.denied).toBe(1);
    expect(proxy.count('/doc')).toBe(1);

    proxy.release();
    expect(await text((await third).body)).toBe('slow');
    await settle();
    expect(slots.inflight).toBe(0);
    client.close();
  });
});
