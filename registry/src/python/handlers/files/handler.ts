/**
 * `GET`/`HEAD /{route}/files/{sha256}/{filename}` (artifact bytes), `.../{filename}.metadata`
 * (the PEP 658 core-metadata sibling) and `.../{filename}.asc` (a cached file's signature). A file is served only if this index lists it with that
 * sha256 (whatever its role: see `read/source/types.ts`); stored bytes stream from the blob store,
 * with single-range support; bytes still arriving from an upstream stream as they come.
 */
import type { RecentUse } from '../../../lifecycle/budget/recent-use.js';
import type { IndexConfig } from '../../../config/types.js';
import type { IndexRequest } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { isSha256Hex, type BlobRedirect, type BlobStore } from '../../../storage/types.js';
import { reportRejectedRead } from '../../../http/verified-read.js';
import { answeredNotModified, etagMatches } from '../../../http/conditional.js';
import { contentRange, parseRange, unsatisfiedRange } from '../../../http/range.js';
import type { ProjectSource } from '../project-source.js';
import { assertFileServable, resolvedFacts } from '../../read/policy/apply.js';
import { guardFileSize } from '../../read/policy/size-guard.js';
import type { FileBody, FilePart, ListedFile } from '../../read/source/types.js';

/** URL suffixes of a file's siblings; no distribution filename ends in one. */
const SIBLINGS: ReadonlyArray<{ suffix: string; part: FilePart; contentType: string; counter: 'metadata' | null }> = [
  { suffix: '.metadata', part: 'metadata', contentType: 'text/plain; charset=utf-8', counter: 'metadata' },
  { suffix: '.asc', part: 'signature', contentType: 'application/pgp-signature', counter: null },
];
const ARTIFACT = { suffix: '', part: 'file', contentType: 'application/octet-stream', counter: 'downloads' } as const;

/** The stored bytes files are read from, and where clients may fetch large ones themselves. */
export interface FileStore {
  blobs: BlobStore;
  redirect: BlobRedirect | null;
}

export async function serveFile(source: ProjectSource, store: FileStore, req: IndexRequest, sha256: string, filename: string, recentUse: Pick<RecentUse, 'downloaded'>): Promise<void> {
  const notFound = () => new HttpError(404, `no file ${sha256}/${filename} in index ${req.index.name}`);
  if (!isSha256Hex(sha256)) throw notFound();
  const wanted = SIBLINGS.find((s) => filename.endsWith(s.suffix)) ?? ARTIFACT;
  const artifact = filename.slice(0, filename.length - wanted.suffix.length);
  // Policy applies to the file and its siblings alike.
  const listed = await findServableFile(source, req.index, sha256, artifact);
  if (!listed) throw notFound();
  const body = await listed.open(wanted.part);
  const { project } = listed;
  // Per project and per file too (`/+stats`); a sibling counts for its artifact. For the budget
  // of the cached index holding it (lifecycle/budget/). Once the bytes are known to be there.
  const counted = (size: number) => {
    if (wanted.counter) source.count(req.index.name, wanted.counter, 1, project, artifact);
    if (wanted.part === 'file') recentUse.downloaded(req.index, sha256, size);
  };
  if (body?.kind === 'stream') {
    counted(body.size ?? 0);
    sendStream(req, body, wanted.contentType);
    source.count(req.index.name, 'bytes', body.size ?? 0, project, artifact);
    return;
  }
  const sent = body ? await sendBlob(store, req, body, wanted.contentType, counted, () => source.count(req.index.name, 'rejected', 1, project, artifact)) : null;
  if (sent === null) {
    if (wanted.part === 'file') req.request.log.warn({ sha256, filename }, 'a listed file has no bytes');
    throw notFound();
  }
  source.count(req.index.name, 'bytes', sent, project, artifact);
}

/** The file this index lists under `filename` with these bytes (any role), else null. */
export async function findFile(source: ProjectSource, indexName: string, sha256: string, filename: string): Promise<ListedFile | null> {
  return source.sourceFor(indexName).locate(sha256, filename);
}

/**
 * `findFile`, but a file the index policy blocks is a 403 policy denial (thrown), and so is
 * opening one whose size turns out to be over `max-file-size`.
 */
