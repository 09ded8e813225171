/**
 * A spool file that one writer fills while any number of readers tail it. The writer advances a
 * byte counter after each write lands in the file; a reader reads up to that counter with
 * positional reads on a shared handle and sleeps until the counter moves. A reader never makes the
 * writer wait and the writer never buffers for a reader, so memory stays bounded by the stream
 * buffers however large the file and however slow the reader.
 */
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { Readable, Writable } from 'node:stream';

const READ_CHUNK = 64 * 1024;

type SpoolState = 'writing' | 'complete' | 'failed';

export class Spool {
  readonly path: string;
  #written = 0;
  #state: SpoolState = 'writing';
  #error: Error | undefined;
  #wakers = new Set<() => void>();
  #refs = 0;
  #closed = false;
  readonly #writeHandle: FileHandle;
  readonly #readHandle: FileHandle;

  private constructor(path: string, writeHandle: FileHandle, readHandle: FileHandle) {
    this.path = path;
    this.#writeHandle = writeHandle;
    this.#readHandle = readHandle;
    // The spool's own reference, dropped by `dispose` once no new reader can join.
    this.#refs = 1;
  }

  static async create(path: string): Promise<Spool> {
    const w = await open(path, 'wx');
    try {
      const r = await open(path, 'r');
      return new Spool(path, w, r);
    } catch (err) {
      await w.close();
      await unlink(path).catch(() => undefined);
      throw err;
    }
  }

  get written(): number {
    return this.#written;
  }

  /** A sink that appends to the spool; finishing it does not complete the spool (see `complete`). */
  writer(): Writable {
    return new Writable({
      write: (chunk: Buffer, _enc, done) => {
        this.#append(chunk).then(() => done(), done);
      },
      final: (done) => {
        this.#writeHandle.sync().then(() => done(), done);
      },
    });
  }

  async #append(chunk: Buffer): Promise<void> {
    let off = 0;
    while (off < chunk.length) {
      const { bytesWritten } = await this.#writeHandle.write(chunk, off, chunk.length - off, this.#written + off);
      off += bytesWritten;
    }
    this.#written += chunk.length;
    this.#wake();
  }

  /** Readers that reach the end now end cleanly. Call only once the bytes have been verified. */
  complete(): void {
    if (this.#state !== 'writing') return;
    this.#state = 'complete';
    this.#wake();
  }

  /** Every reader errors with `err` (a client sees a failed download, never a truncated one). */
  fail(err: Error): void {
    if (this.#state !== 'writing') return;
    this.#state = 'failed';
    this.#error = err;
    this.#wake();
  }

  /** Reserves a reader slot synchronously, so the handle stays open until `reader` takes it. */
  reserve(): () => void {
    this.#refs++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#unref();
    };
  }

  /** A stream of the spool from its first byte. Takes over a reservation from `reserve`. */
  reader(release: () => void): Readable {
    let pos = 0;
    let busy = false;
    const read = async (stream: Readable): Promise<void> => {
      for (;;) {
        if (stream.destroyed) return;
        if (this.#state === 'failed') {
          stream.destroy(this.#error);
          return;
        }
        // Until the bytes are verified, the last one is held back: a client that knows the
        // length (Content-Length) must never receive a complete body that later proves bad.
        const available = (this.#state === 'complete' ? this.#written : this.#written - 1) - pos;
        if (available > 0) {
          const buf = Buffer.allocUnsafe(Math.min(available, READ_CHUNK));
          const { bytesRead } = await this.#readHandle.read(buf, 0, buf.length, pos);
          if (stream.destroyed) return;
          pos += bytesRead;
          // A failure may have been declared while reading; the error must win over the bytes.
          if (this.#isFailed()) continue;
          if (!stream.push(bytesRead === buf.length ? buf : buf.subarray(0, bytesRead))) return;
          continue;
        }
        if (this.#state === 'complete') {
          stream.push(null);
          return;
        }
        await new Promise<void>((resolve) => this.#wakers.add(resolve));
      }
    };
    return new Readable({
      read() {
        if (busy) return;
        busy = true;
        read(this).then(
          () => (busy = false),
          (err: Error) => {
            busy = false;
            this.destroy(err);
          },
        );
      },
      destroy(err, done) {
        release();
        done(err);
      },
    });
  }

  /** No new readers will join: the spool file goes, the handles close when the last reader ends. */
  async dispose(): Promise<void> {
    await this.#writeHandle.close().catch(() => undefined);
    await unlink(this.path).catch(() => undefined);
    this.#unref();
  }

  #unref(): void {
    this.#refs--;
    if (this.#refs === 0 && !this.#closed) {
      this.#closed = true;
      void this.#readHandle.close().catch(() => undefined);
    }
  }

  /** A method, not a field read: the state can change across the awaits of a reader loop. */
  #isFailed(): boolean {
    return this.#state === 'failed';
  }

  #wake(): void {
    const wakers = this.#wakers;
    this.#wakers = new Set();
    for (const w of wakers) w();
  }
}
