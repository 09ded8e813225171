/**
 * The s3 backend's staged write. Bytes stream into a local scratch file (the data dir's scratch
 * folder, never the bucket) through the same `FsStage` the fs backend uses, so hashing, counting,
 * undoing a failed append, `read` and `readBack` are one implementation for both backends.
 * `commit` checks the digest on that copy first, asks the store whether the blob is there already
 * (then nothing is sent; not for a stage begun `absent`, nor for bytes up to `ASK_ABOVE_BYTES`,
 * whose upload costs no more than the question), and otherwise publishes it one of three ways:
 *
 *   - a blob that fits one part (`PART_SIZE`): one PUT straight to its blob key, which the store
 *     verifies against the sha256 the stage computed (`put.ts`);
 *   - a larger blob whose digest was known when the stage began (`StageOptions.expected`): its
 *     whole parts go, while appends go on, to a multipart upload to the blob key itself
 *     (`parts.ts`), completed only once the digest matched and aborted otherwise;
 *   - any other larger blob: the same multipart upload, to `<prefix>staging/<stage id>`, then a
 *     server-side copy to the blob key, then the staging object is deleted.
 *
 * A PUT and the completion of a multipart upload are atomic, so a blob's key only ever holds
 * complete, verified bytes. A process killed before a completion leaves an unfinished multipart
 * upload, and one killed between copy and delete a staging object: both are removed by age
 * (`S3BlobStore.sweepStaging`, or the store's own expiry of stale uploads).
 */
import { unlink } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { FsStage } from '../fs/stage.js';
import type { ScratchClaim } from '../scratch-budget.js';
import { DigestMismatchError, type AppendOptions, type BlobInfo, type BlobStage, type ByteRange, type Sha256Hex, type StageOptions } from '../types.js';
import type { S3Location } from './connect.js';
import { asUnavailable, isNotFound } from './errors.js';
import { PART_SIZE, PartUploader } from './parts.js';

/**
 * Bytes up to this size are put without asking first whether the blob is stored: a HEAD costs a
 * request, like the PUT, and spares an upload only of bytes a PUT sends in no time. Stored
 * already, they are written again, identical, under their key (a versioned bucket keeps one more
 * version of them).
 */
export const ASK_ABOVE_BYTES = 64 * 1024;

/** What the stage needs from its store: where objects go and how a staging object is published. */
export interface StageTarget {
  loc: S3Location;
  blobKey(digest: Sha256Hex): string;
  stagingKey(id: string): string;
  /** Makes the staging object at `from` (`size` bytes) visible under `digest` (and removes nothing). */
  publish(from: string, digest: Sha256Hex, size: number): Promise<void>;
  /** True when `digest` is already stored: the commit then uploads nothing. */
  has(digest: Sha256Hex): Promise<boolean>;
}

export class S3Stage implements BlobStage {
  /** Set when a commit may have left a staging object (its removal failed): `abort` retries it. */
  #stagingLeft = false;

  /** Sends whole parts to the blob key (digest known) or the staging key while appends go on (`parts.ts`). */
  readonly #parts: PartUploader;

  private constructor(
    private readonly local: FsStage,
    private readonly target: StageTarget,
    /** The digest the bytes must have, when known before they arrive. */
    private readonly expected: Sha256Hex | undefined,
    /** `StageOptions.absent`: the commit publishes without asking whether the blob is there. */
    private readonly absent: boolean,
  ) {
    const key = expected === undefined ? target.stagingKey(local.id) : target.blobKey(expected);
    this.#parts = new PartUploader(target.loc, key, local.path);
  }

  static async create(scratchDir: string, target: StageTarget, claim: ScratchClaim, opts: StageOptions): Promise<S3Stage> {
    // The callback runs only at commit, long after `stage` is assigned.
    const local = await FsStage.create(scratchDir, (path, digest) => stage.#publish(path, digest), claim, opts);
    const stage: S3Stage = new S3Stage(local, target, opts.expected, opts.absent === true);
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

  async append(source: Readable, opts: AppendOptions = {}): Promise<void> {
    const { checksums } = this.#parts;
    const before = checksums.mark();
    const onWritten = (size: number, chunks: readonly Buffer[]): void => {
      for (const chunk of chunks) checksums.add(chunk);
      opts.onWritten?.(size, chunks);
    };
    try {
      await this.local.append(source, { ...opts, onWritten });
    } catch (err) {
      // The local copy was truncated back to where it stood.
      checksums.rewind(before);
      throw err;
    }
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

  /**
   * `FsStage.commit` checks the digest (the one given here, else the stage's `expected`), then
   * calls `#publish` with the scratch file. Other bytes than expected abort the upload at once.
   */
  async commit(expected?: Sha256Hex): Promise<BlobInfo> {
    if (expected !== undefined && this.expected !== undefined && expected !== this.expected) {
      throw new Error(`stage ${this.id} was begun for ${this.expected}, not ${expected}`);
    }
    try {
      return await this.local.commit(expected ?? this.expected);
    } catch (err) {
      if (err instanceof DigestMismatchError) await this.#parts.cancel();
      throw err;
    }
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
   * Uploads the verified scratch file and publishes it (see the top of this file). On success the
   * local file is unlinked: the stage's read handle keeps its bytes readable until `abort`, as
   * after an fs commit.
   */
  async #publish(path: string, digest: Sha256Hex): Promise<void> {
    const ask = !(this.absent && digest === this.expected) && this.size > ASK_ABOVE_BYTES;
    if (ask && (await this.target.has(digest))) {
      await this.#parts.cancel();
    } else if (this.size <= PART_SIZE) {
      await this.#parts.putWhole(this.target.blobKey(digest), this.size, digest);
    } else if (digest === this.expected) {
      // The parts went to the blob key itself.
      await this.#parts.finish(this.size);
    } else {
      await this.#publishByCopy(digest);
    }
    await unlink(path).catch(() => undefined);
  }

  async #publishByCopy(digest: Sha256Hex): Promise<void> {
    const key = this.target.stagingKey(this.id);
    this.#stagingLeft = true;
    try {
      await this.#parts.finish(this.size);
      await this.target.publish(key, digest, this.size);
    } finally {
      await this.#removeStaging().catch(() => undefined);
    }
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
