/**
 * Range reads of an upstream file (`roles/upstream-range.ts`: a few parts of a large file, such
 * as an archive's index and one member, without downloading it) against a plain HTTP origin that
 * answers a range properly, with another range, or not at all.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRanged } from '../../registry/src/roles/upstream-range.js';
import { UpstreamError } from '../../registry/src/roles/upstream-error.js';
import { UpstreamClient } from '../../registry/src/roles/upstream.js';

describe('range reads (unit)', () => {
  const data = Buffer.from('0123456789abcdefghij');
  /** How the test origin answers a range request: properly, with another range, or ignoring it. */
  let mode: 'ok' | 'other-range' | 'ignore' = 'ok';
  let origin: http.Server;
  let client: UpstreamClient;

  beforeAll(async () => {
    origin = http.createServer((req, res) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!m || mode === 'ignore') return void res.writeHead(200, { 'content-length': data.length }).end(data);
      const [start, end] = mode === 'other-range' ? [0, 1] : [Number(m[1]), Number(m[2])];
      res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${data.length}`, 'content-length': end - start + 1 }).end(data.subarray(start, end + 1));
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    client = new UpstreamClient({ baseUrl: `http://127.0.0.1:${(origin.address() as AddressInfo).port}/` });
  });
  afterAll(async () => {
    client?.close();
    origin?.closeAllConnections();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
  });

  const read = async (stream: Readable) => Buffer.concat((await stream.toArray()) as Buffer[]).toString();

  it('reads exact ranges within the budget and refuses whole reads', async () => {
    mode = 'ok';
    const file = (await openRanged(client, 'f', { budget: 10 }))!;
    expect(file.size).toBe(20);
    expect(await read(await file.open({ start: 5, end: 9 }))).toBe('56789');
    // A range read that cannot be used: the upstream failure of kind `range`.
    await expect(file.open()).rejects.toBeInstanceOf(UpstreamError);
    await expect(file.open()).rejects.toMatchObject({ kind: 'range' });
    await expect(file.open({ start: 0, end: 4 })).rejects.toThrow(/more than 10 bytes/);
    expect(await openRanged(client, 'f', { budget: 10, expectedSize: 21 })).toBeNull();
  });

  it('is null when the upstream ignores ranges, and fails a read answered with another range', async () => {
    mode = 'ignore';
    expect(await openRanged(client, 'f', { budget: 100 })).toBeNull();
    mode = 'ok';
    const file = (await openRanged(client, 'f', { budget: 100 }))!;
    mode = 'other-range';
    await expect(file.open({ start: 4, end: 8 })).rejects.toThrow(/not the range asked for/);
  });
});
