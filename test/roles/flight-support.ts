/**
 * What the single-flight suites share: a starter that hands the upstream's body to a flight, and
 * a consumer that hashes a waiter's stream while counting what arrived.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FlightSource } from '../../registry/src/roles/single-flight.js';
import { header } from '../../registry/src/roles/upstream.js';
import type { ProxiedOrigin } from './origin.js';

export interface Meta {
  contentType: string | undefined;
}

/** The caller's side of a miss: one upstream GET, handed over with what the bytes must hash to. */
export function starter(up: ProxiedOrigin, path: string, expected?: string): () => Promise<FlightSource<Meta>> {
  return async () => {
    const res = await up.client.get(path);
    if (res.status !== 200) {
      res.body.resume();
      throw new Error(`upstream answered ${res.status}`);
    }
    const source: FlightSource<Meta> = { body: res.body, size: Number(header(res.headers, 'content-length')), meta: { contentType: header(res.headers, 'content-type') } };
    if (expected) source.expected = expected;
    return source;
  };
}

/** Reads a waiter's stream to the end, hashing; keeps a live byte count for mid-transfer checks. */
export function consume(stream: Readable) {
  const state = { received: 0 };
  const result = (async () => {
    const h = createHash('sha256');
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      h.update(chunk);
      state.received += chunk.length;
    }
    return { digest: h.digest('hex'), size: state.received };
  })();
  result.catch(() => undefined);
  return { state, result };
}
