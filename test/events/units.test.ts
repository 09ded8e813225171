/** The pure parts of the events module: retry schedule, target matching, stored-target lookup, payload. */
import { describe, expect, it } from 'vitest';
import type { IndexConfig } from '../../registry/src/config/types.js';
import { GIVE_UP_AFTER_MS, retryDelayMs, shouldGiveUp } from '../../registry/src/events/backoff.js';
import { payloadBody } from '../../registry/src/events/payload.js';
import { matchingTargets, resolveTarget, urlHash } from '../../registry/src/events/targets.js';
import { Outbox } from '../../registry/src/events/outbox.js';
import type { StoredDelivery, WriteEvent } from '../../registry/src/events/types.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/velodex.js';

function index(name: string, webhooks: IndexConfig['webhooks']): IndexConfig {
  return { name, route: `root/${name}`, routeSegments: ['root', name], ecosystem: 'python', role: 'hosted', volatile: false, trustedPublishers: [], policy: { denyProjects: [], allowProjects: [] }, webhooks, tokens: [], serviceAccounts: [], private: false };
}

const byName = new Map([
  ['rel', index('rel', [{ url: 'http://a/uploads', events: ['upload'] }, { url: 'http://a/all' }])],
  ['dev', index('dev', [{ url: 'http://a/dev', events: ['yank'] }])],
]);
const event: WriteEvent = { event: 'upload', index: 'dev', route: 'root/dev', localIndex: 'rel', project: 'p', count: 1 };

describe('events units', () => {
  it('backs off 1 s, 2 s, 4 s ... capped at 5 minutes, and gives up after 24 hours', () => {
    expect([1, 2, 3, 4].map(retryDelayMs)).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect(retryDelayMs(9)).toBe(256_000);
    expect(retryDelayMs(10)).toBe(300_000);
    expect(retryDelayMs(500)).toBe(300_000);
    expect(shouldGiveUp(0, GIVE_UP_AFTER_MS - 1)).toBe(false);
    expect(shouldGiveUp(0, GIVE_UP_AFTER_MS)).toBe(true);
  });

  it("matches the route's targets and the changed index's, with each filter", () => {
    expect(matchingTargets(event, byName).map((t) => t.webhook.url)).toEqual(['http://a/uploads', 'http://a/all']);
    expect(matchingTargets({ ...event, event: 'yank' }, byName).map((t) => t.webhook.url)).toEqual(['http://a/dev', 'http://a/all']);
    expect(matchingTargets({ ...event, event: 'delete', index: 'rel' }, byName).map((t) => `${t.owner}:${t.position}`)).toEqual(['rel:1']);
  });

  it('finds a stored target again by URL when the list was reordered, and not when it is gone', () => {
    const d = { owner: 'rel', target: 0, urlHash: urlHash('http://a/all') } as StoredDelivery;
    expect(resolveTarget(d, byName)?.url).toBe('http://a/all');
    expect(resolveTarget({ ...d, urlHash: urlHash('http://gone/') }, byName)).toBeNull();
    expect(resolveTarget({ ...d, owner: 'nope' }, byName)).toBeNull();
  });

  it('writes optional payload fields only when present', () => {
    const body = JSON.parse(payloadBody(event, new Date(0))) as Record<string, unknown>;
    expect(body).toEqual({ event: 'upload', created_at: '1970-01-01T00:00:00.000Z', index: 'dev', route: 'root/dev', local_index: 'rel', project: 'p', count: 1 });
  });
});

describe('outbox leases', () => {
  const delivery = (id: string, at = 0): StoredDelivery => ({
    id,
    event: 'upload',
    owner: 'rel',
    target: 0,
    urlHash: 'h',
    body: '{}',
    createdAt: 0,
    attempts: 0,
    nextAttemptAt: at,
  });
  const outboxes = async () => {
    const meta = new FsMetaStore(tempDir('velodex-outbox-'));
    await meta.init();
    // Two outboxes over one store, as two processes.
    return { meta, one: new Outbox(meta), two: new Outbox(meta) };
  };

  it('of two claims at once exactly one wins; the other is told to look again when the lease ends', async () => {
    const { one, two } = await outboxes();
    await one.add(delivery('d1'));
    const [a, b] = await Promise.all([one.claim('d1', 'proc-a', 1_000, 30_000), two.claim('d1', 'proc-b', 1_000, 30_000)]);
    const kinds = [a.kind, b.kind].sort();
    expect(kinds).toEqual(['claimed', 'later']);
    const loser = a.kind === 'later' ? a : b;
    expect(loser.kind === 'later' && loser.at).toBeGreaterThan(1_000);
    // While the lease runs, a later claim by the other process waits for its end.
    const winner = a.kind === 'claimed' ? 'proc-a' : 'proc-b';
    const other = winner === 'proc-a' ? 'proc-b' : 'proc-a';
    expect(await two.claim('d1', other, 2_000, 30_000)).toEqual({ kind: 'later', at: 31_000 });
  });

  it('a lease that ran out is taken over, and the old holder finds out when it ends', async () => {
    const { meta, one, two } = await outboxes();
    await one.add(delivery('d2'));
    const first = await one.claim('d2', 'dead', 1_000, 30_000);
    expect(first.kind).toBe('claimed');
    const second = await two.claim('d2', 'alive', 31_001, 30_000);
    expect(second.kind).toBe('claimed');
    // The first holder's outcome no longer applies: the takeover changed the document.
    if (first.kind !== 'claimed' || second.kind !== 'claimed') throw new Error('unreachable');
    expect(await one.finish(first.claimed)).toBe(false);
    expect(await one.release(first.claimed, first.claimed.delivery)).toBe(false);
    expect((await meta.get<StoredDelivery>('events/outbox/d2'))?.doc.lease?.owner).toBe('alive');
    expect(await two.finish(second.claimed)).toBe(true);
    expect(await two.claim('d2', 'alive', 40_000, 30_000)).toEqual({ kind: 'gone' });
  });

  it("on a store no other process shares, an earlier run's lease is not waited for", async () => {
    const { one, two } = await outboxes();
    await one.add(delivery('d4'));
    expect((await one.claim('d4', 'killed-run', 1_000, 30_000)).kind).toBe('claimed');
    expect((await two.claim('d4', 'this-run', 2_000, 30_000, 'ignore')).kind).toBe('claimed');
  });

  it('a failure stores the retry time without a lease; a delivery not due yet is not claimed', async () => {
    const { meta, one, two } = await outboxes();
    await one.add(delivery('d3'));
    const c = await one.claim('d3', 'proc-a', 1_000, 30_000);
    if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
    expect(await one.release(c.claimed, { ...c.claimed.delivery, attempts: 1, nextAttemptAt: 5_000 })).toBe(true);
    const stored = (await meta.get<StoredDelivery>('events/outbox/d3'))!.doc;
    expect(stored.lease).toBeUndefined();
    expect(stored.attempts).toBe(1);
    expect(await two.claim('d3', 'proc-b', 2_000, 30_000)).toEqual({ kind: 'later', at: 5_000 });
    expect((await two.claim('d3', 'proc-b', 5_000, 30_000)).kind).toBe('claimed');
  });
});
