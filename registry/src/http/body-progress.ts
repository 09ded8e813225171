/**
 * A watch on a request body's progress: a body that delivers no byte for `idleMs` is a stalled
 * client, and `onStall` runs (the caller cuts the connection). Not a total timeout: an upload
 * that keeps moving is never cut, however slow and however long.
 *
 * Cheap, since every request with a body has one: nothing runs per chunk. One timer, firing every
 * quarter of the bound, compares the socket's count of bytes read with its last look; four quiet
 * looks in a row are a stall, so the cut comes between `idleMs` and 1.25 × `idleMs` after the
 * last byte. Bytes the server has not taken yet (its own backpressure: a slow store, a handler
 * that has not started reading) are never the client's stall.
 */
import type { IncomingMessage } from 'node:http';

const LOOKS = 4;

export function watchBodyProgress(req: IncomingMessage, idleMs: number, onStall: () => void): void {
  const socket = req.socket;
  let seen = socket.bytesRead;
  let quiet = 0;
  const stop = (): void => clearInterval(timer);
  const timer = setInterval(() => {
    if (req.complete || socket.destroyed) return stop();
    const now = socket.bytesRead;
    if (now !== seen || req.readableLength > 0) {
      seen = now;
      quiet = 0;
      return;
    }
    if (++quiet < LOOKS) return;
    stop();
    onStall();
  }, Math.max(1, Math.floor(idleMs / LOOKS)));
  timer.unref();
  req.once('close', stop);
}

/** Whether a request announces a body (a length above zero, or chunked). */
export function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return Number(length) > 0;
  return req.headers['transfer-encoding'] !== undefined;
}
