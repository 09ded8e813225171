/** The pure parts of the events module: retry schedule, target matching, stored-target lookup, payload. */
import { describe, expect, it } from 'vitest';
import type { IndexConfig } from '../../registry/src/config/types.js';
import { GIVE_UP_AFTER_MS, retryDelayMs, shouldGiveUp } from '../../registry/src/events/backoff.js';
import { payloadBody } from '../../registry/src/events/payload.js';
import { matchingTargets, resolveTarget, urlHash } from '../../registry/src/events/targets.js';
import type { StoredDelivery, WriteEvent } from '../../registry/src/events/types.js';

function index(name: string, webhooks: IndexConfig['webhooks']): IndexConfig {
  return { name, route: `root/${name}`, routeSegments: ['root', name], ecosystem: 'python', role: 'hosted', volatile: false, policy: { denyProjects: [], allowProjects: [] }, webhooks };
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
