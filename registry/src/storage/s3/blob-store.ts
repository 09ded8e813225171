/**
 * S3 BlobStore. Layout under the configured prefix:
 *
 *   <prefix>blobs/sha256/<ab>/<hex>   a published blob: complete bytes whose sha256 is <hex>
 *   <prefix>staging/<stage id>        bytes being published by a commit (see `S3Stage`)
 *
 * A blob key is written only by an atomic write of bytes hashed on their way in and matched (a
 * PUT the store verifies against that sha256, the completion of a multipart upload, or a
 * server-side copy of a staging object), so a reader never sees partial or unverified bytes under
 * a digest. Blobs are content-addressed: a commit of bytes already stored uploads nothing, and
 * two processes committing the same bytes at once both write identical bytes to one key.
 *
 * A stage keeps a local copy in the scratch folder given to the constructor (shared code with
 * the fs backend) and sends whole parts to a multipart upload as they become final, to the blob
 * key when the digest is known from the start and to its staging key otherwise; a blob that fits
 * one part is one PUT to its key (`stage.ts`, `parts.ts`, `put.ts`). Staging objects and uploads
 * a killed process left behind are removed by `sweepStaging` by age; a staging object exists only
 * during a commit.
 *
 * Reads are streamed from the object (`getObject`, or `getPartialObject` for a range): nothing
 * here holds a whole blob in memory. A store that does not answer, or answers with a 5xx, gives
 * `StoreUnavailableError` (errors.ts), whose message names the endpoint, never a key.
 *
 * The server-side copy (of a blob over one part whose digest was not known in advance) is one
 * CopyObject up to 5 GiB (S3's limit for it), and above that a multipart copy (UploadPartCopy of
 * 1 GiB ranges, `copy.ts`).
 */
import { mkdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { STAGE_PREFIX } from '../fs/stage.js';
import { sweepStaleFiles } from '../fs/sweep.js';
import { isSha256Hex, type BlobInfo, type BlobStage, type BlobStore, type ByteRange, type Sha256Hex, type StageOptions, type StoredBlob } from '../types.js';
import type { S3Location } from './connect.js';
import { copyObject, type CopyLimits } from './copy.js';
import { asUnavailable, isNotFound } from './errors.js';
import { S3Stage } from './stage.js';
import { ScratchBudget } from '../scratch-budget.js';
import { putByStage } from '../put-by-stage.js';
import { VerifiedVersions } from '../verify.js';

/** Keys per listing page; S3's maximum. */
const LIST_PAGE = 1000;

export interface S3BlobStoreOptions {
  /** A local folder for stages' scratch files (the data dir's scratch folder). */
  scratchDir: string;
  /**
   * Scratch files older than this (by their last write) are removed when the store opens: what
   * a killed process left. A day, as for the fs backend's staging folder.
   */
  staleScratchMs?: number;
  now?: () => number;
  /** Where the server-side copy switches to a multipart copy, and its part size (tests lower them). */
  copyLimits?: CopyLimits;
  /** What the stages' scratch files may hold together (`[storage] scratch_limit`); default: no limit. */
  scratch?: ScratchBudget;
}

const DEFAULT_STALE_SCRATCH_MS = 24 * 60 * 60 * 1000;

export class S3BlobStore implements BlobStore {
  readonly #loc: S3Location;
  readonly #scratch: string;
  readonly #now: () => number;
  readonly #staleScratchMs: number;
  readonly #blobs: string;
  readonly #staging: string;
  readonly #copyLimits: CopyLimits | undefined;
  readonly #verified = new VerifiedVersions();
  readonly #budget: ScratchBudget;

  constructor(loc: S3Location, opts: S3BlobStoreOptions) {
    this.#budget = opts.scratch ?? new ScratchBudget();
    this.#copyLimits = opts.copyLimits;
    this.#loc = loc;
    this.#scratch = opts.scratchDir;
    this.#now = opts.now ?? Date.now;
    this.#staleScratchMs = opts.staleScratchMs ?? DEFAULT_STALE_SCRATCH_MS;
    this.#blobs = `${loc.prefix}blobs/sha256/`;
    this.#staging = `${loc.prefix}staging/`;
  }

  /** Creates the scratch folder and sweeps stale scratch files; the bucket is not touched. */
  async init(): Promise<void> {
    await mkdir(this.#scratch, { recursive: true });
    // Only stage files: the scratch folder may hold other users' temporary files.
    await sweepStaleFiles(this.#scratch, { olderThanMs: this.#staleScratchMs, now: this.#now, only: (name) => name.startsWith(STAGE_PREFIX) });
  }

  /** The object key of a blob. */
  key(digest: Sha256Hex): string {
    if (!isSha256Hex(digest)) throw new Error(`not a sha256 digest: ${digest}`);
    return `${this.#blobs}${digest.slice(0, 2)}/${digest}`;
  }

  /** The object key a stage's bytes are uploaded to during its commit. */
  stagingKey(id: string): string {
    return `${this.#staging}${id}`;
  }

  put(source: Readable, expected?: Sha256Hex): Promise<BlobInfo> {
    return putByStage(this, source, expected);
  }

  /** Every stage keeps a local scratch copy, so `readBack` needs nothing more. */
  stage(opts?: StageOptions): Promise<BlobStage> {
    const target = {
      loc: this.#loc,
      blobKey: (digest: Sha256Hex) => this.key(digest),
      stagingKey: (id: string) => this.stagingKey(id),
      has: async (digest: Sha256Hex) => (await this.stat(digest)) !== null,
      publish: (from: string, digest: Sha256Hex, size: number) => this.#copy(from, digest, size),
    };
    return S3Stage.create(this.#scratch, target, this.#budget.claim(), opts ?? {});
  }

  async #copy(from: string, digest: Sha256Hex, size: number): Promise<void> {
    try {
      await copyObject(this.#loc, from, this.key(digest), size, this.#copyLimits);
    } catch (err) {
      throw asUnavailable(err, this.#loc.endpoint, `publishing ${digest}`);
    }
  }

  async get(digest: Sha256Hex, range?: ByteRange): Promise<Readable | null> {
    const { requests } = this.#loc;
    const key = this.key(digest);
    try {
      if (range) return await requests.request('GET', key, { Range: `bytes=${range.start}-${range.end}` }, [206]);
      // A whole read is checked against its digest on the way (verify.ts): an object changed in
      // the bucket behind the store's back ends in an error, never in wrong bytes. An object
      // already verified, unchanged since (same ETag), is not hashed again.
      const body = await requests.request('GET', key, {}, [200]);
      const etag = typeof body.headers.etag === 'string' ? body.headers.etag : undefined;
      return this.#verified.read(body, digest, etag);
    } catch (err) {
      if (isNotFound(err)) return null;
      throw asUnavailable(err, this.#loc.endpoint, `reading ${digest}`);
    }
  }

  async stat(digest: Sha256Hex): Promise<BlobInfo | null> {
    try {
      const res = await this.#loc.requests.request('HEAD', this.key(digest), {}, [200]);
      res.resume();
      const size = Number(res.headers['content-length']);
      const modifiedMs = Date.parse(res.headers['last-modified'] ?? '');
      if (!Number.isSafeInteger(size) || Number.isNaN(modifiedMs)) throw new Error(`the object store answered a HEAD of ${digest} without its size or time`);
      return { digest, size, modifiedMs };
    } catch (err) {
      if (isNotFound(err)) return null;
      throw asUnavailable(err, this.#loc.endpoint, `checking ${digest}`);
    }
  }

  /** S3 DELETE answers the same whether or not the key existed, so a HEAD tells which it was. */
  async delete(digest: Sha256Hex): Promise<boolean> {
    if ((await this.stat(digest)) === null) return false;
    try {
      await this.#loc.client.removeObject(this.#loc.bucket, this.key(digest));
    } catch (err) {
      throw asUnavailable(err, this.#loc.endpoint, `deleting ${digest}`);
    }
    return true;
  }

  /** The objects under the blobs prefix, a listing page (1000 keys) at a time. */
  async *list(): AsyncIterable<StoredBlob> {
    const { client, bucket } = this.#loc;
    let token = '';
    do {
      let page;
      try {
        page = await client.listObjectsV2Query(bucket, this.#blobs, token, '', LIST_PAGE, '');
      } catch (err) {
        throw asUnavailable(err, this.#loc.endpoint, 'listing blobs');
      }
      for (const item of page.objects) {
        const digest = item.name?.slice(item.name.lastIndexOf('/') + 1);
        if (digest === undefined || !isSha256Hex(digest) || item.name !== this.key(digest)) continue;
        yield { digest, size: item.size, modifiedMs: item.lastModified.getTime() };
      }
      token = page.isTruncated ? page.nextContinuationToken : '';
    } while (token !== '');
  }

  /**
   * Removes staging objects last written more than `olderThanMs` ago, and multipart uploads to
   * staging and blob keys begun that long ago (a blob over one part is uploaded in parts, which
   * the store keeps, unseen by listings, until the upload completes or is aborted): what a process
   * killed mid-commit left. A live staging object exists only for the seconds of a commit, so an
   * age well above the longest commit (say an hour) never touches another process's work. An
   * upload is as old as its first part, so a slow live stage's upload may go: its commit then
   * sends the local copy again (`parts.ts`), nothing is lost. Returns how many objects and uploads went.
   */
  async sweepStaging(olderThanMs: number): Promise<number> {
    const cutoff = this.#now() - olderThanMs;
    try {
      return (await this.#sweepObjects(cutoff)) + (await this.#sweepUploads(this.#staging, cutoff)) + (await this.#sweepUploads(this.#blobs, cutoff));
    } catch (err) {
      throw asUnavailable(err, this.#loc.endpoint, 'sweeping staging objects');
    }
  }

  async #sweepObjects(cutoff: number): Promise<number> {
    const { client, bucket } = this.#loc;
    let removed = 0;
    let token = '';
    do {
      const page = await client.listObjectsV2Query(bucket, this.#staging, token, '', LIST_PAGE, '');
      for (const item of page.objects) {
        if (item.name === undefined || item.lastModified.getTime() >= cutoff) continue;
        await client.removeObject(bucket, item.name);
        removed++;
      }
      token = page.isTruncated ? page.nextContinuationToken : '';
    } while (token !== '');
    return removed;
  }

  async #sweepUploads(prefix: string, cutoff: number): Promise<number> {
    const { client, bucket } = this.#loc;
    let removed = 0;
    let keyMarker = '';
    let uploadMarker = '';
    for (;;) {
      const page = await client.listIncompleteUploadsQuery(bucket, prefix, keyMarker, uploadMarker, '');
      for (const upload of page.uploads) {
        if (upload.initiated.getTime() >= cutoff) continue;
        await client.abortMultipartUpload(bucket, upload.key, upload.uploadId);
        removed++;
      }
      if (!page.isTruncated) return removed;
      keyMarker = page.nextKeyMarker;
      uploadMarker = page.nextUploadIdMarker;
    }
  }
}
