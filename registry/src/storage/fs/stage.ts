/**
 * The fs backend's staged write: one file `staging/stage-<id>` written and read through one
 * read-write handle with positional writes and reads, so readers may tail it while it grows and
 * keep reading after `commit` renamed it into place (the inode lives on). `commit` checks the
 * digest and hands the file to the store's publish step (the fs store fsyncs it and renames it
 * under its digest); `abort` unlinks what was not committed and closes the handle.
 * (One handle, not a writer and a reader: an open and a close fewer per staged blob.)
 *
 * Every byte it writes is covered by its claim on the scratch budget (`scratch-budget.ts`) before
 * it is written: a write past the budget fails like a source that broke (the append is undone),
 * and `abort` gives the claim back.
 *
 * The s3 backend stages through this class too, as its local scratch copy (`s3/stage.ts`): its
 * `publish` uploads the file instead of renaming it, and does not fsync it (the copy is unlinked
 * once uploaded; the store's PUT is what makes the blob durable).
 */
import { createHash, randomUUID, type Hash } from 'node:crypto';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ScratchClaim } from '../scratch-budget.js';
import { rangeStream } from '../stage-read.js';
import { DigestMismatchError, type AppendOptions, type BlobInfo, type BlobStage, type ByteRange, type Sha256Hex } from '../types.js';

/** Staged files start with this, so the start-up sweep knows them from the meta store's temp files. */
export const STAGE_PREFIX = 'stage-';

type State = 'open' | 'committed' | 'aborted';

/**
 * The store's publish step: makes the file at `path` (open as `file`, not to be closed) the blob
 * `digest`, durably. The file is written but not fsynced: a store that keeps it fsyncs it.
 */
export type Publish = (path: string, digest: Sha256Hex, file: FileHandle) => Promise<void>;

/**
 * How many bytes of an append may wait for the write in flight before its source is paused: up
 * to 1 MiB, so few large writes land (fewer pauses of the source, fewer writes: measured, 4
 * concurrent 256 MiB pushes cost 12% more CPU at 256 KiB), and fewer when many appends run at
 * once, so they share `COALESCE_BUDGET` (32 concurrent 16 MiB uploads peaked about 70 MiB higher
 * at 1 MiB each than at 256 KiB: the waiting bytes, and the spent ones the collector frees later).
 */
const COALESCE_MAX = 1024 * 1024;
const COALESCE_MIN = 64 * 1024;
const COALESCE_BUDGET = 8 * 1024 * 1024;

/** Appends under way in this process. */
let appending = 0;

function coalesceBytes(): number {
  return Math.max(COALESCE_MIN, Math.min(COALESCE_MAX, Math.floor(COALESCE_BUDGET / Math.max(1, appending))));
}

export class FsStage implements BlobStage {
  readonly id: string;
  #size = 0;
  #hash: Hash = createHash('sha256');
  #state: State = 'open';
  #appending = false;

  private constructor(
    readonly path: string,
    /** Read and write: stays open after `commit` for the readers still tailing the file. */
    private readonly handle: FileHandle,
    id: string,
    /** Makes the file (open as `file`) the blob under its digest (the store's publish step). */
    private readonly publish: Publish,
    /** The digest a commit requires when it names none (`StageOptions.expected`). */
    private readonly expected: Sha256Hex | undefined,
    /** What the file may hold of the scratch budget; given back by `abort`. */
    private readonly claim: ScratchClaim,
  ) {
    this.id = id;
  }

  /**
   * A new staged file. With `declared`, those bytes are reserved first (`ScratchClaim.reserve`:
   * refused at once above the whole budget, after a bounded wait above what is free).
   */
  static async create(dir: string, publish: Publish, claim: ScratchClaim, opts: { expected?: Sha256Hex | undefined; declared?: number | undefined } = {}): Promise<FsStage> {
    try {
      if (opts.declared !== undefined) await claim.reserve(opts.declared);
      const id = randomUUID();
      const path = join(dir, `${STAGE_PREFIX}${id}`);
      return new FsStage(path, await open(path, 'wx+'), id, publish, opts.expected, claim);
    } catch (err) {
      claim.release();
      throw err;
    }
  }

  get size(): number {
    return this.#size;
  }

  get localPath(): string {
    return this.path;
  }

