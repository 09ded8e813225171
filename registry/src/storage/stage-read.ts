/**
 * Streams a byte range through a positional read function: how every backend's stage implements
 * `readBack` on top of its `read`, so no backend loads what it reads back.
 */
import { Readable } from 'node:stream';
import type { ByteRange } from './types.js';

const READ_CHUNK = 256 * 1024;

export function rangeStream(read: (buffer: Buffer, position: number) => Promise<number>, size: number, range?: ByteRange): Readable {
  let pos = range?.start ?? 0;
  const end = Math.min(range?.end ?? size - 1, size - 1);
  return new Readable({
    read() {
      if (pos > end) {
        this.push(null);
        return;
      }
      const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, end - pos + 1));
      read(buf, pos).then(
        (n) => {
          if (n === 0) {
            this.destroy(new Error(`staged bytes ended at ${pos}, before ${end + 1}`));
            return;
          }
          pos += n;
          this.push(n === buf.length ? buf : buf.subarray(0, n));
        },
        (err: Error) => this.destroy(err),
      );
    },
  });
}
