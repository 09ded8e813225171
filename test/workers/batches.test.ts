/**
 * The IPC batching between the primary and its workers: what one turn of the event loop sends
 * goes as one message, in order; a lone message goes as it is; what is not ours is ignored.
 */
import { describe, expect, it } from 'vitest';
import { BatchedSender, messagesIn, type Batch } from '../../registry/src/workers/batches.js';

type Msg = { velodex: 'lock' | 'unlock'; id: number };

describe('batched IPC messages', () => {
  it('sends what one turn queued as one batch, in order, and a lone message as it is', async () => {
    const delivered: Array<Msg | Batch<Msg>> = [];
    const sender = new BatchedSender<Msg>((m) => delivered.push(m));
    sender.send({ velodex: 'lock', id: 1 });
    await Promise.resolve();
    sender.send({ velodex: 'unlock', id: 1 });
    sender.send({ velodex: 'lock', id: 2 });
    expect(delivered).toEqual([]);
    await new Promise((r) => setImmediate(r));
    sender.send({ velodex: 'unlock', id: 2 });
    await new Promise((r) => setImmediate(r));

    expect(delivered).toEqual([
      { velodex: 'batch', messages: [{ velodex: 'lock', id: 1 }, { velodex: 'unlock', id: 1 }, { velodex: 'lock', id: 2 }] },
      { velodex: 'unlock', id: 2 },
    ]);
    expect(delivered.flatMap((m) => messagesIn<Msg>(m)).map((m) => `${m.velodex}:${m.id}`)).toEqual(['lock:1', 'unlock:1', 'lock:2', 'unlock:2']);
  });

  it('reads nothing from messages that are not ours (another module on the channel)', () => {
    expect(messagesIn({ type: 'prom-client', data: 1 })).toEqual([]);
    expect(messagesIn('text')).toEqual([]);
    expect(messagesIn({ velodex: 'batch', messages: [{ other: true }, { velodex: 'lock', id: 3 }] })).toEqual([{ velodex: 'lock', id: 3 }]);
  });
});
