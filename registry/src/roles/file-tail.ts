/**
 * Another process's staged file, opened by its path and read up to the size its writer last
 * announced (`Spool` tails it as a follower of a flight: `single-flight.ts`). The handle keeps the
 * bytes readable after the writer renames the file into the store or unlinks it.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { TailSource } from './spool.js';

export class FileTail implements TailSource {
  /** Bytes the writer says have landed; readers never read past it. */
  size = 0;
  #closed = false;

  private constructor(private readonly handle: FileHandle) {}

  /** Opens `path`, or null when it is gone already (committed under its digest, or discarded). */
  static async open(path: string): Promise<FileTail | null> {
    try {
      return new FileTail(await open(path, 'r'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async read(buffer: Buffer, position: number): Promise<number> {
    const length = Math.min(buffer.length, this.size - position);
    if (length <= 0) return 0;
    const { bytesRead } = await this.handle.read(buffer, 0, length, position);
    return bytesRead;
  }

  async abort(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.handle.close().catch(() => undefined);
  }
}
