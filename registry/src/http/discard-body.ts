/**
 * Reads and throws away the body of a request that is refused before its handler read it.
 * `discardBody` reads a small body before the answer; `discardRest` drops the rest after it;
 * `settleUnreadBody` is the two together, as every refusal uses them.
 *
 * A client that writes its whole body before it reads the answer (containerd's pusher does, on a
 * manifest PUT) gets confused by a refusal that arrives mid-write: its retry never completes. So
 * a small body is read to its end first, and the connection stays usable. A body above `cap` is
 * not worth reading, and one that does not arrive at once is not waited for: the caller answers
 * at once and closes the connection.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { announcesBody } from './body-progress.js';

/**
 * `read`: the body is consumed; `too-large`: it passes `cap` (reading stopped); `slow`: it had not
 * ended after `maxMs` (reading goes on unless the caller stops it); `gone`: the client left.
 */
export type Discarded = 'read' | 'too-large' | 'slow' | 'gone';

export function discardBody(raw: IncomingMessage, cap: number, maxMs: number): Promise<Discarded> {
  if (raw.readableEnded) return Promise.resolve('read');
  if (raw.destroyed) return Promise.resolve('gone');
  const declared = Number(raw.headers['content-length'] ?? '0');
  if (declared > cap) return Promise.resolve('too-large');
  return new Promise((resolve) => {
    let total = 0;
    // A client that announced a body and sends it slowly, or never, is not waited for.
    const timer = setTimeout(() => settle('slow'), maxMs);
    const settle = (result: Discarded): void => {
      clearTimeout(timer);
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
    // A body whose reader stopped (`request-body.ts`) is paused: a listener alone would not start it.
    raw.resume();
  });
}

export interface DiscardLimits {
  /** Past this many more bytes reading stops, and the connection is cut `lingerMs` later. */
  maxBytes: number;
  /** Past this long the connection is cut. */
  maxMs: number;
  /**
   * How long a connection whose reading stopped stays open before it is cut. Cutting a socket
   * with unread bytes sends a reset, and a reset can reach the client before it has read the
   * answer (it then sees "connection reset" or EPIPE instead of the 429 or 413): while reading is
   * paused the client's writes just block, and it has time to read the answer.
   */
  lingerMs?: number;
}

const DEFAULT_LINGER_MS = 2_000;
export const DEFAULT_DISCARD_LIMITS: DiscardLimits = { maxBytes: 32 * 1024 * 1024, maxMs: 30_000, lingerMs: DEFAULT_LINGER_MS };

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
  halfCloseAfterAnswer(req.socket, limits.lingerMs ?? DEFAULT_LINGER_MS);
  let seen = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, limits.maxMs);
  timer.unref();
  const stop = () => clearTimeout(timer);
  let lingering = false;
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen <= limits.maxBytes || lingering) return;
    lingering = true;
    req.pause();
    setTimeout(cut, limits.lingerMs ?? DEFAULT_LINGER_MS).unref();
  });
  req.once('end', stop);
  req.once('close', stop);
  req.resume();
}

/** How long a small refused body may take to arrive before the refusal goes out without it. */
export const READ_BEFORE_REFUSAL_MS = 2_000;
/** What is dropped after a refusal whose body was not read, before the connection is cut. */
export const DROP_AFTER_REFUSAL: DiscardLimits = { maxBytes: 1024 * 1024, maxMs: 10_000, lingerMs: DEFAULT_LINGER_MS };

/**
 * Before a refusal of a request whose body nobody read: a body of at most `readBytes` that
 * arrives within `READ_BEFORE_REFUSAL_MS` is read to its end, and the connection stays usable
 * (containerd writes its whole manifest before it reads the answer). Any other body, a large one
 * or one that does not come (a stalled client), does not hold the answer up: it goes out at once
 * with `Connection: close`, and what still arrives is dropped within `DROP_AFTER_REFUSAL`.
 */
export async function settleUnreadBody(request: FastifyRequest, reply: FastifyReply, readBytes: number): Promise<void> {
  const raw = request.raw;
  if (!announcesBody(raw)) return;
  if ((await discardBody(raw, readBytes, READ_BEFORE_REFUSAL_MS)) === 'read') return;
  reply.header('connection', 'close');
  discardRest(raw, DROP_AFTER_REFUSAL);
}

/**
 * After an answer with `Connection: close`, Node's HTTP server calls `socket.destroySoon()`: the
 * socket is destroyed as soon as the answer is flushed. With request bytes still unread that
 * sends a reset, which can overtake the answer (the client sees EPIPE or "connection reset"
 * instead of the status). Here it only half-closes: the answer and a FIN go out, and the reading
 * of `discardRest` goes on until the client is done or a bound of `discardRest` cuts it.
 */
function halfCloseAfterAnswer(socket: Socket, lingerMs: number): void {
  socket.destroySoon = function halfClose(this: Socket): void {
    if (this.writable) this.end();
    // The client closing its side closes the socket; one that never does is cut after the linger.
    setTimeout(() => this.destroy(), lingerMs).unref();
  };
}
