/**
 * The bytes `start..end` of an open stored file, as the Readable `FsBlobStore.get` returns. It has
 * two ways out:
 *
 * - Piped into an HTTP response or a socket (what fastify does with a stream payload): each read
 *   fills a buffer of the shared pool (`read-buffers.ts`), which is written with a callback and
 *   given back once the socket has taken the bytes; the next read runs while a write is in
 *   flight. A download allocates nothing per chunk and adds no stream machinery per chunk.
 * - Anything else (read(), `for await`, a pipe into a transform that may keep its chunks): plain
 *   reads into fresh buffers, as `fs.createReadStream` does, since nothing tells when such a
 *   consumer is done with a chunk.
 *
 * With a `Verification`, the bytes are hashed on the way (verify.ts). The reader knows where the
 * end is, so it checks the digest before it lets the last chunk go: a mismatch errors the stream
 * with `DigestMismatchError` instead of ending it, and a client that was given Content-Length
 * sees a cut transfer, never a complete-looking wrong body.
 */
import type { FileHandle } from 'node:fs/promises';
import { ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { Readable, type Writable } from 'node:stream';
import type { ByteRange } from '../types.js';
import { RunningDigest, type Verification } from '../verify.js';
import { drainOrClose } from '../drain.js';
import { giveReadBuffer, READ_CHUNK, takeReadBuffer } from './read-buffers.js';

export class FileBody extends Readable {
  readonly #file: FileHandle;
  /** Next byte to read, and the first byte after the range. */
  #position: number;
  readonly #end: number;
  readonly #check: RunningDigest | undefined;
  readonly #onVerified: (() => void) | undefined;
  #mode: 'idle' | 'pulled' | 'piped' = 'idle';
  #verified = false;

  /** Takes ownership of `file`: it is closed when the body ends, fails or is destroyed. */
  constructor(file: FileHandle, range: ByteRange, verify?: Verification) {
    super({ highWaterMark: READ_CHUNK });
    this.#file = file;
    this.#position = range.start;
    this.#end = range.end + 1;
    this.#check = verify && new RunningDigest(verify.expected);
    this.#onVerified = verify?.onVerified;
  }

  override pipe<T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T {
    if (this.#mode !== 'idle' || !writesBeforeCallback(destination)) return super.pipe(destination, options);
    this.#mode = 'piped';
    void this.#writeTo(destination, options?.end ?? true);
    return destination;
  }

  override _read(): void {
    if (this.#mode === 'piped') return;
    this.#mode = 'pulled';
    void this.#pullOne();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // FileHandle.close waits for a read still running on it.
    this.#file.close().then(
      () => callback(err),
      () => callback(err),
    );
  }

  /** The piped way: pooled buffers, one read ahead of the socket. */
  async #writeTo(destination: Writable, end: boolean): Promise<void> {
    try {
      let next = this.#readAhead();
      while (next) {
        const { buffer, chunk } = await next;
        if (this.destroyed || destination.destroyed) {
          giveReadBuffer(buffer);
          this.destroy();
          return;
        }
        next = this.#readAhead();
        const more = destination.write(chunk, () => giveReadBuffer(buffer));
        if (!more && next) await drainOrClose(destination);
      }
      this.#verifyEnd();
      if (end) destination.end();
      // Ends the readable side, so the owner's end-of-stream watch (fastify's) sees a finished body.
      this.push(null);
      this.resume();
    } catch (err) {
      this.destroy(err as Error);
    }
  }

  /** The next read into a pooled buffer, started now and awaited later; null at the end. */
  #readAhead(): Promise<{ buffer: Buffer; chunk: Buffer }> | null {
    if (this.#position >= this.#end) return null;
    const read = this.#readInto(takeReadBuffer());
    // Handled where it is awaited; until then (a drain wait) its failure must not count as unhandled.
    read.catch(() => undefined);
    return read;
  }

  /** The pulled way: a fresh buffer per read, pushed to whoever reads. */
  async #pullOne(): Promise<void> {
    try {
      if (this.#position >= this.#end) {
        this.#verifyEnd();
        this.push(null);
        return;
      }
      const { chunk } = await this.#readInto(Buffer.allocUnsafeSlow(Math.min(READ_CHUNK, this.#end - this.#position)));
      if (this.destroyed) return;
      this.push(chunk);
      if (this.#position >= this.#end) this.push(null);
    } catch (err) {
      this.destroy(err as Error);
    }
  }

  /**
   * Reads the next bytes into `buffer`, hashes them, and, when they are the last, checks the
   * digest before anyone sees them (a mismatch rejects: the last chunk never goes out).
   */
  async #readInto(buffer: Buffer): Promise<{ buffer: Buffer; chunk: Buffer }> {
    const position = this.#position;
    const want = Math.min(buffer.length, this.#end - position);
    this.#position += want;
    const { bytesRead } = await this.#file.read(buffer, 0, want, position);
    if (bytesRead < want) {
      // The file is shorter than the size it was opened with: changed behind the store's back.
      const shortBy = want - bytesRead;
      throw new Error(`stored file ended ${shortBy} bytes before its recorded size (it was truncated in the store: restore it from a backup)`);
    }
    const chunk = buffer.subarray(0, bytesRead);
    this.#check?.update(chunk);
    if (this.#position >= this.#end) this.#verifyEnd();
    return { buffer, chunk };
  }

  /** Checks the digest once every byte has been hashed; throws the mismatch. */
  #verifyEnd(): void {
    if (this.#verified || !this.#check) return;
    this.#verified = true;
    const mismatch = this.#check.mismatch();
    if (mismatch) throw mismatch;
    this.#onVerified?.();
  }
}

/**
 * Destinations whose write callback runs only once the bytes have left the buffer (written to
 * the kernel, or failed): Node's sockets and HTTP responses. A transform may push the very buffer
 * it was given and call back at once, so lending pooled buffers to one would corrupt its output.
 */
function writesBeforeCallback(destination: NodeJS.WritableStream): destination is Writable {
  return destination instanceof ServerResponse || destination instanceof Socket;
}
