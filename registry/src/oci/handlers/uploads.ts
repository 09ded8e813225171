/**
 * Blob uploads, one handler per row of the spec's state table: the bare POST that opens a
 * session, the cross-repository mount, the monolithic POST `?digest=`, PATCH chunks, the status
 * GET, the committing PUT and the cancelling DELETE. Every verb is a write and needs the upload
 * token of the target hosted index. Every way of creating a blob verifies the bytes first, then
 * takes the target repository's hold on the digest (read/index-holds.ts), then stores the bytes
 * (storage/holds.ts says why the hold comes before the store). Never the hold before the
 * verification: a hold that a failed push left behind would show the repository the bytes as soon
 * as any other repository or index stored that digest, to a caller who knew only the digest.
 */
import { readVerdictOf } from './read-access.js';
import type { FastifyRequest } from 'fastify';
import type { IndexConfig } from '../../config/types.js';
import { announcesBody } from '../../http/body-progress.js';
import { declaredLength } from '../../http/declared-length.js';
import { requestBody } from '../../http/request-body.js';
import { DigestMismatchError } from '../../storage/types.js';
import { OciError, OciStatusError } from '../model/errors.js';
import { parseDigest } from '../model/names.js';
import { heldInIndex, viewOf } from '../read/index-holds.js';
import { SessionBusyError, SessionGoneError, type UploadSession } from '../read/uploads/upload-sessions.js';
import { authorizeWrite, resolveName } from './access.js';
import { parseContentRange } from './content-range.js';
import type { OciCall, Target } from './exchange.js';
import { blobLocation, uploadLocation } from './locations.js';
import { ensureQuota, ensureRoom } from './quota.js';

/** The `Range` header of an upload: the inclusive span received so far (`0-0` when empty, as distribution does). */
function uploadRange(size: number): string {
  return `0-${Math.max(size - 1, 0)}`;
}

/**
 * The length the body declares, for the scratch budget to reserve before a byte is read: its
 * Content-Length, else the span of its Content-Range; undefined when neither says (chunked
 * transfer: counted as it streams).
 */
function declaredBody(request: FastifyRequest): number | undefined {
  const length = declaredLength(request.headers);
  if (length !== undefined) return length;
  const range = request.headers['content-range'];
  const span = range === undefined ? null : parseContentRange(range);
  return span === null ? undefined : span.end - span.start + 1;
}

export async function startUpload(call: OciCall): Promise<void> {
  const { deps, target, query, reply } = call;
  const hosted = authorizeWrite(call);

  const mount = query.get('mount');
  if (mount !== null) {
    const hex = parseDigest(mount);
    if (await mountBlob(call, hosted, hex)) {
      await blobCreated(call, hex);
      return;
    }
  }

  const digest = query.get('digest');
  if (digest !== null) {
    const hex = parseDigest(digest);
    await ensureQuota(call, hosted, hex, declaredLength(call.request.headers) ?? 0);
    await monolithic(call, hosted, hex);
    await blobCreated(call, hex);
    return;
  }

  ensureRoom(call, hosted);
  const session = await deps.sessions.open(hosted.name, target.name);
  await reply
    .code(202)
    .header('Location', uploadLocation(target.name, session.id))
    .header('Docker-Upload-UUID', session.id)
    .header('Range', uploadRange(0))
    .header('Content-Length', '0')
    .send();
}

/**
 * A mount is allowed when the target repository already sees the blob; when `from` names a
 * repository, of any OCI index, in which the blob is visible (reads are anonymous, so the caller
 * could pull it from there and push it again, and the mount reveals nothing); or, without `from`
 * (the spec's anonymous mount), when a repository of the target's own index has it, which the
 * caller, who may write to that index, could name as `from`. Anything else (a `from` that does not
 * have it or names no repository, bytes only another index or ecosystem holds) is treated as
 * absent, and an ordinary session opens, as the spec says for a digest that is not stored.
 */
async function mountBlob(call: OciCall, hosted: IndexConfig, hex: string): Promise<boolean> {
  const { deps, target, query } = call;
  const holder = deps.holds.ofRepo(hosted.name, target.repo);
  const holders = await deps.holds.holders(hex);
  const here = viewOf(holders, hosted, target.repo);
  let allowed = here.own || here.legacy;
  if (!allowed && query.get('from') === null) allowed = heldInIndex(holders, hosted);
  if (!allowed) {
    const from = fromRepository(call);
    // Mounting from a private index reads it: only with credentials that read it (read-access.ts).
    allowed = from !== null && readVerdictOf(deps, call.credentials, from.index, from.name).kind === 'reads' && (await deps.holds.visible(from.index, from.repo, hex));
  }
  if (!allowed) return false;
  const size = (await deps.blobs.stat(hex))?.size;
  if (size !== undefined) await ensureQuota(call, hosted, hex, size);
  // Held before the bytes are checked (storage/holds.ts): a release racing the mount either leaves
  // the bytes to this hold or has deleted them before the check, and the session opens. The hold
  // then left without bytes reveals nothing: the caller could read those bytes a moment ago.
  await holder.hold(hex, size);
  return (await deps.blobs.stat(hex)) !== null;
}

/** The repository the `from` parameter names, or null when it names none (a bad `from` is ignored). */
function fromRepository(call: OciCall): Target | null {
  const from = call.query.get('from');
  if (from === null) return null;
  try {
    return resolveName(call.deps.ociIndexes, from.split('/'));
  } catch (err) {
    if (err instanceof OciError) return null;
    throw err;
  }
}

