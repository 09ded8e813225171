/**
 * A request's body as a stream its consumer may destroy without destroying the request.
 *
 * A pipeline that fails (a scratch budget passed mid-stream, a store write that failed) destroys
 * every stream in it. Destroying the request itself resets the connection, and the reset can
 * overtake the answer the error handler is about to send: docker then prints "write: broken pipe"
 * instead of the registry's 413. Through this stream only the consumer's side ends; the request is
 * left paused with its rest unread, for the error handler to settle (`discard-body.ts`).
 *
 * A client that leaves mid-body still fails the consumer, as the request itself would.
 */
import type { IncomingMessage } from 'node:http';
import { finished, PassThrough, type Readable } from 'node:stream';

export function requestBody(raw: IncomingMessage): Readable {
  const body = new PassThrough();
  // A destroyed `body` unpipes itself, which pauses `raw`.
  raw.pipe(body);
  const stop = finished(raw, { writable: false }, (err) => {
    stop();
    if (err) body.destroy(err);
  });
  return body;
}

