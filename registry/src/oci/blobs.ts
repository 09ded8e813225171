/**
 * Blob GET, HEAD and DELETE. Blobs live in the shared content-addressed store, so visibility is
 * global: a digest /v2 holds is served under every repository of every OCI index, and a DELETE
 * removes it for all of them (the spec: "globally, since blobs are shared"). The store is shared
 * with other ecosystems too: /v2 sees only the blobs it holds, and a DELETE releases its hold,
 * removing the bytes only when no other ecosystem holds them.
 */
import { authorizeWrite } from './access.js';
import { OCTET_STREAM, type OciCall } from './context.js';
import { OciError, OciStatusError } from './errors.js';
import { parseDigest } from './names.js';
import { parseRange } from './range.js';

export async function getBlob(call: OciCall, digest: string, head: boolean): Promise<void> {
  const { deps, request, reply } = call;
  const hex = parseDigest(digest);
  const blobs = deps.ctx.stores.blobs;
  const [info, held] = await Promise.all([blobs.stat(hex), deps.holds.isHeld(hex)]);
  // Bytes only another ecosystem holds (a Python file, or a blob /v2 has deleted) are not ours.
  if (!info || !held) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  reply.header('Docker-Content-Digest', `sha256:${hex}`).header('Accept-Ranges', 'bytes').type(OCTET_STREAM);
  const rangeHeader = request.headers.range;
  const wanted = parseRange(typeof rangeHeader === 'string' ? rangeHeader : undefined, info.size);
  if (wanted.kind === 'unsatisfiable') {
    throw new OciStatusError(416, 'RANGE_NOT_SATISFIABLE', `range "${String(rangeHeader)}" cannot be served from ${info.size} bytes`, {
      'Content-Range': `bytes */${info.size}`,
    });
  }
  const range = wanted.kind === 'range' ? wanted.range : undefined;
  const length = range ? range.end - range.start + 1 : info.size;
  reply.header('Content-Length', String(length));
  if (range) reply.code(206).header('Content-Range', `bytes ${range.start}-${range.end}/${info.size}`);
  if (head || length === 0) {
    await reply.send();
    return;
  }
  const stream = await blobs.get(hex, range);
  // Deleted between stat and open.
  if (!stream) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  await reply.send(stream);
}

export async function deleteBlob(call: OciCall, digest: string): Promise<void> {
  const { deps, target, request, reply } = call;
  authorizeWrite(deps.ctx, target.index, request);
  const hex = parseDigest(digest);
  const unknown = () => new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  // Only bytes that came in through /v2 are ours to let go; the bytes go with the last holder.
  const released = await deps.holds.release(hex);
  if (!released.released) throw unknown();
  deps.manifestBytes.forget(hex);
  // Held, but the bytes had already gone missing: absent, as before the hold existed.
  if (released.last && !released.deleted) throw unknown();
  await reply.code(202).header('Content-Length', '0').send();
}
