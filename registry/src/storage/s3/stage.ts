/**
 * The s3 backend's staged write. Bytes stream into a local scratch file (the data dir's scratch
 * folder, never the bucket) through the same `FsStage` the fs backend uses, so hashing, counting,
 * undoing a failed append, `read` and `readBack` are one implementation for both backends. The
 * bucket sees the bytes only at `commit`, once their digest is known and verified:
 *
 *   1. the scratch file is uploaded to `<prefix>staging/<stage id>` in parts of `PART_SIZE` read
 *      from the file (the `minio` client's own `putObject` would buffer up to 64 MiB of a stream);
 *   2. a server-side copy puts it at the blob's key; 3. the staging object is deleted.
 *
 * So a blob's key only ever holds complete, verified bytes; a process killed between 1 and 3
 * leaves a staging object, which `S3BlobStore.sweepStaging` removes by age.
 */
import { open, unlink } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { FsStage } from '../fs/stage.js';
import type { AppendOptions, BlobInfo, BlobStage, ByteRange, Sha256Hex } from '../types.js';
import type { S3Location } from './connect.js';
import { asUnavailable, isNotFound } from './errors.js';

/**
 * Bytes per uploaded part, and so per commit in memory: above S3's 5 MiB minimum for all parts
 * but the last, small enough that many concurrent commits stay far below the RSS budget, and
 * 10 000 parts (S3's maximum) of it are 80 GiB.
 */
export const PART_SIZE = 8 * 1024 * 1024;

/** What the stage needs from its store: where staging objects go and how one is published. */
export interface StageTarget {
  loc: S3Location;
  stagingKey(id: string): string;
  /** Makes the staging object at `from` visible under `digest` (and removes nothing). */
  publish(from: string, digest: Sha256Hex): Promise<void>;
  /** True when `digest` is already stored: the commit then uploads nothing. */
  has(digest: Sha256Hex): Promise<boolean>;
}

export class S3Stage implements BlobStage {
  /** Set when a commit may have left a staging object (its removal failed): `abort` retries it. */
  #stagingLeft = false;

  private constructor(
    private readonly local: FsStage,
    private readonly target: StageTarget,
  ) {}

  static async create(scratchDir: string, target: StageTarget): Promise<S3Stage> {
    // The callback runs only at commit, long after `stage` is assigned.
    const stage: S3Stage = new S3Stage(await FsStage.create(scratchDir, (path, digest) => stage.#publish(path, digest)), target);
    return stage;
  }

  get id(): string {
    return this.local.id;
  }

  get size(): number {
    return this.local.size;
  }

  append(source: Readable, opts?: AppendOptions): Promise<void> {
    return this.local.append(source, opts);
  }

  digest(): Sha256Hex {
    return this.local.digest();
  }

  read(buffer: Buffer, position: number): Promise<number> {
    return this.local.read(buffer, position);
  }

  readBack(range?: ByteRange): Readable {
    return this.local.readBack(range);
  }

  /** `FsStage.commit` checks the digest, then calls `#publish` with the scratch file. */
  commit(expected?: Sha256Hex): Promise<BlobInfo> {
    return this.local.commit(expected);
  }

  /**
   * Frees the scratch file, and retries removing a staging object a failed commit may have left.
   * Never throws for the bucket (owners call it in a `finally`, where it would hide the cause):
   * an object it cannot remove now is swept by age.
   */
  async abort(): Promise<void> {
    await this.local.abort();
    if (this.#stagingLeft) await this.#removeStaging().catch(() => undefined);
  }

  /**
   * Uploads the verified scratch file and publishes it. On success the local file is unlinked:
   * the stage's read handle keeps its bytes readable until `abort`, as after an fs commit.
   */
  async #publish(path: string, digest: Sha256Hex): Promise<void> {
    const { loc } = this.target;
    if (!(await this.target.has(digest))) {
      const key = this.target.stagingKey(this.id);
      this.#stagingLeft = true;
      try {
        await uploadFile(loc, key, path, this.size);
        await this.target.publish(key, digest);
      } finally {
        await this.#removeStaging().catch(() => undefined);
      }
    }
    await unlink(path).catch(() => undefined);
  }

  async #removeStaging(): Promise<void> {
    const { loc } = this.target;
    try {
      await loc.client.removeObject(loc.bucket, this.target.stagingKey(this.id));
    } catch (err) {
      if (!isNotFound(err)) throw asUnavailable(err, loc.endpoint, `removing staging object of ${this.id}`);
    }
    this.#stagingLeft = false;
  }
}

/**
 * Uploads the first `size` bytes of the file at `path` to `key`, holding at most one part in
 * memory: one PUT when it fits in a part, a multipart upload otherwise (aborted if a part fails).
 */
export async function uploadFile(loc: S3Location, key: string, path: string, size: number): Promise<void> {
  const { client, bucket } = loc;
  const fh = await open(path, 'r');
  const readPart = async (position: number): Promise<Buffer> => {
    const buf = Buffer.allocUnsafe(Math.min(PART_SIZE, size - position));
    let off = 0;
    while (off < buf.length) {
      const { bytesRead } = await fh.read(buf, off, buf.length - off, position + off);
      if (bytesRead === 0) throw new Error(`scratch file ${path} ended at ${position + off}, before ${size}`);
      off += bytesRead;
    }
    return buf;
  };
  try {
    if (size <= PART_SIZE) {
      await client.putObject(bucket, key, await readPart(0), size).catch((err: unknown) => {
        throw asUnavailable(err, loc.endpoint, `uploading ${key}`);
      });
      return;
    }
    let uploadID: string;
    try {
      uploadID = await client.initiateNewMultipartUpload(bucket, key, {});
    } catch (err) {
      throw asUnavailable(err, loc.endpoint, `starting the upload of ${key}`);
    }
    try {
      const etags: { part: number; etag: string }[] = [];
      for (let position = 0, part = 1; position < size; position += PART_SIZE, part++) {
        const { etag } = await client.uploadPart({ bucketName: bucket, objectName: key, uploadID, partNumber: part, headers: {} }, await readPart(position));
        etags.push({ part, etag });
      }
      await client.completeMultipartUpload(bucket, key, uploadID, etags);
    } catch (err) {
      await client.abortMultipartUpload(bucket, key, uploadID).catch(() => undefined);
      throw asUnavailable(err, loc.endpoint, `uploading ${key}`);
    }
  } finally {
    await fh.close();
  }
}
