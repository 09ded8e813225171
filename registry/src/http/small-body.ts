/**
 * Reads a request body that is a small document (a JSON request, a reason): at most `max` bytes,
 * refused with a 400 naming `what` the moment it passes that, whatever the length it announced.
 * Artifacts never come through here: their bodies stay streams.
 */
import type { IncomingMessage } from 'node:http';
import { HttpError } from './errors.js';

export async function readSmallBody(raw: IncomingMessage, max: number, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of raw) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > max) throw new HttpError(400, `the body is larger than ${max} bytes; ${what}`);
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString('utf8');
}
