/**
 * The s3 backend's staged write. Bytes stream into a local scratch file (the data dir's scratch
 * folder, never the bucket) through the same `FsStage` the fs backend uses, so hashing, counting,
 * undoing a failed append, `read` and `readBack` are one implementation for both backends.
 *
 *   1. while appends go on, each whole `PART_SIZE` part of the file that no append can undo any
 *      more is sent as a part of a multipart upload to `<prefix>staging/<stage id>` (`parts.ts`;
 *      the `minio` client's own `putObject` would buffer up to 64 MiB of a stream);
 *   2. `commit`, once the digest is verified, sends the last part and completes the upload (a
 *      blob that fits in one part is one PUT), so the staging object appears only complete;
 *   3. a server-side copy puts it at the blob's key; 4. the staging object is deleted.
 *
 * So a blob's key only ever holds complete, verified bytes; a process killed between 2 and 4
 * leaves a staging object, and one killed before 2 an unfinished multipart upload: both are
 * removed by age (`S3BlobStore.sweepStaging`, or MinIO's own expiry of stale uploads).
 */
import { unlink } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { FsStage } from '../fs/stage.js';
import type { AppendOptions, BlobInfo, BlobStage, ByteRange, Sha256Hex } from '../types.js';
import type { S3Location } from './connect.js';
import { asUnavailable, isNotFound } from './errors.js';
import { PartUploader } from './parts.js';

/** What the stage needs from its store: where staging objects go and how one is published. */
export interface StageTarget {
  loc: S3Location;
  stagingKey(id: string): string;
  /** Makes the staging object at `from` (`size` bytes) visible under `digest` (and removes nothing). */
  publish(from: string, digest: Sha256Hex, size: number): Promise<void>;
  /** True when `digest` is already stored: the commit then uploads nothing. */
  has(digest: Sha256Hex): Promise<boolean>;
}

export class S3Stage implements BlobStage {
  /** Set when a commit may have left a staging object (its removal failed): `abort` retries it. */
  #stagingLeft = false;

  /** Sends whole parts to the staging key while appends go on (`parts.ts`). */
  readonly #parts: PartUploader;

  private constructor(
    private readonly local: FsStage,
    private readonly target: StageTarget,
  ) {
    this.#parts = new PartUploader(target.loc, target.stagingKey(local.id), local.path);
  }

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

  get localPath(): string {
    return this.local.path;
  }

  async append(source: Readable, opts?: AppendOptions): Promise<void> {
    await this.local.append(source, opts);
    // Only now are these bytes stable: a failed append is undone by truncating the file.
    this.#parts.advance(this.local.size);
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
    await this.#parts.cancel();
    await this.local.abort();
    if (this.#stagingLeft) await this.#removeStaging().catch(() => undefined);
  }

  /**
   * Uploads the verified scratch file and publishes it. On success the local file is unlinked:
   * the stage's read handle keeps its bytes readable until `abort`, as after an fs commit.
   */
  async #publish(path: string, digest: Sha256Hex): Promise<void> {
    if (await this.target.has(digest)) {
      await this.#parts.cancel();
    } else {
      const key = this.target.stagingKey(this.id);
      this.#stagingLeft = true;
      try {
        await this.#parts.finish(this.size);
        await this.target.publish(key, digest, this.size);
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
