/**
 * What a route does when a stored blob it reads fails verification (`storage/verify.ts`): the
 * read errors with `DigestMismatchError` instead of ending. A streamed response then becomes a
 * cut connection (fastify destroys it; a 500 when no byte was sent yet). Here the event is
 * counted once as `rejected` for the index and logged, so `/metrics` and `/+stats` show a store
 * that holds bad bytes.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Readable } from 'node:stream';
import { DigestMismatchError } from '../storage/types.js';

/** Watches a stream that `BlobStore.get` returned. */
export function reportRejectedRead(stream: Readable, log: FastifyBaseLogger, onRejected: () => void): void {
  stream.once('error', (err) => reportIfRejected(err, log, onRejected));
}

/** Counts and logs `err` when it is a failed verification; anything else is left to the caller. */
export function reportIfRejected(err: unknown, log: FastifyBaseLogger, onRejected: () => void): void {
  if (!(err instanceof DigestMismatchError)) return;
  onRejected();
  log.error(
    { event: 'rejected', expected: `sha256:${err.expected}`, actual: `sha256:${err.actual}` },
    'stored bytes failed digest verification on their way out; not served (the object in the store was changed: restore it from a backup)',
  );
}