export async function findServableFile(source: ProjectSource, index: IndexConfig, sha256: string, filename: string): Promise<ListedFile | null> {
  const listed = await findFile(source, index.name, sha256, filename);
  if (!listed) return null;
  assertFileServable(index, listed.project, resolvedFacts(listed.file));
  return guardFileSize(index, listed);
}

/**
 * Bytes arriving from an upstream: no ranges (the whole file is on its way anyway), and the
 * announced length, so a client whose transfer is cut (digest mismatch, upstream failure) sees
 * a short body, never a complete-looking bad one.
 */
function sendStream(req: IndexRequest, body: Extract<FileBody, { kind: 'stream' }>, contentType: string): void {
  const { request, reply } = req;
  reply.headers({ etag: `"${body.digest}"`, 'cache-control': 'public, max-age=31536000, immutable' });
  reply.code(200).type(contentType);
  if (body.size !== undefined) reply.header('content-length', String(body.size));
  if (request.method === 'HEAD') {
    // The flight goes on and stores the file; this client just does not read it.
    body.stream.resume();
    void reply.send();
    return;
  }
  // A failed flight errors the stream: cut the connection rather than end it cleanly.
  body.stream.once('error', (err) => {
    request.log.warn({ err: err.message }, 'upstream transfer failed; download cut');
    reply.raw.destroy();
  });
  void reply.send(body.stream);
}

/**
 * Sends a stored blob; resolves to the number of body bytes sent, or to null, with nothing sent
 * or counted, when the store has no bytes for it. `counted` runs once the answer is decided.
 */
async function sendBlob(
  store: FileStore,
  req: IndexRequest,
  body: Extract<FileBody, { kind: 'blob' }>,
  contentType: string,
  counted: (size: number) => void,
  onRejected: () => void,
): Promise<number | null> {
  const { request, reply } = req;
  const { digest, size } = body;
  const etag = `"${digest}"`;
  const ifRange = request.headers['if-range'];
  const range = ifRange === undefined || ifRange === etag ? parseRange(request.headers.range, size) : ({ kind: 'full' } as const);
  const part = range.kind === 'partial' ? { start: range.start, end: range.end } : undefined;
  // Whether the answer carries the bytes (or their redirect): not a 304, not a 416.
  const sends = !etagMatches(request.headers['if-none-match'], etag) && range.kind !== 'unsatisfiable';
  // A full GET of a large file goes to the object store itself, when configured (`redirect.ts`);
  // it still counts its bytes as a download of this index.
  const url = sends && request.method === 'GET' && !part ? await store.redirect?.urlFor({ digest, size }) : null;
  // A GET finds out whether the bytes are there as it opens them; a HEAD or a redirect asks the
  // store first when the source did not.
  const opens = sends && request.method === 'GET' && !url;
  const opened = opens ? await store.blobs.get(digest, part) : null;
  if (opens && !opened) return null;
  if (sends && !opens && body.unconfirmed && (await store.blobs.stat(digest)) === null) return null;
  counted(size);
  reply.headers({
    etag,
    'accept-ranges': 'bytes',
    // Content-addressed: the bytes behind this URL never change.
    'cache-control': 'public, max-age=31536000, immutable',
  });
  if (answeredNotModified(request, reply, etag)) return 0;
  if (range.kind === 'unsatisfiable') {
    throw new HttpError(416, `range not satisfiable for ${size} bytes`, { 'content-range': unsatisfiedRange(size) });
  }
  if (url) {
    // The URL expires: a cache must not keep the redirect as it keeps the immutable bytes.
    reply.removeHeader('accept-ranges').removeHeader('etag').header('cache-control', 'no-store');
    void reply.code(307).header('location', url).header('content-length', '0').send();
    return size;
  }
  const length = part ? part.end - part.start + 1 : size;
  reply.code(part ? 206 : 200).type(contentType).header('content-length', String(length));
  if (part) reply.header('content-range', contentRange(part, size));
  if (request.method === 'HEAD') {
    void reply.send();
    return 0;
  }
  // Every answer without a body has returned above: a GET that gets here opened its bytes.
  if (!opened) return 0;
  reportRejectedRead(opened, request.log, onRejected);
  void reply.send(opened);
  return length;
}
