/**
 * Drives busboy over a `multipart/form-data` request body and hands every part, text field or
 * file alike, to one callback as a stream, one part at a time. The returned promise settles on
 * every way a body can end: whole, truncated, malformed, cut off by the client, or refused by the
 * callback.
 *
 * Why not @fastify/multipart's `request.parts()`: its count limits (`fields`, `parts`) answered a
 * busy form by destroying the file stream the handler was about to read. A destroyed stream that
 * had already received all its bytes counts as finished for `stream.pipeline`, yet never ends
 * the streams piped from it, so the spool never settled and the request hung (twine with ~190
 * classifiers). Here no count limit exists (the caller bounds the bytes), and a failure destroys
 * open part streams *with an error*, which every consumer sees.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { Busboy, type BusboyInstance } from '@fastify/busboy';
import { badUpload } from './errors.js';

export interface FormPart {
  /** The `name` of the part's Content-Disposition; undefined when it has none. */
  name: string | undefined;
  /** The `filename`, for file parts; undefined for text fields. */
  filename: string | undefined;
  /** The part's bytes. The callback must read it to the end (or fail). */
  stream: Readable;
}

/** Headers of one part, bounded so a part header cannot grow without end. */
const MAX_PART_HEADER_BYTES = 16 * 1024;
const MAX_PART_HEADER_PAIRS = 32;

export function readFormParts(request: IncomingMessage, onPart: (part: FormPart) => Promise<void>): Promise<void> {
  let parser: BusboyInstance;
  try {
    parser = Busboy({
      headers: request.headers as Parameters<typeof Busboy>[0]['headers'],
      // Every part is a stream, so text fields are bounded by the caller while they arrive.
      isPartAFile: () => true,
      limits: { headerSize: MAX_PART_HEADER_BYTES, headerPairs: MAX_PART_HEADER_PAIRS },
    });
  } catch (err) {
    // No boundary, a boundary over 70 characters busboy cannot search for, not multipart at all.
    return Promise.reject(badUpload(`malformed multipart/form-data Content-Type: ${messageOf(err)}`));
  }

  return new Promise<void>((resolve, reject) => {
    const open = new Set<Readable>();
    let queue: Promise<void> = Promise.resolve();
    let failure: Error | undefined;
    let parsed = false;
    let received = false;

    const fail = (err: unknown): void => {
      if (failure) return;
      failure = err instanceof Error ? err : new Error(String(err));
      request.unpipe(parser);
      // With an error: a stream destroyed without one after its last byte looks finished to
      // `pipeline`, which then waits forever for the end it never passes on.
      for (const stream of open) stream.destroy(failure);
      open.clear();
      const settled = failure;
      void queue.finally(() => reject(settled));
    };
    const succeedWhenDone = (): void => {
      if (!parsed || !received || failure) return;
      void queue.then(() => {
        if (failure) reject(failure);
        else resolve();
      });
    };

    parser.on('file', (name: string | undefined, stream: Readable, filename: string | undefined) => {
      open.add(stream);
      stream.once('close', () => open.delete(stream));
      // Consumers see errors through their own pipeline; a part still waiting its turn must not
      // crash the process with an unhandled 'error' when the body is cut short.
      stream.on('error', () => undefined);
      queue = queue
        .then(async () => {
          if (failure) {
            stream.resume();
            return;
          }
          await onPart({ name, filename, stream });
        })
        .catch(fail);
    });
    parser.on('error', (err: unknown) => fail(badUpload(`the multipart form is malformed or incomplete: ${messageOf(err)}`)));
    parser.on('finish', () => {
      parsed = true;
      succeedWhenDone();
    });
    request.on('end', () => {
      received = true;
      succeedWhenDone();
    });
    request.on('error', (err) => fail(badUpload(`the upload body could not be read: ${err.message}`)));
    request.on('close', () => {
      if (!request.complete) fail(badUpload('the upload body ended early: the connection closed before the whole form arrived'));
    });
    request.pipe(parser);
  });
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
