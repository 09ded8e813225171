/**
 * Filesystem BlobStore. Layout under `root`: `blobs/sha256/<ab>/<digest>` for published bytes and
 * `staging/` for bytes in flight. A blob is written to staging (`FsStage`), verified, fsynced,
 * then renamed into place, so a crash at any moment leaves no partial blob visible. Staged files a
 * killed process left behind are swept by age when the store opens.
 */
import { closeSync, fstatSync, fsync, openSync, type Stats } from 'node:fs';
import { link, mkdir, open, readdir, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { unlessMissing } from './missing.js';
import { FsStage } from './stage.js';
import { ScratchBudget } from '../scratch-budget.js';
import { sweepStaleFiles } from './sweep.js';
import { isSha256Hex, type BlobInfo, type BlobStage, type BlobStore, type ByteRange, type Sha256Hex, type StageOptions, type StoredBlob } from '../types.js';
import { putByStage } from '../put-by-stage.js';
import { VerifiedVersions } from '../verify.js';
import { FileBody } from './file-body.js';

export interface FsBlobStoreOptions {
  /**
   * Staged files older than this (by their last write) are removed when the store opens. A live
   * stage is written to as its bytes arrive, and an idle upload session expires after an hour, so
   * a day-old staged file belongs to no one.
   */
  staleStageMs?: number;
  now?: () => number;
  /** What the staged files may hold together (`[storage] scratch_limit`); default: no limit. */
  scratch?: ScratchBudget;
}

const DEFAULT_STALE_STAGE_MS = 24 * 60 * 60 * 1000;

export class FsBlobStore implements BlobStore {
  readonly #blobs: string;
  readonly #staging: string;
  readonly #staleMs: number;
  readonly #now: () => number;
  readonly #verified = new VerifiedVersions();
  /** Shard folders this process made or found (`#renameInto`). */
  readonly #shards = new Set<string>();
  readonly #budget: ScratchBudget;

  constructor(root: string, opts: FsBlobStoreOptions = {}) {
    this.#budget = opts.scratch ?? new ScratchBudget();
    this.#blobs = join(root, 'blobs', 'sha256');
    this.#staging = join(root, 'staging');
    this.#staleMs = opts.staleStageMs ?? DEFAULT_STALE_STAGE_MS;
    this.#now = opts.now ?? Date.now;
  }

  async init(): Promise<void> {
    await mkdir(this.#blobs, { recursive: true });
    await mkdir(this.#staging, { recursive: true });
    await this.sweepStale();
  }

  /**
   * Removes staged files (and the meta store's temp files, which share the folder) not written to
   * for `staleStageMs`: what a killed process left behind. Younger ones may be live; they stay.
   */
  sweepStale(): Promise<number> {
    return sweepStaleFiles(this.#staging, { olderThanMs: this.#staleMs, now: this.#now });
  }

  #path(digest: Sha256Hex): string {
    if (!isSha256Hex(digest)) throw new Error(`not a sha256 digest: ${digest}`);
    return join(this.#blobs, digest.slice(0, 2), digest);
  }

  put(source: Readable, expected?: Sha256Hex): Promise<BlobInfo> {
    return putByStage(this, source, expected);
  }

  /** Every fs stage is a local file, so reading back needs nothing more (`readBack` is moot). */
  stage(opts?: StageOptions): Promise<BlobStage> {
    return FsStage.create(this.#staging, (from, digest, file) => this.#publish(from, digest, file), this.#budget.claim(), opts ?? {});
  }

  /**
   * Fsyncs the verified bytes at `from` (open as `file`) and renames them under `digest`. A blob
   * stored there already is the same bytes, so the rename may replace it: no look first (readers
   * of the old file keep their inode).
   */
  async #publish(from: string, digest: Sha256Hex, file: FileHandle): Promise<void> {
    const target = this.#path(digest);
    // The bytes reach the disk before the name does, or a crash could leave a short blob under it.
    await file.sync();
    await this.#renameInto(from, target);
    await fsyncPath(dirname(target));
    // The stage hashed these bytes on their way in and found `digest`: the file as renamed is a
    // verified version, so its first whole read need not hash it again (verify.ts). Its identity
    // comes from the stage's own open handle (a rename keeps inode, size and mtime): an fstat of a
    // held descriptor reads the inode in memory, so it is made in place, not through the thread pool.
    this.#verified.add(digest, versionOf(fstatSync(file.fd)));
  }

  /**
   * Renames `from` to `target`, making the target's shard folder first the first time this
   * process publishes there (256 of them; the server never removes one). Should one be gone
   * anyway, the rename fails with ENOENT and the folder is made again.
   */
  async #renameInto(from: string, target: string): Promise<void> {
    const dir = dirname(target);
    if (!this.#shards.has(dir)) {
      await mkdir(dir, { recursive: true });
      this.#shards.add(dir);
    }
    try {
      await rename(from, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      await mkdir(dir, { recursive: true });
      await rename(from, target);
    }
  }

  /**
   * Publishes an fsynced file whose bytes hash to `digest` (the caller checked) by hard-linking it
   * into place, leaving the file where it is: a shared stage's one chunk (`chunk-store.ts`).
   */
  async adopt(path: string, digest: Sha256Hex): Promise<void> {
    const target = this.#path(digest);
    await mkdir(dirname(target), { recursive: true });
    try {
      await link(path, target);
    } catch (err) {
      // Already stored: the same bytes.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      return;
    }
    await fsyncPath(dirname(target));
  }

  async get(digest: Sha256Hex, range?: ByteRange): Promise<Readable | null> {
    const fh = await unlessMissing(open(this.#path(digest), 'r'));
    if (!fh) return null;
    try {
      if (range) return new FileBody(fh, range);
      // A whole read is checked against its digest on the way (verify.ts): a file changed on disk
      // ends in an error, never in wrong bytes. A file already verified, unchanged since (same
      // inode, size and mtime), is not hashed again.
      const s = await fh.stat();
      return new FileBody(fh, { start: 0, end: s.size - 1 }, this.#verified.verification(digest, versionOf(s)));
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  async stat(digest: Sha256Hex): Promise<BlobInfo | null> {
    const s = await unlessMissing(stat(this.#path(digest)));
    return s && { digest, size: s.size, modifiedMs: s.mtimeMs };
  }

  async delete(digest: Sha256Hex): Promise<boolean> {
    return (await unlessMissing(unlink(this.#path(digest)).then(() => true))) ?? false;
  }

  /** One `<ab>` folder at a time; a file that goes between the listing and its stat is skipped. */
  async *list(): AsyncIterable<StoredBlob> {
    for (const shard of await readdir(this.#blobs)) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      const names = (await unlessMissing(readdir(join(this.#blobs, shard)))) ?? [];
      for (const name of names) {
        if (!isSha256Hex(name) || !name.startsWith(shard)) continue;
        const s = await unlessMissing(stat(join(this.#blobs, shard, name)));
        if (s?.isFile()) yield { digest: name, size: s.size, modifiedMs: s.mtimeMs };
      }
    }
  }
}

/** A stored file's identity and last change: what a verified read is remembered by. */
function versionOf(s: Stats): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
}

/**
 * Fsyncs the file or folder at `path` (a folder: so a rename into it is durable). Only the fsync,
 * which waits on the disk, goes through the thread pool; the open and the close are made in
 * place: a path the process has just written into resolves from the kernel's caches, as the warm
 * stat of the meta store does, and each hop through the pool costs more than either call (two
 * hops fewer per durable write).
 */
export async function fsyncPath(path: string): Promise<void> {
  const fd = openSync(path, 'r');
  try {
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

const fsyncFd = promisify(fsync);
