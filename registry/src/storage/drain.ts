/** Waiting on a writable's backpressure without hanging on one that will never drain. */
import type { Writable } from 'node:stream';

/** Resolves once `stream` wants more (`drain`), or can take nothing any more (`close`, or destroyed already). */
export function drainOrClose(stream: Writable): Promise<void> {
  if (stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('close', done);
  });
}
