/**
 * `[storage] peer_cache` (storage/peers/) over a real store: MetaStores on one folder stand for the
 * processes that share a bucket, each with its real invalidation listener on 127.0.0.1, on one
 * clock the test moves. A request read is answered from memory only once the process may serve
 * copies (past its join delay, within its lease); a write through any process drops every other's
 * copy before it returns; a member that does not answer is removed and waited out; a removed member
 * joins again and serves none of its old copies; the listener takes only requests signed with the
 * store's key.
 */
import fc from 'fast-check';
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { ProcessKeyLocks } from '../../registry/src/storage/key-locks.js';
import { InvalidationSender, listenForInvalidations, sharedPeerKey } from '../../registry/src/storage/peers/invalidation.js';
import { MEMBERS_KEY, safetyMarginMs, type MembersDoc, type PeerTiming } from '../../registry/src/storage/peers/members.js';
import { MAX_COPY_AGE_MS, PeerCache } from '../../registry/src/storage/peers/peer-cache.js';
import { REQUEST_READ, type MetaStore } from '../../registry/src/storage/types.js';
import { updateDoc } from '../../registry/src/storage/update.js';
import { tempDir } from '../support/velodex.js';

interface Doc {
  n: number;
}

/** Short enough for a test to wait out; the background reads are left to the test (`refresh`). */
const TIMING: PeerTiming = { refreshMs: 600_000, leaseMs: 2_000, listMaxAgeMs: 500, invalidateTimeoutMs: 500 };
const JOIN_DELAY = TIMING.listMaxAgeMs + safetyMarginMs(TIMING.listMaxAgeMs);
const KEY = randomBytes(32);

