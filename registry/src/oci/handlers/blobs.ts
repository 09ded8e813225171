/**
 * Blob GET, HEAD and DELETE. Blobs live once in the shared content-addressed store, but a
 * repository sees only the blobs it holds (pushed or mounted there, or named by one of its
 * manifests; for a virtual index, held by a member for that repository; read/index-holds.ts). A
 * DELETE releases the repository's hold, unless one of its manifests still names the blob
 * (read/hosted/references.ts), and the bytes go only when no other repository, index or ecosystem
 * holds them.
 */
import { Readable } from 'node:stream';
import { contentRange, parseRange, unsatisfiedRange } from '../../http/range.js';
import { reportIfRejected, reportRejectedRead } from '../../http/verified-read.js';
import { OciError, OciStatusError } from '../model/errors.js';
import { parseDigest } from '../model/names.js';
import { SMALL_BLOB_BYTES } from '../read/blob-bytes.js';
import type { BlobPull } from '../read/cached/blobs.js';
import { REQUEST_READ, type ReadOptions } from '../../storage/types.js';
import { referencingManifest } from '../read/hosted/references.js';
import { noteWrite } from '../../access/auth.js';
import { authorizeWriteBy } from './access.js';
import type { OciCall } from './exchange.js';

const OCTET_STREAM = 'application/octet-stream';

export async function getBlob(call: OciCall, digest: string, head: boolean): Promise<void> {
  const hex = parseDigest(digest);
  const lookedAt = Date.now();
  const stored = await serveStored(call, hex, head, REQUEST_READ);
  if (stored === 'served') return;
  // A miss: the index's cached members pull it through (read/cached/blobs.ts), in lookup order.
  const range = typeof call.request.headers.range === 'string' ? call.request.headers.range : undefined;
  // Found not stored: the pull need not look again, unless a flight ended since (`BlobWant.lookedAt`).
  const notStored = stored === 'not_stored';
  for (const cached of await call.deps.members.pullThrough(call.target.index, call.target.repo)) {
    const pulled = await cached.blobs.pull(call.target.repo, hex, { head, ...(range !== undefined ? { range } : {}), ...(notStored ? { notStored, lookedAt } : {}) });
    if (pulled.kind === 'unknown') continue;
    if (pulled.kind === 'stored') {
      // Just pulled (here or by another process): read what the store has now.
      if ((await serveStored(call, hex, head, {})) === 'served') return;
      continue;
    }
    await sendPulled(call, hex, pulled);
    return;
  }
  throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
}

/**
 * The answer for bytes a cached member is pulling through: the whole blob as it arrives (a
 * download), or the upstream's answer to a HEAD or a range, passed on as it came.
 */
async function sendPulled(call: OciCall, hex: string, pulled: Extract<BlobPull, { kind: 'fetched' | 'passed' }>): Promise<void> {
  const { reply } = call;
  if (pulled.kind === 'passed') reply.code(pulled.status);
  reply.header('Docker-Content-Digest', `sha256:${hex}`).header('Accept-Ranges', 'bytes').type(OCTET_STREAM);
  if (pulled.kind === 'passed') {
    if (pulled.contentLength !== undefined) reply.header('content-length', pulled.contentLength);
    if (pulled.contentRange !== undefined) reply.header('content-range', pulled.contentRange);
    await reply.send(pulled.body ?? undefined);
    return;
  }
  if (pulled.size !== undefined) reply.header('Content-Length', String(pulled.size));
  const repo = call.target.repo.join('/');
  const counters = call.deps.counters.index(call.target.index.route);
  counters.add('downloads', 1, repo, `sha256:${hex}`);
  if (pulled.size !== undefined) counters.add('bytes', pulled.size, repo, `sha256:${hex}`);
  call.deps.recentUse.downloaded(call.target.index, hex, pulled.size ?? 0);
  await reply.send(pulled.body);
}

/**
 * What `serveStored` did: served the blob; found no bytes of it in the store (`not_stored`); or
 * did not serve it otherwise (this index does not hold it, or bytes went meanwhile).
 */
type StoredAnswer = 'served' | 'not_stored' | 'not_served';

