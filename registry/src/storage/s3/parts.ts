/**
 * Uploads a growing local file to one object key, one part at a time, while it is still being
 * written: `advance(stable)` uploads, in the background, every whole part below `stable` (bytes
 * that will not change: an append can only undo itself, never what came before it); `finish`
 * uploads the rest and completes the upload. So a commit waits only for the last part, not for
 * the whole blob. Parts stream from the file (`requests.ts`): none is held in memory whole, and
 * at most `MAX_PARTS_IN_FLIGHT` go out at once in the whole process.
 *
 * Background uploads are an optimisation, never a source of failure: if one fails (the store
 * went away for a moment), `finish` discards the upload and sends the whole file again from the
 * local copy, and reports an error only if that fails too.
 *
 * Each part (and the one PUT of a file that fits a part) is checked by the store against its
 * CRC32 (`put.ts`), so a part that changed on the way is refused. The writer tells `checksums`
 * every byte it writes (`PartChecksums`), so most CRC32s are computed as the bytes land.
 */
import type { S3Location } from './connect.js';
import type { Sha256Hex } from '../types.js';
import { asUnavailable } from './errors.js';
import { PartChecksums } from './part-checksums.js';
import { PartSlots } from './part-slots.js';
import { putChecked, putVerified, uploadPartChecked } from './put.js';
import type { FileSlice } from './requests.js';

/**
 * Bytes per uploaded part: above S3's 5 MiB minimum for all parts but the last, and 10 000 parts
 * (S3's maximum) of it are 80 GiB.
 */
export const PART_SIZE = 8 * 1024 * 1024;

/**
 * Parts sent at once by this process, across every upload (`part-slots.ts`): enough to keep the
 * store busy, few enough that many uploads do not each hold a connection, a file and a buffer.
 */
export const MAX_PARTS_IN_FLIGHT = 6;

/** Shared by every uploader of the process. */
export const partSlots = new PartSlots(MAX_PARTS_IN_FLIGHT);

export class PartUploader {
  /** The CRC32 of each part, from every byte the writer wrote to the file (and took back). */
  readonly checksums: PartChecksums;
  #uploadId: string | undefined;
  readonly #etags: { part: number; etag: string }[] = [];
  /** Bytes already uploaded as parts (a multiple of PART_SIZE). */
  #uploaded = 0;
  /** The highest stable size `advance` was told. */
  #target = 0;
  #running: Promise<void> | null = null;
  #failed = false;
  #done = false;

  constructor(
    private readonly loc: S3Location,
    private readonly key: string,
    private readonly path: string,
  ) {
    this.checksums = new PartChecksums(PART_SIZE, path);
  }

  /** Bytes below `stable` will not change: upload their whole parts in the background. */
  advance(stable: number): void {
    this.#target = Math.max(this.#target, stable);
    if (this.#running || this.#failed || this.#done || this.#target - this.#uploaded < PART_SIZE) return;
    this.#running = this.#uploadWholeParts().then(
      () => {
        this.#running = null;
        // More may have become stable while the parts went out.
        this.advance(this.#target);
      },
      () => {
        this.#failed = true;
        this.#running = null;
      },
    );
  }

  async #uploadWholeParts(): Promise<void> {
    while (this.#target - this.#uploaded >= PART_SIZE) await this.#uploadPart(PART_SIZE);
  }

  async #uploadPart(length: number): Promise<void> {
    const { client, bucket } = this.loc;
    const uploadId = (this.#uploadId ??= await client.initiateNewMultipartUpload(bucket, this.key, {}));
    const part = this.#etags.length + 1;
    // In the slot: the first part's checksum reads the file.
    const etag = await partSlots.run(async () => uploadPartChecked(this.loc, this.key, uploadId, part, this.#slice(this.#uploaded, length), await this.checksums.of(part - 1, length)));
    this.#etags.push({ part, etag });
    this.#uploaded += length;
  }

  /**
   * Makes the object at `key` the file's first `size` bytes. Parts sent in the background are
   * reused once; if completing with them fails (a part failed, or the upload was swept by age
   * while the stage was slow), the whole local copy is sent again before the error counts.
   */
  async finish(size: number): Promise<void> {
    // Done first, so no background run starts once the last one ends.
    this.#done = true;
    while (this.#running) await this.#running;
    if (!this.#failed && this.#uploadId !== undefined) {
      try {
        await this.#complete(size);
        return;
      } catch {
        // Sent again below, from the local copy.
      }
    }
    await this.cancel();
    this.#reset();
    try {
      await this.#complete(size);
    } catch (err) {
      await this.cancel();
      throw asUnavailable(err, this.loc.endpoint, `uploading ${this.key}`);
    }
  }

  /** Sends what is not sent yet and completes the upload (one PUT when nothing was sent and it fits a part). */
  async #complete(size: number): Promise<void> {
    if (this.#uploadId === undefined && size <= PART_SIZE) {
      await partSlots.run(async () => putChecked(this.loc, this.key, this.#slice(0, size), await this.checksums.of(0, size)));
      return;
    }
    while (this.#uploaded < size) await this.#uploadPart(Math.min(PART_SIZE, size - this.#uploaded));
    // Set by the first part: above a part's size there is at least one.
    const id = this.#uploadId;
    if (id === undefined) throw new Error(`no multipart upload for ${this.key}`);
    await this.loc.client.completeMultipartUpload(this.loc.bucket, this.key, id, this.#etags);
    this.#uploadId = undefined;
  }

  /**
   * Drops any parts sent and PUTs the file's first `size` bytes (at most `PART_SIZE`) at `key`
   * in one request that the store verifies against `sha256` (`put.ts`): a blob that turned out
   * to fit one part goes straight to its own key.
   */
  async putWhole(key: string, size: number, sha256: Sha256Hex): Promise<void> {
    if (size > PART_SIZE) throw new Error(`${size} bytes do not fit one part`);
    await this.cancel();
    try {
      await partSlots.run(() => putVerified(this.loc, key, this.#slice(0, size), sha256));
    } catch (err) {
      throw asUnavailable(err, this.loc.endpoint, `uploading ${key}`);
    }
  }

  /** Aborts an unfinished multipart upload (best effort: MinIO and S3 lifecycle rules expire them too). */
  async cancel(): Promise<void> {
    this.#done = true;
    while (this.#running) await this.#running;
    const id = this.#uploadId;
    this.#uploadId = undefined;
    if (id !== undefined) await this.loc.client.abortMultipartUpload(this.loc.bucket, this.key, id).catch(() => undefined);
  }

  #reset(): void {
    this.#etags.length = 0;
    this.#uploaded = 0;
    this.#failed = false;
  }

  /** `length` bytes of the local copy from `start`, sent straight from the file. */
  #slice(start: number, length: number): FileSlice {
    return { path: this.path, start, length };
  }
}
