/**
 * The s3 backend's `ChunkStore`: the pieces of shared stages, one object each, under
 * `<prefix>chunks/<name>`.
 *
 * A chunk streams into a local scratch file (the data dir's scratch folder) while whole 8 MiB parts
 * go out to a multipart upload as they land (`parts.ts`, as a stage does), and the upload is
 * completed once the source ended: so the object appears complete or not at all, at most one part
 * is in memory, and a source that fails midway leaves nothing in the bucket (its upload is aborted;
 * a process killed mid-chunk leaves an unfinished upload, which the store expires).
 *
 * `compose` is a multipart upload to the blob's key whose parts are server-side copies of the
 * chunks (UploadPartCopy), completed in one call: the blob key gets every byte at once or nothing.
 * It is written here rather than with the client's `composeObject`, which returns normally when a
 * part copy fails (it aborts the upload and hands back the abort's result).
 */
import { randomUUID } from 'node:crypto';
import { open, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CopyDestinationOptions, CopySourceOptions } from 'minio';
import { STAGE_PREFIX } from '../fs/stage.js';
import { assertChunkName, type ChunkRef, type ChunkStore, type Sha256Hex } from '../types.js';
import type { S3Location } from './connect.js';
import { asUnavailable, isNotFound } from './errors.js';
import { PartUploader } from './parts.js';

/** S3's smallest part but the last, and its largest part (and single CopyObject). */
const MIN_PART = 5 * 1024 * 1024;
const MAX_PART = 5 * 1024 * 1024 * 1024;
const MAX_PARTS = 10_000;
const LIST_PAGE = 1000;

export class S3ChunkStore implements ChunkStore {
  readonly #base: string;

  constructor(
    private readonly loc: S3Location,
    private readonly scratchDir: string,
    /** The object key of a blob (the BlobStore's layout). */
    private readonly blobKey: (digest: Sha256Hex) => string,
  ) {
    this.#base = `${loc.prefix}chunks/`;
  }

  #key(name: string): string {
    assertChunkName(name);
    return `${this.#base}${name}`;
  }

  async write(name: string, source: Readable): Promise<number> {
    const key = this.#key(name);
    // Named like a stage's scratch file, so the start-up sweep of stale scratch files covers it.
    const path = join(this.scratchDir, `${STAGE_PREFIX}chunk-${randomUUID()}`);
    const fh = await open(path, 'wx');
    const parts = new PartUploader(this.loc, key, path);
    let size = 0;
    try {
      await pipeline(
        source,
        new Writable({
          write: (chunk: Buffer, _enc, done) => {
            void (async () => {
              let off = 0;
              while (off < chunk.length) off += (await fh.write(chunk, off, chunk.length - off, size + off)).bytesWritten;
              size += chunk.length;
              // A chunk is never undone in part: every byte written is final.
              parts.checksums.add(chunk);
              parts.advance(size);
            })().then(() => done(), done);
          },
        }),
      );
      await parts.finish(size);
      return size;
    } catch (err) {
      await parts.cancel();
      throw err;
    } finally {
      await fh.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
    }
  }

  async read(name: string): Promise<Readable | null> {
    try {
      return await this.loc.client.getObject(this.loc.bucket, this.#key(name));
    } catch (err) {
      if (isNotFound(err)) return null;
      throw asUnavailable(err, this.loc.endpoint, 'reading a chunk');
    }
  }

  async remove(name: string): Promise<void> {
    try {
      await this.loc.client.removeObject(this.loc.bucket, this.#key(name));
    } catch (err) {
      if (!isNotFound(err)) throw asUnavailable(err, this.loc.endpoint, 'removing a chunk');
    }
  }

  async compose(chunks: readonly ChunkRef[], digest: Sha256Hex): Promise<boolean> {
    const parts = partsOf(chunks);
    if (parts === null) return false;
    const { client, bucket } = this.loc;
    const dest = this.blobKey(digest);
    try {
      const only = parts.length === 1 ? parts[0] : undefined;
      if (only !== undefined) {
        await client.copyObject(new CopySourceOptions({ Bucket: bucket, Object: this.#key(only.name) }), new CopyDestinationOptions({ Bucket: bucket, Object: dest }));
        return true;
      }
      const uploadID = await client.initiateNewMultipartUpload(bucket, dest, {});
      try {
        const etags: { part: number; etag: string }[] = [];
        for (const [i, p] of parts.entries()) {
          const headers = {
            'x-amz-copy-source': encodeURI(`${bucket}/${this.#key(p.name)}`),
            'x-amz-copy-source-range': `bytes=${p.start}-${p.end}`,
          };
          const { etag } = await client.uploadPart({ bucketName: bucket, objectName: dest, uploadID, partNumber: i + 1, headers });
          etags.push({ part: i + 1, etag });
        }
        await client.completeMultipartUpload(bucket, dest, uploadID, etags);
      } catch (err) {
        await client.abortMultipartUpload(bucket, dest, uploadID).catch(() => undefined);
        throw err;
      }
      return true;
    } catch (err) {
      throw asUnavailable(err, this.loc.endpoint, `composing ${digest}`);
    }
  }

  async *listOlder(before: number): AsyncIterable<string> {
    const { client, bucket } = this.loc;
    const prefix = this.#base;
    let token = '';
    do {
      let page;
      try {
        page = await client.listObjectsV2Query(bucket, prefix, token, '', LIST_PAGE, '');
      } catch (err) {
        throw asUnavailable(err, this.loc.endpoint, 'listing chunks');
      }
      for (const item of page.objects) {
        if (item.name !== undefined && item.lastModified.getTime() < before) yield item.name.slice(this.#base.length);
      }
      token = page.isTruncated ? page.nextContinuationToken : '';
    } while (token !== '');
  }
}

interface CopyPart {
  name: string;
  start: number;
  end: number;
}

/**
 * The part copies that build the blob from its chunks: one per chunk, a chunk above S3's largest
 * part split evenly. Null when S3 would refuse them: a part but the last under 5 MiB, an empty
 * blob, or more parts than S3 allows.
 */
function partsOf(chunks: readonly ChunkRef[]): CopyPart[] | null {
  const parts: CopyPart[] = [];
  for (const c of chunks) {
    const n = Math.ceil(c.size / MAX_PART);
    const each = Math.ceil(c.size / n);
    for (let start = 0; start < c.size; start += each) parts.push({ name: c.name, start, end: Math.min(start + each, c.size) - 1 });
  }
  if (parts.length === 0 || parts.length > MAX_PARTS) return null;
  return parts.slice(0, -1).every((p) => p.end - p.start + 1 >= MIN_PART) ? parts : null;
}
