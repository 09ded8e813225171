/** Small stream helpers for the walkers. */
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { ArchiveError } from './errors.js';

/**
 * Pipes `first` through `rest` and returns the last stream. An error anywhere destroys the whole
 * chain and reaches the reader of the returned stream; destroying it tears the chain down.
 */
export function chain(first: Readable, ...rest: Transform[]): Readable {
  const last = rest[rest.length - 1];
  if (!last) return first;
  pipeline([first, ...rest], () => undefined);
  return last;
}

/** Fails when a member yields more or fewer bytes than its header declared. */
export function exactSize(declared: number, what: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
      seen += chunk.length;
      if (seen > declared) done(new ArchiveError('corrupt', `${what} holds more than the ${declared} bytes it declares`));
      else done(null, chunk);
    },
    flush(done: TransformCallback) {
      done(seen < declared ? new ArchiveError('corrupt', `${what} ends after ${seen} of the ${declared} bytes it declares`) : null);
    },
  });
}

/** Reads a whole stream that must not exceed `limit` bytes. */
export async function collect(stream: Readable, limit: number, what: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) {
      stream.destroy();
      throw new ArchiveError('corrupt', `${what} holds more bytes than declared`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/** Skips `offset` bytes and returns at most `max` after them; stops reading (destroys) once it has them. */
export async function slice(stream: Readable, offset: number, max: number): Promise<Buffer> {
  return (await sliceWithHead(stream, offset, max, 0)).data;
}

/**
 * `slice`, and also the stream's first `headBytes` bytes (they are read on the way to `offset`
 * anyway); stops reading once it has both.
 */
export async function sliceWithHead(stream: Readable, offset: number, max: number, headBytes: number): Promise<{ head: Buffer; data: Buffer }> {
  const head: Buffer[] = [];
  const data: Buffer[] = [];
  let headLen = 0;
  let got = 0;
  let pos = 0;
  const done = () => got >= max && headLen >= headBytes;
  if (done()) {
    stream.destroy();
    return { head: Buffer.alloc(0), data: Buffer.alloc(0) };
  }
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (headLen < headBytes) {
      const part = chunk.subarray(0, headBytes - headLen);
      head.push(part);
      headLen += part.length;
    }
    const from = Math.max(offset - pos, 0);
    if (got < max && from < chunk.length) {
      const part = chunk.subarray(from, from + (max - got));
      data.push(part);
      got += part.length;
    }
    pos += chunk.length;
    if (done()) break; // leaving the loop destroys the stream
  }
  return { head: Buffer.concat(head), data: Buffer.concat(data) };
}

