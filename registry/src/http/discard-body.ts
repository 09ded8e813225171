/**
 * Reads and throws away the body of a request that is refused before its handler read it.
 * `discardBody` reads a small body before the answer; `discardRest` drops the rest after it.
 *
 * A client that writes its whole body before it reads the answer (containerd's pusher does, on a
 * manifest PUT) gets confused by a refusal that arrives mid-write: its retry never completes. So
 * a small body is read to its end first, and the connection stays usable. A body above `cap` is
 * not worth reading: the caller answers at once and closes the connection.
 */
import type { IncomingMessage } from 'node:http';

/** `read`: the body is consumed; `too-large`: it passes `cap` (reading stopped); `gone`: the client left. */
export type Discarded = 'read' | 'too-large' | 'gone';

export function discardBody(raw: IncomingMessage, cap: number): Promise<Discarded> {
  if (raw.readableEnded) return Promise.resolve('read');
  if (raw.destroyed) return Promise.resolve('gone');
  const declared = Number(raw.headers['content-length'] ?? '0');
  if (declared > cap) return Promise.resolve('too-large');
  return new Promise((resolve) => {
    let total = 0;
    const settle = (result: Discarded): void => {
      raw.off('data', onData).off('end', onEnd).off('error', onGone).off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      total += chunk.length;
      // A chunked body gives no length up front: stop as soon as it passes the cap.
      if (total > cap) {
        raw.pause();
        settle('too-large');
      }
    };
    const onEnd = (): void => settle('read');
    const onGone = (): void => settle('gone');
    const onClose = (): void => settle(raw.readableEnded ? 'read' : 'gone');
    raw.on('data', onData).once('end', onEnd).once('error', onGone).once('close', onClose);
  });
}

export interface DiscardLimits {
  /** Past this many more bytes the connection is cut. */
  maxBytes: number;
  /** Past this long the connection is cut. */
  maxMs: number;
}

export const DEFAULT_DISCARD_LIMITS: DiscardLimits = { maxBytes: 32 * 1024 * 1024, maxMs: 30_000 };

/**
 * For a request answered before its body was read: the response goes out at once, and the
 * remaining bytes are read and dropped so a client that writes its whole body before reading the
 * answer (requests/twine) still sees it, but only up to a bound: past it the connection is cut,
 * so a refused client cannot make the server read without end.
 */
export function discardRest(req: IncomingMessage, limits: DiscardLimits = DEFAULT_DISCARD_LIMITS): void {
  if (req.complete || req.destroyed) return;
  // Detach whatever parser ran (multipart) so nothing buffers or waits on the remaining bytes.
  req.unpipe();
  let seen = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, limits.maxMs);
  timer.unref();
  const stop = () => clearTimeout(timer);
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > limits.maxBytes) cut();
  });
  req.once('end', stop);
  req.once('close', stop);
  req.resume();
}
