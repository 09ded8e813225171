/**
 * `GET`/`HEAD /{route}/files/{sha256}/{filename}` (artifact bytes) and `.../{filename}.metadata`
 * (the PEP 658 core-metadata sibling). A file is served only if a record of this index names it
 * with that sha256; bytes stream from the blob store, with single-range support.
 */
import type { IndexRequest } from '../../http/ecosystem.js';
import { HttpError } from '../../http/errors.js';
import { isSha256Hex, type BlobStore } from '../../storage/types.js';
import type { FileRecord } from '../records.js';
import { etagMatches } from '../simple/page-cache.js';
import type { ProjectSource } from '../simple/source.js';
import { candidateProjects } from './lookup.js';
import { parseRange } from './range.js';

const METADATA_SUFFIX = '.metadata';

export async function serveFile(source: ProjectSource, blobs: BlobStore, req: IndexRequest, sha256: string, filename: string): Promise<void> {
  const notFound = () => new HttpError(404, `no file ${sha256}/${filename} in index ${req.index.name}`);
  if (!isSha256Hex(sha256)) throw notFound();
  const wantsMetadata = filename.endsWith(METADATA_SUFFIX);
  const artifact = wantsMetadata ? filename.slice(0, -METADATA_SUFFIX.length) : filename;
  const file = await findFile(source, req.index.name, sha256, artifact);
  const digest = wantsMetadata ? file?.metadataSha256 : file?.sha256;
  if (!digest) throw notFound();
  const info = await blobs.stat(digest);
  if (!info) {
    req.request.log.warn({ digest, filename }, 'a recorded file has no blob');
    throw notFound();
  }
  await sendBlob(blobs, req, digest, info.size, wantsMetadata ? 'text/plain; charset=utf-8' : 'application/octet-stream');
}

/** The record of `filename` in this index, if it has exactly those bytes. */
export async function findFile(source: ProjectSource, indexName: string, sha256: string, filename: string): Promise<FileRecord | null> {
  for (const project of candidateProjects(filename)) {
    const loaded = await source.load(indexName, project);
    const file = loaded?.record.files[filename];
    if (file) return file.sha256 === sha256 ? file : null;
  }
  return null;
}

async function sendBlob(blobs: BlobStore, req: IndexRequest, digest: string, size: number, contentType: string): Promise<void> {
  const { request, reply } = req;
  const etag = `"${digest}"`;
  reply.headers({
    etag,
    'accept-ranges': 'bytes',
    // Content-addressed: the bytes behind this URL never change.
    'cache-control': 'public, max-age=31536000, immutable',
  });
  if (etagMatches(request.headers['if-none-match'], etag)) {
    void reply.code(304).send();
    return;
  }
  const ifRange = request.headers['if-range'];
  const range = ifRange === undefined || ifRange === etag ? parseRange(request.headers.range, size) : ({ kind: 'full' } as const);
  if (range.kind === 'unsatisfiable') {
    throw new HttpError(416, `range not satisfiable for ${size} bytes`, { 'content-range': `bytes */${size}` });
  }
  const part = range.kind === 'partial' ? { start: range.start, end: range.end } : undefined;
  const length = part ? part.end - part.start + 1 : size;
  reply.code(part ? 206 : 200).type(contentType).header('content-length', String(length));
  if (part) reply.header('content-range', `bytes ${part.start}-${part.end}/${size}`);
  if (request.method === 'HEAD') {
    void reply.send();
    return;
  }
  const stream = await blobs.get(digest, part);
  if (!stream) throw new HttpError(404, `blob ${digest} vanished`);
  void reply.send(stream);
}
