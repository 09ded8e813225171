/**
 * The fs backend's `ChunkStore`, for the worker processes of one server sharing a data dir
 * (`workers/`): the pieces of shared stages, one file each, under `root/chunks/<name>`.
 *
 * A chunk streams into the staging folder and is fsynced and renamed into place once the source
 * ended, so it appears whole or not at all; a source that fails midway leaves only a staged file,
 * which is removed at once (or swept by age, if the process died).
 *
 * `compose` of a single chunk (a monolithic or single-PATCH push, the common case) hard-links the
 * chunk file as the blob: no byte is copied. Several chunks are left to the caller, which streams
 * them through an ordinary stage.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fsyncPath } from './blob-store.js';
import { unlessMissing } from './missing.js';
import { assertChunkName, type ChunkRef, type ChunkStore, type Sha256Hex } from '../types.js';

/** Publishes the file at `path` as the blob `digest` without moving it (a hard link). */
export type AdoptFile = (path: string, digest: Sha256Hex) => Promise<void>;

export class FsChunkStore implements ChunkStore {
  readonly #chunks: string;
  readonly #staging: string;

  constructor(
    root: string,
    private readonly adopt: AdoptFile,
  ) {
    this.#chunks = join(root, 'chunks');
    this.#staging = join(root, 'staging');
  }

  #path(name: string): string {
    assertChunkName(name);
    return join(this.#chunks, name);
  }

  async write(name: string, source: Readable): Promise<number> {
    const path = this.#path(name);
    const temp = join(this.#staging, `chunk-${randomUUID()}`);
    try {
      const out = createWriteStream(temp, { flags: 'wx' });
      await pipeline(source, out);
      await fsyncPath(temp);
      await mkdir(dirname(path), { recursive: true });
      await rename(temp, path);
      await fsyncPath(dirname(path));
      return out.bytesWritten;
    } catch (err) {
      await unlessMissing(unlink(temp));
      throw err;
    }
  }

  async read(name: string): Promise<Readable | null> {
    const fh = await unlessMissing(open(this.#path(name), 'r'));
    return fh ? fh.createReadStream() : null;
  }

  async remove(name: string): Promise<void> {
    await unlessMissing(unlink(this.#path(name)));
    // The stage's folder goes with its last chunk; another chunk landing meanwhile keeps it.
    await unlessMissing(rmdirIfEmpty(dirname(this.#path(name))));
  }

  async compose(chunks: readonly ChunkRef[], digest: Sha256Hex): Promise<boolean> {
    const only = chunks.length === 1 ? chunks[0] : undefined;
    if (only === undefined) return false;
    await this.adopt(this.#path(only.name), digest);
    return true;
  }

  async *listOlder(before: number): AsyncIterable<string> {
    const entries = (await unlessMissing(readdir(this.#chunks, { recursive: true }))) ?? [];
    for (const entry of entries) {
      const path = join(this.#chunks, entry);
      const s = await unlessMissing(stat(path));
      if (s?.isFile() && s.mtimeMs < before) yield relative(this.#chunks, path).split(sep).join('/');
    }
  }
}

async function rmdirIfEmpty(dir: string): Promise<void> {
  try {
    await rmdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOTEMPTY') throw err;
  }
}
