/**
 * Blob GET, HEAD and DELETE. Blobs live once in the shared content-addressed store, but each OCI
 * index sees only the blobs it (or a member of it) holds, under every repository of the index;
 * a DELETE releases the writing index's hold, and the bytes go only when no other index and no
 * other ecosystem holds them (index-holds.ts).
 */
import { authorizeWrite } from './access.js';
import { OCTET_STREAM, type OciCall } from './context.js';
import { OciError, OciStatusError } from './errors.js';
import { parseDigest } from './names.js';
import { reportRejectedRead } from '../http/verified-read.js';
import { contentRange, parseRange, unsatisfiedRange } from '../http/range.js';

export async function getBlob(call: OciCall, digest: string, head: boolean): Promise<void> {
  const hex = parseDigest(digest);
  if (await serveStored(call, hex, head)) return;
  // A miss: the index's cached members pull it through (cached-blobs.ts), in lookup order.
  for (const cached of await call.deps.members.pullThrough(call.target.index, call.target.repo)) {
    const done = await cached.blobs.serve(call, call.target.repo, hex, head);
    if (done === 'served') return;
    if (done === 'stored' && (await serveStored(call, hex, head))) return;
  }
  throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
}

/** Serves `hex` from the store; false when the index does not hold it. */
async function serveStored(call: OciCall, hex: string, head: boolean): Promise<boolean> {
  const { deps, request, reply } = call;
  const blobs = deps.ctx.stores.blobs;
  const [info, held] = await Promise.all([blobs.stat(hex), deps.holds.visible(call.target.index, hex)]);
  // Bytes only another index or ecosystem holds (a Python file, a blob this index deleted) are not ours.
  if (!info || !held) return false;
  reply.header('Docker-Content-Digest', `sha256:${hex}`).header('Accept-Ranges', 'bytes').type(OCTET_STREAM);
  const rangeHeader = request.headers.range;
  const wanted = parseRange(typeof rangeHeader === 'string' ? rangeHeader : undefined, info.size);
  if (wanted.kind === 'unsatisfiable') {
    throw new OciStatusError(416, 'RANGE_NOT_SATISFIABLE', `range "${String(rangeHeader)}" cannot be served from ${info.size} bytes`, {
      'Content-Range': unsatisfiedRange(info.size),
    });
  }
  const range = wanted.kind === 'partial' ? { start: wanted.start, end: wanted.end } : undefined;
  const counters = deps.ctx.counters.index(call.target.index.route);
  const repo = call.target.repo.join('/');
  // A full GET of a large blob goes to the object store itself, when configured (`redirect.ts`).
  const url = !head && !range ? await deps.ctx.stores.redirect?.urlFor(info) : null;
  if (url) {
    counters.add('downloads', 1, repo, `sha256:${hex}`);
    counters.add('bytes', info.size, repo, `sha256:${hex}`);
    await reply.code(307).header('Location', url).header('Content-Length', '0').header('Cache-Control', 'no-store').removeHeader('Accept-Ranges').send();
    return true;
  }
  const length = range ? range.end - range.start + 1 : info.size;
  reply.header('Content-Length', String(length));
  if (range) reply.code(206).header('Content-Range', contentRange(range, info.size));
  if (head || length === 0) {
    await reply.send();
    return true;
  }
  const stream = await blobs.get(hex, range);
  // Deleted between stat and open.
  if (!stream) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  // GETs only: clients HEAD a blob to learn whether to push it, which is no download.
  counters.add('downloads', 1, repo, `sha256:${hex}`);
  counters.add('bytes', length, repo, `sha256:${hex}`);
  reportRejectedRead(stream, request.log, () => counters.add('rejected', 1, repo, `sha256:${hex}`));
  await reply.send(stream);
  return true;
}

export async function deleteBlob(call: OciCall, digest: string): Promise<void> {
  const { deps, reply } = call;
  const hosted = authorizeWrite(call);
  const hex = parseDigest(digest);
  const unknown = () => new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  // Only this index's hold is ours to let go; the bytes go with the last holder.
  const released = await deps.holds.of(hosted.name).release(hex);
  if (!released.released) throw unknown();
  deps.manifestBytes.forget(hex);
  // Held, but the bytes had already gone missing: absent, as before the hold existed.
  if (released.last && !released.deleted) throw unknown();
  await reply.code(202).header('Content-Length', '0').send();
}
