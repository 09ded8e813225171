/**
 * The primary's table of upstream fetches in flight (registry/src/workers/flight-table.ts): the
 * first worker to join a key leads, later ones follow and first get what they missed; only the
 * leader's events go anywhere; an end frees the key; a leader that exits ends its flights for
 * its followers with an error. A property test drives random schedules against a model.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LEADER_STOPPED, type PeerEvent } from '../../registry/src/roles/flight-peers.js';
import { FlightTable } from '../../registry/src/workers/flight-table.js';

const head: PeerEvent = { type: 'head', head: { meta: null, size: 10, path: '/data/staging/stage-x' } };

describe('FlightTable', () => {
  it('the first joiner leads; a late follower catches up with the head and the latest progress', () => {
    const t = new FlightTable();
    const lead = t.join('k', 1);
    expect(lead).toEqual({ flight: lead.flight, lead: true, catchUp: [] });
    expect(t.fromLeader(1, lead.flight, head)).toEqual({ to: [], flight: lead.flight, event: head });
    t.fromLeader(1, lead.flight, { type: 'progress', written: 3 });
    t.fromLeader(1, lead.flight, { type: 'progress', written: 7 });
    const follow = t.join('k', 2);
    expect(follow).toEqual({ flight: lead.flight, lead: false, catchUp: [head, { type: 'progress', written: 7 }] });
    expect(t.fromLeader(1, lead.flight, { type: 'progress', written: 10, verified: true })?.to).toEqual([2]);
    // Another key is another flight.
    expect(t.join('other', 2).lead).toBe(true);
  });

  it('tells a new leader whether a flight of the key ended since its lookup began', () => {
    const t = new FlightTable();
    const lookedAt = Date.now();
    const first = t.join('k', 1, lookedAt);
    expect(first.endedSince).toBeUndefined();
    t.fromLeader(1, first.flight, { type: 'end', end: { kind: 'published', info: { digest: 'd', size: 10 } } });
    // Another worker looked before that flight ended: it may have missed the bytes.
    expect(t.join('k', 2, lookedAt)).toMatchObject({ lead: true, endedSince: true });
    // A key no flight ended for, and a join that says nothing of its lookup.
    expect(t.join('other', 2, lookedAt).endedSince).toBeUndefined();
    expect(t.join('third', 1).endedSince).toBeUndefined();
  });

  it('ignores events from a worker that does not lead the flight', () => {
    const t = new FlightTable();
    const lead = t.join('k', 1);
    t.join('k', 2);
    expect(t.fromLeader(2, lead.flight, head)).toBeUndefined();
    expect(t.fromLeader(1, 999, head)).toBeUndefined();
  });

  it('an end goes to the followers and frees the key: the next joiner leads a new flight', () => {
    const t = new FlightTable();
    const lead = t.join('k', 1);
    t.join('k', 2);
    const end: PeerEvent = { type: 'end', end: { kind: 'published', info: { digest: 'a'.repeat(64), size: 10 } } };
    expect(t.fromLeader(1, lead.flight, end)).toEqual({ to: [2], flight: lead.flight, event: end });
    expect(t.size).toBe(0);
    const next = t.join('k', 2);
    expect(next.lead).toBe(true);
    expect(next.flight).not.toBe(lead.flight);
  });

  it('a leader that exits ends its flights for their followers with an error; a follower that exits is dropped', () => {
    const t = new FlightTable();
    const a = t.join('a', 1);
    t.join('a', 2);
    t.join('a', 3);
    const b = t.join('b', 2);
    t.join('b', 1);
    expect(t.dropWorker(1)).toEqual([{ to: [2, 3], flight: a.flight, event: { type: 'end', end: { kind: 'upstream_error', message: LEADER_STOPPED } } }]);
    expect(t.size).toBe(1);
    // Worker 1 no longer follows b.
    expect(t.fromLeader(2, b.flight, head)?.to).toEqual([]);
  });

  it('random joins, events, ends and exits: every follower hears the end of what it follows, from its leader only', () => {
    type Step = { op: 'join'; key: number; worker: number } | { op: 'end'; key: number } | { op: 'exit'; worker: number };
    const step = fc.oneof(
      fc.record({ op: fc.constant('join' as const), key: fc.integer({ min: 0, max: 2 }), worker: fc.integer({ min: 1, max: 4 }) }),
      fc.record({ op: fc.constant('end' as const), key: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ op: fc.constant('exit' as const), worker: fc.integer({ min: 1, max: 4 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps: Step[]) => {
        const t = new FlightTable();
        // The model: per key, the running flight's id, leader and followers.
        const model = new Map<number, { flight: number; leader: number; followers: Set<number> }>();
        for (const s of steps) {
          if (s.op === 'join') {
            const running = model.get(s.key);
            // A worker joins a key only while it has no flight of it (its own map dedups).
            if (running && (running.leader === s.worker || running.followers.has(s.worker))) continue;
            const joined = t.join(`k${s.key}`, s.worker);
            if (running) {
              expect(joined).toMatchObject({ flight: running.flight, lead: false });
              running.followers.add(s.worker);
            } else {
              expect(joined.lead).toBe(true);
              model.set(s.key, { flight: joined.flight, leader: s.worker, followers: new Set() });
            }
          } else if (s.op === 'end') {
            const running = model.get(s.key);
            if (!running) continue;
            const out = t.fromLeader(running.leader, running.flight, { type: 'end', end: { kind: 'not_started' } });
            expect(new Set(out?.to)).toEqual(running.followers);
            model.delete(s.key);
          } else {
            const out = t.dropWorker(s.worker);
            const led = [...model.entries()].filter(([, f]) => f.leader === s.worker);
            for (const f of model.values()) f.followers.delete(s.worker);
            expect(out.map((o) => o.flight).sort()).toEqual(led.map(([, f]) => f.flight).sort());
            for (const o of out) expect(new Set(o.to)).toEqual(model.get(led.find(([, f]) => f.flight === o.flight)![0])!.followers);
            for (const [key] of led) model.delete(key);
          }
          expect(t.size).toBe(model.size);
        }
      }),
    );
  });
});
