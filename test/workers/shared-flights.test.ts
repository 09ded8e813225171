/**
 * The flight protocol between the workers of one server, with the real pieces in one process: two
 * `BlobFlights` (one per "worker", each over its own store handle on one data dir), each joined to
 * the primary's real `FlightTable` through its `WorkerFlights`; only the IPC channel is replaced by
 * an in-order hand-over in this process (the suite with real worker processes, pip, crane and curl
 * is shared-fetches.test.ts). The upstream is a real HTTP server behind the fault up.proxy.
 *
 * Checked: a follower tails the leader's staged file (one fetch, every waiter gets every byte); a
 * follower that joins late catches up; a digest mismatch or a broken upstream fails the follower's
 * waiters too and nothing is stored; a leader that stops fails its followers; a leader that cannot
 * start lets each follower fetch for itself; a follower whose leader already published reads the
 * store.
 */
import { describe, expect, it, vi } from 'vitest';
import { LEADER_STOPPED } from '../../registry/src/roles/flight-peers.js';
import { BlobFlights, type FlightOutcome, type FlightSource } from '../../registry/src/roles/single-flight.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import type { Holder } from '../../registry/src/storage/holds.js';
import { DigestMismatchError } from '../../registry/src/storage/types.js';
import { FlightTable } from '../../registry/src/workers/flight-table.js';
import type { FromWorker, ToWorker } from '../../registry/src/workers/messages.js';
import { WorkerFlights } from '../../registry/src/workers/worker-flights.js';
import { tempDir } from '../support/velodex.js';
import { consume, starter, type Meta } from '../roles/flight-support.js';
import { generatedDigest, proxiedOrigin } from '../roles/origin.js';

const MiB = 1024 * 1024;
const SIZE = 12 * MiB;

const up = proxiedOrigin(Object.fromEntries(['shared', 'late', 'corrupt', 'drop', 'stopped', 'published', 'nostart'].map((name) => [`/files/${name}`, SIZE])));

interface Worker {
  flights: BlobFlights;
  store: FsBlobStore;
  outcomes: FlightOutcome[];
}

/** A hold that waits for `open()`: the leader's bytes are verified, not yet published, meanwhile. */
function gatedHolder() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let reached!: () => void;
  const waiting = new Promise<void>((resolve) => (reached = resolve));
  const holder: Holder = {
    name: 'gated',
    hold: async () => {
      reached();
      await gate;
      return true;
    },
    isHeld: async () => false,
    release: async () => ({ released: false, last: false, deleted: false }),
    touchStored: async () => [],
  };
  return { holder, open, waiting };
}

/**
 * Two workers and their primary. `deliver` hands a message over on a later turn, in order (as
 * IPC does); `pause` holds a worker's incoming messages back until `resume`. A stopped worker gets
 * nothing and sends nothing, and the primary drops it as it does when a worker process exits.
 */
async function server(opts: { holder?: Holder } = {}) {
  const root = tempDir('velodex-peers-');
  const table = new FlightTable();
  const peers: WorkerFlights[] = [];
  const stopped = new Set<number>();
  const held = new Map<number, ToWorker[]>();
  const hand = (to: number, msg: ToWorker): void => {
    if (!stopped.has(to)) peers[to]!.receive(msg as Extract<ToWorker, { velodex: 'flying' | 'flight' }>);
  };
  const deliver = (to: number, msg: ToWorker): void => {
    setImmediate(() => {
      const queue = held.get(to);
      if (queue) queue.push(msg);
      else hand(to, msg);
    });
  };
  const primary = (from: number, msg: FromWorker): boolean => {
    if (stopped.has(from)) return true;
    setImmediate(() => {
      if (msg.velodex === 'fly') {
        const joined = table.join(msg.key, from);
        deliver(from, { velodex: 'flying', id: msg.id, flight: joined.flight, lead: joined.lead });
        for (const event of joined.catchUp) deliver(from, { velodex: 'flight', flight: joined.flight, event });
      } else if (msg.velodex === 'flight') {
        const f = table.fromLeader(from, msg.flight, msg.event);
        for (const to of f?.to ?? []) deliver(to, { velodex: 'flight', flight: f!.flight, event: f!.event });
      }
    });
    return true;
  };
  const workers: Worker[] = [];
  for (let i = 0; i < 2; i++) {
    peers.push(new WorkerFlights((msg) => primary(i, msg)));
    const store = new FsBlobStore(root);
    await store.init();
    const outcomes: FlightOutcome[] = [];
    const holder = i === 0 ? opts.holder : undefined;
    workers.push({
      store,
      outcomes,
      flights: new BlobFlights({ store, peers: { flights: peers[i]!, scope: 'test' }, onOutcome: (o) => outcomes.push(o), ...(holder ? { holder } : {}) }),
    });
  }
  const stop = (worker: number): void => {
    stopped.add(worker);
    for (const f of table.dropWorker(worker)) for (const to of f.to) deliver(to, { velodex: 'flight', flight: f.flight, event: f.event });
  };
  const pause = (worker: number): void => void held.set(worker, []);
  const resume = (worker: number): void => {
    const queue = held.get(worker) ?? [];
    held.delete(worker);
    for (const msg of queue) hand(worker, msg);
  };
  /** Resolves once every message sent so far has been handed over. */
  const settled = () => new Promise((resolve) => setTimeout(resolve, 20));
  return { workers, table, stop, pause, resume, settled };
}

