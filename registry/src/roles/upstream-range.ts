/**
 * Random access to one upstream file through HTTP `Range` requests, for reading a few parts of a
 * large file (an archive's index and one member) without downloading it. Every read goes through
 * the index's `UpstreamClient`, so its slots, credentials and deadlines apply.
 *
 * `openRanged` probes with a one-byte range first: only a 206 with a well-formed `Content-Range`
 * counts as range support; anything else (a 200 with the whole body, a bad header) is null, and
 * the caller reads the file whole instead. Every later read must come back as exactly the range
 * asked for, and all reads together may not exceed a byte budget. A read that cannot be used
 * fails with an `UpstreamError` of kind `range` (`rangeFailure`): the caller reads the file whole.
 */
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { SlotsBusyError } from '../limits/slots.js';
import { discard, header, type UpstreamClient, type UpstreamResponse } from './upstream.js';
import { UpstreamError } from './upstream-error.js';

/** A file readable by byte ranges (both ends inclusive); the shape archive readers take. */
export interface RangedFile {
  readonly size: number;
  open(range?: { start: number; end: number }): Promise<Readable>;
}

export interface RangedOptions {
  /** Bytes all reads together may fetch; past it a read fails. */
  budget: number;
  /** The size the file must have, when known. */
  expectedSize?: number;
}

/** A range read that cannot be used: the caller falls back to reading the file whole. */
function rangeFailure(message: string): UpstreamError {
  return new UpstreamError('range', null, message);
}

const CONTENT_RANGE = /^bytes (\d+)-(\d+)\/(\d+)$/;

function parseContentRange(res: UpstreamResponse): { start: number; end: number; total: number } | null {
  const m = CONTENT_RANGE.exec(header(res.headers, 'content-range')?.trim() ?? '');
  if (!m) return null;
  const [start, end, total] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (![start, end, total].every(Number.isSafeInteger) || start > end || end >= total) return null;
  return { start, end, total };
}

async function getRange(client: UpstreamClient, url: string, start: number, end: number): Promise<UpstreamResponse> {
  return client.get(url, { headers: { range: `bytes=${start}-${end}` } });
}

/** Null when the upstream does not serve ranges of `url` (or the file is not the expected size). */
export async function openRanged(client: UpstreamClient, url: string, opts: RangedOptions): Promise<RangedFile | null> {
  const probe = await getRange(client, url, 0, 0);
  const range = probe.status === 206 ? parseContentRange(probe) : null;
  // A one-byte body is read off (the connection stays usable); anything else, such as a 200
  // with the whole file, is cut.
  if (range) discard(probe);
  else probe.body.destroy();
  if (!range || range.start !== 0 || range.end !== 0) return null;
  if (opts.expectedSize !== undefined && range.total !== opts.expectedSize) return null;
  const size = range.total;
  let spent = 1;
  return {
    size,
    async open(want) {
      if (!want) throw rangeFailure('a ranged file is never read whole');
      const length = want.end - want.start + 1;
      if (want.start < 0 || length <= 0 || want.end >= size) throw rangeFailure(`bytes ${want.start}-${want.end} are outside the file`);
      spent += length;
      if (spent > opts.budget) throw rangeFailure(`more than ${opts.budget} bytes would be read by ranges`);
      const res = await getRange(client, url, want.start, want.end);
      const got = res.status === 206 ? parseContentRange(res) : null;
      if (!got || got.start !== want.start || got.end !== want.end || got.total !== size) {
        res.body.destroy();
        throw rangeFailure(`the upstream answered ${res.status} to a range request, not the range asked for`);
      }
      const out = exactLength(length);
      // pipeline carries errors both ways and frees the upstream body (and its slot) on either end.
      pipeline(res.body, out, () => undefined);
      return out;
    },
  };
}

/** Passes exactly `length` bytes; more, or an end before that, is an error. */
function exactLength(length: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      seen += chunk.length;
      if (seen > length) done(rangeFailure(`a range response is longer than the ${length} bytes asked for`));
      else done(null, chunk);
    },
    flush(done: TransformCallback) {
      done(seen === length ? null : rangeFailure(`a range response ended after ${seen} of ${length} bytes`));
    },
  });
}

/** Our own slot cap's 429 is an answer for the client, never a reason to fall back. */
export function isSlotDenial(err: unknown): boolean {
  return err instanceof SlotsBusyError;
}
