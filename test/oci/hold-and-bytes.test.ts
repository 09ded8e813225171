/**
 * A blob's hold and its bytes are asked for at once (oci/handlers/blobs.ts). When the hold read
 * fails (the store does not answer), a bytes stream that opened anyway is destroyed, not left
 * holding its store connection until the store's deadline; the failure is what the caller sees.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { holdAndBytes } from '../../registry/src/oci/handlers/blobs.js';

const bytes = () => Readable.from([Buffer.from('layer bytes')]);

describe('holdAndBytes', () => {
  it('destroys the opened stream when the hold read fails, and rejects with that failure', async () => {
    const stream = bytes();
    await expect(holdAndBytes(Promise.reject(new Error('store timed out')), Promise.resolve(stream))).rejects.toThrow('store timed out');
    expect(stream.destroyed).toBe(true);
  });

  it('rejects with the bytes read failure when the hold was read', async () => {
    await expect(holdAndBytes(Promise.resolve(true), Promise.reject(new Error('bytes read failed')))).rejects.toThrow('bytes read failed');
  });

  it('hands both over when both were read, the stream still open for the answer', async () => {
    const stream = bytes();
    const [held, opened] = await holdAndBytes(Promise.resolve(true), Promise.resolve(stream));
    expect(held).toBe(true);
    expect(opened).toBe(stream);
    expect(stream.destroyed).toBe(false);
    expect(await holdAndBytes(Promise.resolve(false), null)).toEqual([false, null]);
  });
});