describe('flights shared by the workers of one server', () => {
  it('the second worker tails the first one\'s fetch: one upstream request, both get every byte, one report', async () => {
    const { workers, table } = await server();
    const [a, b] = workers as [Worker, Worker];
    const digest = generatedDigest('/files/shared', SIZE);
    up.proxy.on('/files/shared', { kind: 'stall', afterBytes: 3 * MiB }, 1);
    const stalls = up.proxy.stalledCount();
    const lead = (await a.flights.open('k', starter(up, '/files/shared', digest)))!;
    const leadRead = consume(lead.stream);
    await up.proxy.stalled(stalls + 1);
    const follow = (await b.flights.open('k', starter(up, '/files/shared', digest)))!;
    expect(follow.size).toBe(SIZE);
    expect(follow.meta).toEqual(lead.meta);
    const followRead = consume(follow.stream);
    // The follower reads what the leader has written, before the upstream goes on (the last byte
    // is held back until the digest verifies).
    await vi.waitFor(() => expect(followRead.state.received).toBe(3 * MiB - 1), { timeout: 20_000 });
    up.proxy.release();
    expect(await leadRead.result).toEqual({ digest, size: SIZE });
    expect(await followRead.result).toEqual({ digest, size: SIZE });
    expect(await follow.outcome).toEqual({ kind: 'published', key: 'k', info: { digest, size: SIZE } });
    expect(up.proxy.count('/files/shared')).toBe(1);
    await vi.waitFor(() => expect(a.outcomes).toHaveLength(1));
    // The follower reports nothing: the fetch is counted once, by its leader.
    expect(b.outcomes).toEqual([]);
    expect(table.size).toBe(0);
    expect(await b.store.stat(digest)).toEqual({ digest, size: SIZE, modifiedMs: expect.any(Number) });
  });

  it('a follower that joins after the bytes verified catches up from the first byte', async () => {
    const gated = gatedHolder();
    const { workers } = await server({ holder: gated.holder });
    const [a, b] = workers as [Worker, Worker];
    const digest = generatedDigest('/files/late', SIZE);
    const lead = (await a.flights.open('late', starter(up, '/files/late', digest)))!;
    const leadRead = consume(lead.stream);
    // Verified and about to be published: the upstream transfer is over.
    await gated.waiting;
    const follow = (await b.flights.open('late', starter(up, '/files/late', digest), { recheck: async () => false }))!;
    expect(follow).not.toBeNull();
    const followRead = consume(follow.stream);
    expect(await followRead.result).toEqual({ digest, size: SIZE });
    gated.open();
    expect(await leadRead.result).toEqual({ digest, size: SIZE });
    expect((await follow.outcome).kind).toBe('published');
    expect(up.proxy.count('/files/late')).toBe(1);
  });

  it('a digest mismatch fails the follower\'s waiters too; nothing is stored', async () => {
    const { workers } = await server();
    const [a, b] = workers as [Worker, Worker];
    const digest = generatedDigest('/files/corrupt', SIZE);
    up.proxy.on('/files/corrupt', { kind: 'stall', afterBytes: 2 * MiB }, 1);
    const stalls = up.proxy.stalledCount();
    const lead = (await a.flights.open('bad', starter(up, '/files/corrupt', 'f'.repeat(64))))!;
    const leadRead = consume(lead.stream);
    await up.proxy.stalled(stalls + 1);
    const follow = (await b.flights.open('bad', starter(up, '/files/corrupt', 'f'.repeat(64))))!;
    const followRead = consume(follow.stream);
    up.proxy.release();
    await expect(leadRead.result).rejects.toBeInstanceOf(DigestMismatchError);
    await expect(followRead.result).rejects.toBeInstanceOf(DigestMismatchError);
    expect(followRead.state.received).toBeLessThan(SIZE);
    expect((await follow.outcome).kind).toBe('rejected');
    expect(up.proxy.count('/files/corrupt')).toBe(1);
    expect(await b.store.stat(digest)).toBeNull();
  });

  it('an upstream that dies mid-transfer fails the follower\'s waiters', async () => {
    const { workers } = await server();
    const [a, b] = workers as [Worker, Worker];
    up.proxy.on('/files/drop', { kind: 'stall', afterBytes: 2 * MiB }, 1);
    const stalls = up.proxy.stalledCount();
    const lead = (await a.flights.open('drop', starter(up, '/files/drop')))!;
    const leadRead = consume(lead.stream);
    await up.proxy.stalled(stalls + 1);
    const follow = (await b.flights.open('drop', starter(up, '/files/drop')))!;
    const followRead = consume(follow.stream);
    await vi.waitFor(() => expect(followRead.state.received).toBeGreaterThan(0), { timeout: 20_000 });
    // The stalled response's connection goes: the leader's body ends short.
    up.proxy.dropStalled();
    await expect(leadRead.result).rejects.toThrow(/upstream/);
    await expect(followRead.result).rejects.toThrow(/upstream/);
    expect((await follow.outcome).kind).toBe('upstream_error');
  });

  it('a leader that stops mid-transfer fails its followers, which never fetch on their own', async () => {
    const { workers, stop } = await server();
    const [a, b] = workers as [Worker, Worker];
    up.proxy.on('/files/stopped', { kind: 'stall', afterBytes: 2 * MiB }, 1);
    const stalls = up.proxy.stalledCount();
    const lead = (await a.flights.open('stop', starter(up, '/files/stopped')))!;
    consume(lead.stream);
    await up.proxy.stalled(stalls + 1);
    const follow = (await b.flights.open('stop', starter(up, '/files/stopped')))!;
    const followRead = consume(follow.stream);
    await vi.waitFor(() => expect(followRead.state.received).toBe(2 * MiB - 1), { timeout: 20_000 });
    stop(0);
    await expect(followRead.result).rejects.toThrow(LEADER_STOPPED);
    expect((await follow.outcome).kind).toBe('upstream_error');
    expect(up.proxy.count('/files/stopped')).toBe(1);
    up.proxy.release();
  });

  it('a leader that cannot start lets each follower fetch for itself, with its own error', async () => {
    const { workers } = await server();
    const [a, b] = workers as [Worker, Worker];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const failing = async (): Promise<FlightSource<Meta>> => {
      await held;
      throw new Error('leader: upstream answered 503');
    };
    const leadOpen = a.flights.open('nostart', failing);
    // Let the leader join first.
    await new Promise((r) => setTimeout(r, 50));
    const followOpen = b.flights.open('nostart', starter(up, '/files/nostart'));
    await new Promise((r) => setTimeout(r, 50));
    release();
    await expect(leadOpen).rejects.toThrow('leader: upstream answered 503');
    const follow = (await followOpen)!;
    expect(await consume(follow.stream).result).toEqual({ digest: generatedDigest('/files/nostart', SIZE), size: SIZE });
    expect(up.proxy.count('/files/nostart')).toBe(1);
    // The follower's own fetch is its own to report.
    await vi.waitFor(() => expect(b.outcomes.map((o) => o.kind)).toEqual(['published']));
  });

  it('a follower that opens the file only after the leader published it reads the store (null)', async () => {
    const gated = gatedHolder();
    const { workers, pause, resume, settled } = await server({ holder: gated.holder });
    const [a, b] = workers as [Worker, Worker];
    const digest = generatedDigest('/files/published', SIZE);
    const lead = (await a.flights.open('pub', starter(up, '/files/published', digest)))!;
    const leadRead = consume(lead.stream);
    await gated.waiting;
    // The follower joins, but hears of it (and of the head) only once the file was renamed away.
    pause(1);
    const followOpen = b.flights.open('pub', starter(up, '/files/published', digest), { recheck: async () => false });
    await settled();
    gated.open();
    expect(await lead.outcome).toMatchObject({ kind: 'published' });
    await settled();
    resume(1);
    expect(await followOpen).toBeNull();
    expect(await leadRead.result).toEqual({ digest, size: SIZE });
    expect(up.proxy.count('/files/published')).toBe(1);
    expect(await b.store.stat(digest)).toEqual({ digest, size: SIZE, modifiedMs: expect.any(Number) });
  });
});