  async append(source: Readable, opts: AppendOptions = {}): Promise<void> {
    this.#mustBeOpen('append to');
    if (this.#appending) throw new Error(`stage ${this.id} is already receiving an append`);
    this.#appending = true;
    const before = { size: this.#size, hash: this.#hash.copy() };
    if (opts.declared !== undefined) {
      try {
        await this.claim.reserve(this.#size + opts.declared);
      } catch (err) {
        // As after any append: the claim holds what the file holds.
        this.claim.shrink(this.#size);
        this.#appending = false;
        throw err;
      }
    }
    // The write in progress when the source fails: the undo waits for it, or it would land after.
    let landing: Promise<void> = Promise.resolve();
    appending++;
    try {
      await pipeline(
        source,
        new Writable({
          // Chunks that arrive while a write is landing wait here and land together in one
          // positional write (`writev`): fewer writes, and fewer wake-ups of the readers tailing
          // the stage, with no wait added (a chunk never waits for more to come).
          highWaterMark: coalesceBytes(),
          writev: (chunks, done) => {
            const buffers = chunks.map((c) => c.chunk as Buffer);
            landing = this.#write(buffers);
            landing.then(() => {
              opts.onWritten?.(this.#size, buffers);
              done();
            }, done);
          },
        }),
      );
      if (opts.expect !== undefined) {
        const digest = this.digest();
        if (digest !== opts.expect) throw new DigestMismatchError(opts.expect, digest);
      }
    } catch (err) {
      await landing.catch(() => undefined);
      // Undo the append, so size and digest describe exactly the bytes in the file.
      this.#size = before.size;
      this.#hash = before.hash;
      await this.handle.truncate(before.size).catch(() => undefined);
      throw err;
    } finally {
      appending--;
      // A declared length larger than what came is given back.
      this.claim.shrink(this.#size);
      this.#appending = false;
    }
  }

  async #write(chunks: Buffer[]): Promise<void> {
    const length = chunks.reduce((n, c) => n + c.length, 0);
    // Before the bytes land: past the budget the append fails and is undone.
    this.claim.cover(this.#size + length);
    const { bytesWritten } = await this.handle.writev(chunks, this.#size);
    if (bytesWritten < length) {
      // A short write (rare on a local file): the rest, as one buffer.
      const rest = Buffer.concat(chunks, length).subarray(bytesWritten);
      let off = 0;
      while (off < rest.length) {
        const written = await this.handle.write(rest, off, rest.length - off, this.#size + bytesWritten + off);
        off += written.bytesWritten;
      }
    }
    // Hashed once it has landed: a failed write leaves the hash of what the file holds.
    for (const chunk of chunks) this.#hash.update(chunk);
    this.#size += length;
  }

  digest(): Sha256Hex {
    return this.#hash.copy().digest('hex');
  }

  async read(buffer: Buffer, position: number): Promise<number> {
    if (this.#state === 'aborted') throw new Error(`stage ${this.id} was aborted`);
    const length = Math.min(buffer.length, this.#size - position);
    if (length <= 0) return 0;
    const { bytesRead } = await this.handle.read(buffer, 0, length, position);
    return bytesRead;
  }

  readBack(range?: ByteRange): Readable {
    return rangeStream((buf, pos) => this.read(buf, pos), this.#size, range);
  }

  async commit(expected: Sha256Hex | undefined = this.expected): Promise<BlobInfo> {
    this.#mustBeOpen('commit');
    if (this.#appending) throw new Error(`stage ${this.id} is still receiving an append`);
    const digest = this.digest();
    if (expected !== undefined && digest !== expected) throw new DigestMismatchError(expected, digest);
    await this.publish(this.path, digest, this.handle);
    this.#state = 'committed';
    return { digest, size: this.#size };
  }

  async abort(): Promise<void> {
    if (this.#state === 'aborted') return;
    const committed = this.#state === 'committed';
    this.#state = 'aborted';
    await this.handle.close().catch(() => undefined);
    if (!committed) await unlink(this.path).catch(() => undefined);
    // Only now are the bytes off the disk (s3: its commit unlinked the file, this handle kept it).
    this.claim.release();
  }

  #mustBeOpen(what: string): void {
    if (this.#state !== 'open') throw new Error(`cannot ${what} stage ${this.id}: it was ${this.#state}`);
  }
}
