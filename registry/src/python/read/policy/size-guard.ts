/**
 * `max-file-size` for a listed file whose size its page does not give (a cached PEP 503 HTML
 * upstream): it is judged once its real size is known, before any byte leaves the server. That
 * is the stored blob's size, or the length the upstream announces when the file is fetched; the
 * fetch is then refused before its body is read, so an oversized file is neither served nor
 * stored. A transfer of unknown length is cut once it passes the limit (the client gets no file,
 * though no denial either); the shared fetch goes on and stores it, and from then on it is judged.
 */
import { Transform, type Readable } from 'node:stream';
import type { IndexConfig } from '../../../config/types.js';
import { UpstreamError } from '../../../roles/upstream-error.js';
import { UpstreamFileTooLargeError, type FileBody, type FilePart, type ListedFile } from '../source/types.js';
import { assertFileServable, resolvedFacts } from './apply.js';
import { readPolicy } from './effective.js';

export function guardFileSize(index: IndexConfig, listed: ListedFile): ListedFile {
  const maxSize = readPolicy(index).maxFileSize;
  if (maxSize === undefined || listed.file.size !== null) return listed;
  const judge = (size: number) => assertFileServable(index, listed.project, { ...resolvedFacts(listed.file), size });
  return {
    ...listed,
    async open(part: FilePart): Promise<FileBody | null> {
      let body: FileBody | null;
      try {
        body = await listed.open(part, { maxSize });
      } catch (err) {
        if (!(err instanceof UpstreamFileTooLargeError)) throw err;
        judge(err.size);
        // A shared fetch started by a route with a smaller limit: ours would allow the file.
        throw new UpstreamError('too_large', null, `the fetch of ${listed.file.filename} was refused for another index's max-file-size; retry`);
      }
      // The artifact's own size; a metadata sibling is judged by its file's size once that is known.
      if (part !== 'file' || !body) return body;
      if (body.size === undefined && body.kind === 'stream') {
        // No length announced: cut the transfer once it passes the limit (the shared fetch goes
        // on; once stored, the file is judged by its stored size).
        return { ...body, stream: capped(body.stream, maxSize, listed.file.filename) };
      }
      try {
        if (body.size !== undefined) judge(body.size);
      } catch (err) {
        if (body.kind === 'stream') body.stream.destroy();
        throw err;
      }
      return body;
    },
  };
}

/** Passes at most `limit` bytes of `source`; past that the stream fails (the transfer is cut). */
function capped(source: Readable, limit: number, filename: string): Readable {
  let seen = 0;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      done(seen > limit ? new Error(`${filename} passed the max-file-size of ${limit} bytes; transfer cut`) : null, seen > limit ? undefined : chunk);
    },
  });
  source.once('error', (err) => out.destroy(err));
  // Our reader of the shared fetch goes when this does.
  out.once('close', () => source.destroy());
  // The sender listens for errors on a GET; a HEAD only drains the stream.
  out.on('error', () => undefined);
  return source.pipe(out);
}
