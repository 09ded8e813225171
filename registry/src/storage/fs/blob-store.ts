/**
 * Filesystem BlobStore. Layout under `root`: `blobs/sha256/<ab>/<digest>` for published bytes and
 * `staging/` for bytes in flight. A blob is written to staging, fsynced, verified, then renamed
 * (or hard-linked) into place, so a crash at any moment leaves no partial blob visible.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HashingStream } from '../hashing.js';
import { unlessMissing } from './missing.js';
import { DigestMismatchError, isSha256Hex, type BlobInfo, type BlobStore, type ByteRange, type Sha256Hex } from '../types.js';

const READ_CHUNK = 256 * 1024;

export class FsBlobStore implements BlobStore {
  readonly #blobs: string;
  readonly #staging: string;

  constructor(root: string) {
    this.#blobs = join(root, 'blobs', 'sha256');
    this.#staging = join(root, 'staging');
  }

  async init(): Promise<void> {
    await mkdir(this.#blobs, { recursive: true });
    await mkdir(this.#staging, { recursive: true });
  }

  #path(digest: Sha256Hex): string {
    if (!isSha256Hex(digest)) throw new Error(`not a sha256 digest: ${digest}`);
    return join(this.#blobs, digest.slice(0, 2), digest);
  }

  async put(source: Readable, expected?: Sha256Hex): Promise<BlobInfo> {
    const tmp = join(this.#staging, randomUUID());
    const hasher = new HashingStream();
    try {
      await pipeline(source, hasher, createWriteStream(tmp, { flags: 'wx' }));
      await fsyncPath(tmp);
      const digest = hasher.digest();
      if (expected !== undefined && digest !== expected) throw new DigestMismatchError(expected, digest);
      await this.#publish(tmp, digest, 'rename');
      return { digest, size: hasher.size };
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  async putFile(path: string, expected?: Sha256Hex): Promise<BlobInfo> {
    const hasher = new HashingStream();
    await pipeline(createReadStream(path), hasher, new Writable({ write: (_chunk, _enc, next) => next() }));
    const digest = hasher.digest();
    if (expected !== undefined && digest !== expected) throw new DigestMismatchError(expected, digest);
    await fsyncPath(path);
    await this.#publish(path, digest, 'link');
    return { digest, size: hasher.size };
  }

  /** Makes verified bytes at `from` visible under `digest`; an existing blob is the same bytes. */
  async #publish(from: string, digest: Sha256Hex, how: 'rename' | 'link'): Promise<void> {
    const target = this.#path(digest);
    if (await exists(target)) return;
    await mkdir(dirname(target), { recursive: true });
    if (how === 'rename') {
      await rename(from, target);
    } else {
      try {
        await link(from, target);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') return;
        if (code !== 'EXDEV' && code !== 'EPERM') throw err;
        // Another filesystem: copy into staging first so the rename stays atomic.
        const tmp = join(this.#staging, randomUUID());
        try {
          await copyFile(from, tmp);
          await fsyncPath(tmp);
          await rename(tmp, target);
        } finally {
          await unlink(tmp).catch(() => undefined);
        }
      }
    }
    await fsyncPath(dirname(target));
  }

  async get(digest: Sha256Hex, range?: ByteRange): Promise<Readable | null> {
    const fh = await unlessMissing(open(this.#path(digest), 'r'));
    // 256 KiB reads instead of Node's 64 KiB: a quarter of the syscalls and socket writes on
    // large artifacts, still a small buffer per download.
    return fh && fh.createReadStream({ ...(range ? { start: range.start, end: range.end } : {}), highWaterMark: READ_CHUNK });
  }

  async stat(digest: Sha256Hex): Promise<BlobInfo | null> {
    const s = await unlessMissing(stat(this.#path(digest)));
    return s && { digest, size: s.size };
  }

  async delete(digest: Sha256Hex): Promise<boolean> {
    return (await unlessMissing(unlink(this.#path(digest)).then(() => true))) ?? false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