/** Serves `hex` from the store when the index holds it. `reads`: how its holds may be read. */
async function serveStored(call: OciCall, hex: string, head: boolean, reads: ReadOptions): Promise<StoredAnswer> {
  const { deps, request } = call;
  const size = deps.blobSizes.get(hex);
  const rangeHeader = typeof request.headers.range === 'string' ? request.headers.range : undefined;
  // A warm GET with the size known: the hold and the bytes are asked for together (one round
  // trip; for a small blob the bytes come from memory after the first read, and only the hold is
  // read). Not with redirects on, where a large GET needs no stream at all.
  if (size !== undefined && !head && !deps.redirect) {
    const wanted = parseRange(rangeHeader, size);
    if (wanted.kind !== 'unsatisfiable') {
      const range = wanted.kind === 'partial' ? { start: wanted.start, end: wanted.end } : undefined;
      if (size > 0 && size <= SMALL_BLOB_BYTES) return (await serveSmall(call, hex, size, range, reads)) ? 'served' : 'not_served';
      const [held, stream] = await holdAndBytes(deps.holds.visible(call.target.index, call.target.repo, hex, reads), size === 0 ? null : deps.blobs.get(hex, range));
      if (!held || (size > 0 && !stream)) {
        stream?.destroy();
        return 'not_served';
      }
      await send(call, hex, size, range, stream);
      return 'served';
    }
  }
  const blobs = deps.blobs;
  const visible = () => deps.holds.visible(call.target.index, call.target.repo, hex, reads);
  // A GET looks for the bytes first: with none stored (a cold pull-through) the hold is not read,
  // and with them the hold is read beside the bytes (as many round trips as both at once, then the
  // bytes). A HEAD asks for both at once: one round trip.
  const [info, heldFirst] = await Promise.all([blobs.stat(hex), head ? visible() : undefined]);
  if (!info) return 'not_stored';
  deps.blobSizes.set(hex, info.size);
  const wanted = parseRange(rangeHeader, info.size);
  const range = wanted.kind === 'partial' ? { start: wanted.start, end: wanted.end } : undefined;
  const length = range ? range.end - range.start + 1 : info.size;
  // With redirects on, a whole GET may need no stream at all (`redirect.ts`).
  const streamed = !head && wanted.kind !== 'unsatisfiable' && length > 0 && !deps.redirect;
  const [held, opened] = heldFirst !== undefined ? [heldFirst, null] : await holdAndBytes(visible(), streamed ? blobs.get(hex, range) : null);
  // Bytes only another repository, index or ecosystem holds (a Python file, a blob this repository deleted) are not ours.
  if (!held) {
    opened?.destroy();
    return 'not_served';
  }
  if (wanted.kind === 'unsatisfiable') {
    throw new OciStatusError(416, 'RANGE_NOT_SATISFIABLE', `range "${String(rangeHeader)}" cannot be served from ${info.size} bytes`, {
      'Content-Range': unsatisfiedRange(info.size),
    });
  }
  // A full GET of a large blob goes to the object store itself, when configured (`redirect.ts`).
  const url = !head && !range ? await deps.redirect?.urlFor(info) : null;
  if (url) {
    countDownload(call, hex, info.size);
    await call.reply
      .code(307)
      .header('Docker-Content-Digest', `sha256:${hex}`)
      .header('Location', url)
      .header('Content-Length', '0')
      .header('Cache-Control', 'no-store')
      .type(OCTET_STREAM)
      .send();
    return 'served';
  }
  if (head || length === 0) {
    await send(call, hex, info.size, range, null);
    return 'served';
  }
  const stream = streamed ? opened : await blobs.get(hex, range);
  // Deleted between stat and open.
  if (!stream) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  await send(call, hex, info.size, range, stream);
  return 'served';
}

/** A warm GET of a small blob: its bytes by digest from memory (read whole from the store once). */
async function serveSmall(call: OciCall, hex: string, size: number, range: { start: number; end: number } | undefined, reads: ReadOptions): Promise<boolean> {
  const { deps } = call;
  const counters = deps.counters.index(call.target.index.route);
  const bytes = deps.blobBytes.get(hex).catch((err: unknown) => {
    reportIfRejected(err, call.request.log, () => counters.add('rejected', 1, call.target.repo.join('/'), `sha256:${hex}`));
    throw err;
  });
  const [held, whole] = await Promise.all([deps.holds.visible(call.target.index, call.target.repo, hex, reads), bytes]);
  if (!held || !whole) return false;
  const part = range ? whole.subarray(range.start, range.end + 1) : whole;
  await send(call, hex, size, range, part);
  return true;
}

