/**
 * Blob uploads, one handler per row of the spec's state table: the bare POST that opens a
 * session, the cross-repository mount, the monolithic POST `?digest=`, PATCH chunks, the status
 * GET, the committing PUT and the cancelling DELETE. Every verb is a write and needs the upload
 * token of the target hosted index. Every way of creating a blob takes the OCI hold on its
 * digest before the bytes are stored (see storage/holds.ts for why that order).
 */
import { authorizeWrite } from './access.js';
import { blobLocation, hasBody, uploadLocation, uploadRange, type OciCall } from './context.js';
import { OciError, OciStatusError } from './errors.js';
import { parseDigest } from './names.js';
import { parseContentRange } from './range.js';
import type { UploadSession } from './upload-sessions.js';
import { DigestMismatchError } from '../storage/types.js';

export async function startUpload(call: OciCall): Promise<void> {
  const { deps, target, query, request, reply } = call;
  const hosted = authorizeWrite(deps.ctx, target.index, request);
  const blobs = deps.ctx.stores.blobs;

  const mount = query.get('mount');
  if (mount !== null) {
    // A mount is a digest check: blobs are shared, so `from` needs no lookup. Only blobs /v2
    // holds can be mounted, never bytes that only another ecosystem stored.
    const hex = parseDigest(mount);
    const [held, info] = await Promise.all([deps.holds.isHeld(hex), blobs.stat(hex)]);
    if (held && info) {
      await deps.holds.hold(hex);
      await blobCreated(call, hex);
      return;
    }
  }

  const digest = query.get('digest');
  if (digest !== null) {
    const hex = parseDigest(digest);
    // Held before stored. A push that then fails keeps the hold: harmless, since /v2 also needs
    // the bytes to see a blob, and undoing it could drop the hold of a concurrent push.
    await deps.holds.hold(hex);
    try {
      await blobs.put(request.raw, hex);
    } catch (err) {
      if (err instanceof DigestMismatchError) throw new OciError('DIGEST_INVALID', err.message);
      throw err;
    }
    await blobCreated(call, hex);
    return;
  }

  const session = await deps.sessions.open(hosted.name, target.name);
  await reply
    .code(202)
    .header('Location', uploadLocation(target.name, session.id))
    .header('Docker-Upload-UUID', session.id)
    .header('Range', uploadRange(0))
    .header('Content-Length', '0')
    .send();
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
function sessionOf(call: OciCall, id: string): UploadSession {
  const { deps, target, request } = call;
  const hosted = authorizeWrite(deps.ctx, target.index, request);
  const session = deps.sessions.get(id, hosted.name, target.name);
  if (!session) throw new OciError('BLOB_UPLOAD_UNKNOWN', `upload ${id} is unknown (it may have been committed, cancelled or expired)`);
  return session;
}

/** Runs `fn` with the session marked busy; a second request on a busy session is refused. */
async function withSession(call: OciCall, id: string, fn: (s: UploadSession) => Promise<void>): Promise<void> {
  const session = sessionOf(call, id);
  if (session.busy) {
    throw new OciStatusError(416, 'BLOB_UPLOAD_INVALID', `upload ${id} is receiving another request`, progressHeaders(call, session));
  }
  session.busy = true;
  try {
    await fn(session);
  } finally {
    session.busy = false;
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
  await withSession(call, id, async (s) => {
    checkContentRange(call, s);
    await call.deps.sessions.append(s, call.request.raw);
    await call.reply.code(202).headers(progressHeaders(call, s)).header('Content-Length', '0').send();
  });
}

/**
 * Also answers while a chunk is still streaming in (clients poll it then): the range is what the
 * session has committed, which excludes the chunk in flight until it completes.
 */
export async function uploadStatus(call: OciCall, id: string): Promise<void> {
  const s = sessionOf(call, id);
  await call.reply.code(204).headers(progressHeaders(call, s)).send();
}

export async function cancelUpload(call: OciCall, id: string): Promise<void> {
  await withSession(call, id, async (s) => {
    await call.deps.sessions.discard(s);
    await call.reply.code(204).send();
  });
}

export async function commitUpload(call: OciCall, id: string): Promise<void> {
  await withSession(call, id, async (s) => {
    const { deps, query, request } = call;
    const digest = query.get('digest');
    if (digest === null) throw new OciError('DIGEST_INVALID', 'the commit PUT needs a ?digest=sha256:<hex> query parameter');
    const hex = parseDigest(digest);
    const sessions = deps.sessions;
    const cp = sessions.checkpoint(s);
    if (hasBody(request)) {
      checkContentRange(call, s);
      await sessions.append(s, request.raw);
    }
    const actual = sessions.digest(s);
    if (actual !== hex) {
      // The session stays open as it was before this request, so the client can retry the PUT.
      await sessions.rollback(s, cp);
      throw new OciError('DIGEST_INVALID', `uploaded content has digest sha256:${actual}, not sha256:${hex}`);
    }
    await deps.holds.hold(hex);
    await deps.ctx.stores.blobs.putFile(s.spoolPath, hex);
    await sessions.discard(s);
    await blobCreated(call, hex);
  });
}