const opened: PeerCache[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

/** A store on one folder, as every process sees the bucket, and one clock for all of them. */
async function world() {
  const dir = tempDir('velodex-peers-');
  const locks = new ProcessKeyLocks();
  let clock = 1_000;
  const store = async (): Promise<MetaStore> => {
    const s = new FsMetaStore(dir, locks);
    await s.init();
    return s;
  };
  const plain = await store();
  /** A process: its cache over a store whose reads are counted. */
  const process = async (o: { serves?: boolean; removed?: string[]; errors?: string[]; ownKey?: boolean } = {}) => {
    const inner = await store();
    const gets: string[] = [];
    const counted: MetaStore = {
      get: <T,>(key: string) => {
        if (key !== MEMBERS_KEY) gets.push(key);
        return inner.get<T>(key);
      },
      put: inner.put.bind(inner),
      delete: inner.delete.bind(inner),
      list: inner.list.bind(inner),
    };
    const cache = await PeerCache.open(counted, {
      host: o.serves === false ? null : '127.0.0.1',
      ...(o.ownKey ? {} : { signingKey: KEY }),
      timing: TIMING,
      now: () => clock,
      onRemoved: (url) => o.removed?.push(url),
      onError: (err) => o.errors?.push(err instanceof Error ? err.message : String(err)),
    });
    opened.push(cache);
    return { cache, gets };
  };
  const members = async () => (await plain.get<MembersDoc>(MEMBERS_KEY))?.doc.members ?? {};
  return { plain, process, members, advance: (ms: number) => (clock += ms) };
}

describe('the peer cache (peer_cache)', () => {
  it('answers a request read from memory once past its join delay, never before', async () => {
    const w = await world();
    const { cache, gets } = await w.process();
    await w.plain.put<Doc>('t/doc', { n: 1 });
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    // Writers may not know this process yet: no copy is kept, every read asks the store.
    await w.plain.put<Doc>('t/doc', { n: 2 });
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect(gets).toHaveLength(2);
    w.advance(JOIN_DELAY);
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect(gets).toHaveLength(3);
    // A read that decides a write never takes the copy.
    expect((await cache.get<Doc>('t/doc'))?.doc.n).toBe(2);
    expect(gets).toHaveLength(4);
  });

  it('drops every other process’s copy before a write returns, through put, delete and updateDoc', async () => {
    const w = await world();
    const one = await w.process();
    const two = await w.process();
    w.advance(JOIN_DELAY);
    await one.cache.put<Doc>('t/doc', { n: 1 });
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    expect(two.gets).toEqual(['t/doc']);

    await one.cache.put<Doc>('t/doc', { n: 2 });
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    await updateDoc<Doc>(one.cache, 't/doc', (d) => ({ n: (d?.n ?? 0) + 1 }));
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(3);
    await one.cache.delete('t/doc');
    expect(await two.cache.get<Doc>('t/doc', REQUEST_READ)).toBeNull();
    // And the other way round.
    await two.cache.put<Doc>('t/doc', { n: 9 });
    expect((await one.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(9);
  });

  it('drops copies for a process that only writes (velodex gc), which never joins', async () => {
    const w = await world();
    const server = await w.process();
    const command = await w.process({ serves: false });
    w.advance(JOIN_DELAY);
    await w.plain.put<Doc>('t/doc', { n: 1 });
    expect((await server.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    await command.cache.put<Doc>('t/doc', { n: 2 });
    expect((await server.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect(Object.keys(await w.members())).toEqual([server.cache.membership.id]);
  });

  it('keeps no copy of a read during which a drop arrived', async () => {
    const w = await world();
    const { cache, gets } = await w.process();
    w.advance(JOIN_DELAY);
    await w.plain.put<Doc>('t/doc', { n: 1 });
    const reading = cache.get<Doc>('t/doc', REQUEST_READ);
    cache.drop(['t/other']);
    await reading;
    await cache.get<Doc>('t/doc', REQUEST_READ);
    expect(gets).toEqual(['t/doc', 't/doc']);
  });

  it('removes a member that does not answer and returns only a lease later; the member then serves none of its copies', async () => {
    const w = await world();
    const removed: string[] = [];
    const errors: string[] = [];
    const one = await w.process({ errors });
    const two = await w.process({ removed });
    w.advance(JOIN_DELAY);
    await w.plain.put<Doc>('t/doc', { n: 1 });
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    const lostId = two.cache.membership.id!;
    // A member nobody can reach: nothing listens at its address any more.
    await updateDoc<MembersDoc>(w.plain, MEMBERS_KEY, (d) => ({ members: { ...(d?.members ?? {}), dead: { url: 'http://127.0.0.1:9', joined: new Date().toISOString() } } }));
    await one.cache.membership.refresh();
    const started = performance.now();
    await one.cache.put<Doc>('t/doc', { n: 2 });
    // The write came back only after the lease of the member it removed (real time: a lower bound).
    expect(performance.now() - started).toBeGreaterThanOrEqual(one.cache.membership.leaseWaitMs);
    // And said so, naming the member.
    expect(errors).toEqual([expect.stringContaining('could not reach the listener of another process at http://127.0.0.1:9: removed it')]);
    expect(Object.keys(await w.members()).sort()).toEqual([lostId, one.cache.membership.id].sort());
    // `two` answered, so it dropped its copy.
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);

    // Now `two` itself is removed (a writer could not reach it) while it holds a copy.
    await one.cache.membership.remove(lostId);
    await w.plain.put<Doc>('t/doc', { n: 3 });
    const before = two.gets.length;
    // Within its lease it may still answer from the copy: no write that changed it has returned.
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    // Its next read of the members finds it gone: it joins again, and no old copy is served.
    await two.cache.membership.refresh();
    expect(removed).toHaveLength(1);
    expect(two.cache.membership.id).not.toBe(lostId);
    expect(Object.keys(await w.members())).toContain(two.cache.membership.id);
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(3);
    w.advance(JOIN_DELAY);
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(3);
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(3);
    expect(two.gets.length - before).toBe(2);
  });

  it('stops answering from memory when its lease runs out without a read of the members', async () => {
    const w = await world();
    const { cache, gets } = await w.process();
    w.advance(JOIN_DELAY);
    await w.plain.put<Doc>('t/doc', { n: 1 });
    await cache.get<Doc>('t/doc', REQUEST_READ);
    await cache.get<Doc>('t/doc', REQUEST_READ);
    expect(gets).toHaveLength(1);
    w.advance(TIMING.leaseMs);
    await w.plain.put<Doc>('t/doc', { n: 2 });
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect(gets).toHaveLength(2);
    // A read of the members that names it renews the lease.
    await cache.membership.refresh();
    await cache.get<Doc>('t/doc', REQUEST_READ);
    await cache.get<Doc>('t/doc', REQUEST_READ);
    expect(gets).toHaveLength(3);
  });

  it('reads a copy again after MAX_COPY_AGE_MS, so a writer without the setting is seen within it', async () => {
    const w = await world();
    const { cache, gets } = await w.process();
    w.advance(JOIN_DELAY);
    await w.plain.put<Doc>('t/doc', { n: 1 });
    await cache.get<Doc>('t/doc', REQUEST_READ);
    // A write that drops nobody's copy (`plain` stands for a process without peer_cache).
    await w.plain.put<Doc>('t/doc', { n: 2 });
    w.advance(MAX_COPY_AGE_MS - 1);
    await cache.membership.refresh();
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    w.advance(1);
    expect((await cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect(gets).toHaveLength(2);
  });

  it('signs with one key kept in the store, made by the first process that needs it', async () => {
    const w = await world();
    const [one, two] = await Promise.all([w.process({ ownKey: true }), w.process({ ownKey: true })]);
    w.advance(JOIN_DELAY);
    await one.cache.put<Doc>('t/doc', { n: 1 });
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    await one.cache.put<Doc>('t/doc', { n: 2 });
    expect((await two.cache.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect((await sharedPeerKey(w.plain)).length).toBe(32);
  });

  it('leaves the members when closed, so no write waits for it', async () => {
    const w = await world();
    const one = await w.process();
    const two = await w.process();
    expect(Object.keys(await w.members())).toHaveLength(2);
    await two.cache.close();
    opened.splice(opened.indexOf(two.cache), 1);
    expect(Object.keys(await w.members())).toEqual([one.cache.membership.id]);
    await one.cache.membership.refresh();
    const started = performance.now();
    await one.cache.put<Doc>('t/doc', { n: 1 });
    expect(performance.now() - started).toBeLessThan(one.cache.membership.leaseWaitMs);
  });
});

describe('sending invalidations', () => {
  it('sends again on a new connection when a kept-alive one was closed as it was reused, and fails on a connection that fails twice', async () => {
    // A listener that answers the first request of each connection and resets the connection at its second.
    const requests: number[] = [];
    const server = createServer((socket) => {
      let seen = 0;
      socket.on('data', (chunk: Buffer) => {
        if (!chunk.includes('POST /invalidate')) return;
        seen++;
        requests.push(seen);
        if (seen === 1) socket.write('HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n');
        else socket.resetAndDestroy();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const sender = new InvalidationSender(KEY, 1000);
    try {
      await sender.send(url, ['t/a']);
      // The second goes out on the kept-alive connection, is reset, and goes again on a new one.
      await sender.send(url, ['t/b']);
      expect(requests).toEqual([1, 2, 1]);
    } finally {
      sender.close();
      server.close();
    }
    // Nothing listens there any more: no retry helps, the send fails.
    await expect(new InvalidationSender(KEY, 1000).send(url, ['t/c'])).rejects.toThrow();
  });
});

describe('the invalidation listener', () => {
  const sign = (key: Buffer, body: Buffer) => createHmac('sha256', key).update(body).digest('hex');
  const post = (url: string, body: Buffer, headers: Record<string, string> = {}) =>
    fetch(`${url}/invalidate`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

  it('drops the keys of a request signed with the store’s key, and refuses every other request', async () => {
    const dropped: string[][] = [];
    const listener = await listenForInvalidations('127.0.0.1', KEY, (keys) => dropped.push(keys));
    try {
      const body = Buffer.from(JSON.stringify({ keys: ['oci/tags/a', 'python/pages/b'] }));
      expect((await post(listener.url, body)).status).toBe(403);
      const otherKey = randomBytes(32);
      expect((await post(listener.url, body, { 'x-velodex-peer-signature': sign(otherKey, body) })).status).toBe(403);
      expect((await fetch(`${listener.url}/invalidate`)).status).toBe(404);
      const big = Buffer.alloc(65 * 1024, 0x20);
      expect((await post(listener.url, big, { 'x-velodex-peer-signature': sign(KEY, big) })).status).toBe(413);
      const notKeys = Buffer.from('{"keys": "all"}');
      expect((await post(listener.url, notKeys, { 'x-velodex-peer-signature': sign(KEY, notKeys) })).status).toBe(400);
      expect(dropped).toEqual([]);
      expect((await post(listener.url, body, { 'x-velodex-peer-signature': sign(KEY, body) })).status).toBe(204);
      expect(dropped).toEqual([['oci/tags/a', 'python/pages/b']]);
    } finally {
      await listener.close();
    }
  });

  it('never drops for bytes that are not signed with the key, and drops exactly the keys of a signed list (property)', async () => {
    const dropped: string[][] = [];
    const listener = await listenForInvalidations('127.0.0.1', KEY, (keys) => dropped.push(keys));
    try {
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), fc.string({ maxLength: 80 }), async (bytes, signature) => {
          const body = Buffer.from(bytes);
          const res = await post(listener.url, body, { 'x-velodex-peer-signature': signature.replace(/[^\x21-\x7e]/g, '') });
          expect(res.status).toBe(403);
          expect(dropped).toEqual([]);
        }),
        { numRuns: 60 },
      );
      await fc.assert(
        fc.asyncProperty(fc.oneof(fc.array(fc.string({ maxLength: 40 }), { maxLength: 20 }).map((keys) => ({ keys })), fc.jsonValue()), async (value) => {
          dropped.length = 0;
          const body = Buffer.from(JSON.stringify(value) ?? 'null');
          const res = await post(listener.url, body, { 'x-velodex-peer-signature': sign(KEY, body) });
          const valid = typeof value === 'object' && value !== null && Array.isArray((value as { keys?: unknown }).keys) && ((value as { keys: unknown[] }).keys.every((k) => typeof k === 'string'));
          expect(res.status).toBe(valid ? 204 : 400);
          expect(dropped).toEqual(valid ? [(value as { keys: string[] }).keys] : []);
        }),
        { numRuns: 60 },
      );
    } finally {
      await listener.close();
    }
  });
});
