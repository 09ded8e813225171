/**
 * What happens to the rest of a request body after the upload was refused early (before the auth
 * check read anything, or when a size limit stopped the spooling). The response goes out at once;
 * the remaining bytes are read and dropped so a client that writes its whole body before reading
 * the answer (requests/twine) still sees it, but only up to a bound: past it the connection is
 * cut, so a refused client cannot make the server read without end.
 */
import type { FastifyRequest } from 'fastify';

const MAX_DISCARD_BYTES = 32 * 1024 * 1024;
const MAX_DISCARD_MS = 30_000;

export function discardRest(request: FastifyRequest): void {
  const req = request.raw;
  if (req.complete || req.destroyed) return;
  // Detach the multipart parser (if it ran) so nothing buffers or waits on the remaining bytes.
  req.unpipe();
  let seen = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, MAX_DISCARD_MS);
  timer.unref();
  const stop = () => clearTimeout(timer);
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > MAX_DISCARD_BYTES) cut();
  });
  req.once('end', stop);
  req.once('close', stop);
  req.resume();
}