function digestMismatch(actual: string, hex: string): OciError {
  return new OciError('DIGEST_INVALID', `uploaded content has digest sha256:${actual}, not sha256:${hex}`);
}

/**
 * The monolithic POST `?digest=`: one request, so the process's own staged write serves on every
 * backend. The digest is verified before the index holds it.
 */
async function monolithic(call: OciCall, hosted: IndexConfig, hex: string): Promise<void> {
  const declared = declaredBody(call.request);
  const stage = await call.deps.blobs.stage({ expected: hex, ...(declared === undefined ? {} : { declared }) });
  try {
    await stage.append(requestBody(call.request.raw), { expect: hex });
    await ensureQuota(call, hosted, hex, stage.size);
    await call.deps.holds.ofRepo(hosted.name, call.target.repo).hold(hex, stage.size);
    await stage.commit(hex);
  } catch (err) {
    if (err instanceof DigestMismatchError) throw digestMismatch(err.actual, hex);
    throw err;
  } finally {
    await stage.abort();
  }
}

/** The 201 that ends every way of creating a blob: POST `?digest=`, a mount, the committing PUT. */
async function blobCreated(call: OciCall, hex: string): Promise<void> {
  await call.reply
    .code(201)
    .header('Location', blobLocation(call.target.name, hex))
    .header('Docker-Content-Digest', `sha256:${hex}`)
    .header('Content-Length', '0')
    .send();
}

/** The session of an authorised write, or BLOB_UPLOAD_UNKNOWN. */
async function sessionOf(call: OciCall, id: string): Promise<UploadSession> {
  const { deps, target } = call;
  const hosted = authorizeWrite(call);
  const session = await deps.sessions.get(id, hosted.name, target.name);
  if (!session) throw unknownUpload(id);
  return session;
}

function unknownUpload(id: string): OciError {
  return new OciError('BLOB_UPLOAD_UNKNOWN', `upload ${id} is unknown (it may have been committed, cancelled or expired)`);
}

/**
 * Runs a change of the session `id`. Another request using or changing the session at the same
 * time gets the spec's 416 with the range the session has; one that ended it meanwhile, 404.
 */
async function changing(call: OciCall, id: string, fn: (s: UploadSession) => Promise<void>): Promise<void> {
  const session = await sessionOf(call, id);
  try {
    await fn(session);
  } catch (err) {
    if (err instanceof SessionBusyError) {
      throw new OciStatusError(416, 'BLOB_UPLOAD_INVALID', `upload ${id} is receiving another request`, progressHeaders(call, err.current));
    }
    if (err instanceof SessionGoneError) throw unknownUpload(id);
    throw err;
  }
}

function progressHeaders(call: OciCall, s: UploadSession): Record<string, string> {
  return { Location: uploadLocation(call.target.name, s.id), 'Docker-Upload-UUID': s.id, Range: uploadRange(s.size) };
}

/** A chunk must start where the last one ended (see `parseContentRange` for the forms accepted). */
function checkContentRange(call: OciCall, s: UploadSession): void {
  const header = call.request.headers['content-range'];
  if (header === undefined) return;
  if (parseContentRange(header)?.start !== s.size) {
    throw new OciStatusError(
      416,
      'BLOB_UPLOAD_INVALID',
      `Content-Range "${header}" does not start at byte ${s.size}, the end of what this upload has received`,
      progressHeaders(call, s),
    );
  }
}

export async function patchUpload(call: OciCall, id: string): Promise<void> {
  await changing(call, id, async (s) => {
    checkContentRange(call, s);
    const hosted = call.deps.indexByName.get(s.indexName);
    if (hosted) await ensureQuota(call, hosted, null, s.size + (declaredLength(call.request.headers) ?? 0));
    const after = await call.deps.sessions.append(s, requestBody(call.request.raw), declaredBody(call.request));
    await call.reply.code(202).headers(progressHeaders(call, after)).header('Content-Length', '0').send();
  });
}

/**
 * Also answers while a chunk is still streaming in (clients poll it then): the range is what the
 * session has committed, which excludes the chunk in flight until it completes.
 */
export async function uploadStatus(call: OciCall, id: string): Promise<void> {
  const s = await sessionOf(call, id);
  await call.reply.code(204).headers(progressHeaders(call, s)).send();
}

export async function cancelUpload(call: OciCall, id: string): Promise<void> {
  await changing(call, id, async (s) => {
    await call.deps.sessions.cancel(s);
    await call.reply.code(204).send();
  });
}

export async function commitUpload(call: OciCall, id: string): Promise<void> {
  await changing(call, id, async (s) => {
    const { deps, query, request, target } = call;
    const digest = query.get('digest');
    if (digest === null) throw new OciError('DIGEST_INVALID', 'the commit PUT needs a ?digest=sha256:<hex> query parameter');
    const hex = parseDigest(digest);
    const last = announcesBody(request.raw) ? requestBody(request.raw) : null;
    if (last !== null) checkContentRange(call, s);
    try {
      // Verified first; the repository holds the digest before the bytes are published
      // (storage/holds.ts). The session belongs to this very name (`sessionOf`), so to this repository.
      await deps.sessions.commit(s, hex, last, async (size) => {
        const hosted = deps.indexByName.get(s.indexName);
        if (hosted) await ensureQuota(call, hosted, hex, size);
        await deps.holds.ofRepo(s.indexName, target.repo).hold(hex, size);
      }, last === null ? undefined : declaredBody(request));
    } catch (err) {
      // The session stays open as it was before this request, so the client can retry the PUT.
      if (err instanceof DigestMismatchError) throw digestMismatch(err.actual, hex);
      throw err;
    }
    await blobCreated(call, hex);
  });
}