/**
 * The hold and the bytes, asked for at once. When the hold read fails, the bytes' stream, if it
 * opened, is destroyed: left alone it would hold its store connection until the store's deadline.
 * (When the bytes' read fails there is no stream to destroy.)
 */
export async function holdAndBytes(hold: Promise<boolean>, bytes: Promise<Readable | null> | null): Promise<[boolean, Readable | null]> {
  const [held, opened] = await Promise.allSettled([hold, bytes]);
  if (held.status === 'rejected') {
    if (opened.status === 'fulfilled') opened.value?.destroy();
    throw held.reason;
  }
  if (opened.status === 'rejected') throw opened.reason;
  return [held.value, opened.value];
}

/** The answer for a held blob of `size` bytes: headers, and the bytes when `body` is given. */
async function send(call: OciCall, hex: string, size: number, range: { start: number; end: number } | undefined, body: Readable | Buffer | null): Promise<void> {
  const { reply, request } = call;
  const length = range ? range.end - range.start + 1 : size;
  reply.header('Docker-Content-Digest', `sha256:${hex}`).header('Accept-Ranges', 'bytes').type(OCTET_STREAM).header('Content-Length', String(length));
  if (range) reply.code(206).header('Content-Range', contentRange(range, size));
  if (!body) {
    await reply.send();
    return;
  }
  // GETs only: clients HEAD a blob to learn whether to push it, which is no download.
  countDownload(call, hex, length);
  if (body instanceof Readable) {
    const repo = call.target.repo.join('/');
    const counters = call.deps.counters.index(call.target.index.route);
    reportRejectedRead(body, request.log, () => counters.add('rejected', 1, repo, `sha256:${hex}`));
  }
  await reply.send(body);
}

function countDownload(call: OciCall, hex: string, bytes: number): void {
  const counters = call.deps.counters.index(call.target.index.route);
  const repo = call.target.repo.join('/');
  counters.add('downloads', 1, repo, `sha256:${hex}`);
  counters.add('bytes', bytes, repo, `sha256:${hex}`);
  // For the budget of the cached index holding it (lifecycle/budget/).
  call.deps.recentUse.downloaded(call.target.index, hex, bytes);
}

/**
 * Lets go of the repository's hold on a blob. Refused (405 UNSUPPORTED, as the distribution spec
 * allows for a blob DELETE and its conformance suites accept) while a manifest of the repository
 * names it, and for bytes an earlier version held for the whole index, which no repository's
 * DELETE releases; either way the bytes and what sees them stay as they were.
 */
export async function deleteBlob(call: OciCall, digest: string): Promise<void> {
  const { deps, reply, target } = call;
  const { hosted, credential } = authorizeWriteBy(call);
  const hex = parseDigest(digest);
  const unknown = () => new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored in ${target.name}`);
  // RFC 9110: a 405 names the methods the resource has now.
  const refuse = (message: string, detail: Record<string, string>) => new OciError('UNSUPPORTED', message, { Allow: 'GET, HEAD' }, detail);
  const held = await deps.holds.inRepo(hosted, target.repo, hex);
  if (held.legacy) {
    throw refuse(
      `blob sha256:${hex} was stored for all of index "${hosted.name}" by an earlier version of velodex, so no repository's DELETE removes it; it stays until garbage collection`,
      { digest: `sha256:${hex}` },
    );
  }
  if (!held.own) throw unknown();
  const referrer = await referencingManifest({ repos: deps.members.hosted(hosted), holds: deps.holds, blobBytes: deps.blobBytes }, target.repo, hex);
  if (referrer !== undefined) {
    throw refuse(`blob sha256:${hex} is still referenced by manifest sha256:${referrer} in ${target.name}; delete that manifest first`, {
      digest: `sha256:${hex}`,
      manifest: `sha256:${referrer}`,
    });
  }
  // Only this repository's hold is ours to let go; the bytes go with the last holder.
  const released = await deps.holds.ofRepo(hosted.name, target.repo).release(hex);
  if (!released.released) throw unknown();
  if (released.last) deps.blobBytes.forget(hex);
  // Held, but the bytes had already gone missing: absent, as before the hold existed.
  if (released.last && !released.deleted) throw unknown();
  noteWrite(call.request, deps.clientAddress, target.index, credential, `delete ${target.name}@sha256:${hex} (blob)`);
  await reply.code(202).header('Content-Length', '0').send();
}
