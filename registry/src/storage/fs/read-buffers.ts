/**
 * Read buffers shared by every download of this process (`file-body.ts`). A buffer is taken for
 * one read, lent to the socket with the bytes, and given back once the socket has written them.
 *
 * Why: a fresh 256 KiB buffer per chunk is 80 allocations per 20 MiB file, and V8 counts each as
 * external memory. On a process whose heap has grown with page traffic, that pressure triggered a
 * full mark-compact about once per download: a third of the CPU a download cost went to the
 * garbage collector. With the buffers reused, a warm download allocates nothing per chunk.
 *
 * A buffer that never comes back (its socket was destroyed with the write pending) is collected
 * as garbage like any other; the pool only has to never hand out a buffer still lent.
 */

/** Bytes per read: a quarter of the syscalls and socket writes of Node's 64 KiB default. */
export const READ_CHUNK = 256 * 1024;

/** Buffers kept while idle (8 MiB): what about ten concurrent downloads keep in flight. */
const MAX_IDLE = 32;

const idle: Buffer[] = [];

export function takeReadBuffer(): Buffer {
  return idle.pop() ?? Buffer.allocUnsafeSlow(READ_CHUNK);
}

/** Gives `buffer` back; only once nothing (no pending socket write) refers to it any more. */
export function giveReadBuffer(buffer: Buffer): void {
  if (idle.length < MAX_IDLE && buffer.length === READ_CHUNK) idle.push(buffer);
}
