/**
 * Bytes that one writer adds while any number of readers tail them: a staged write of the store
 * (`BlobStage`) in the process that fetches, or the same file opened by path in another worker
 * process of the server (`workers/flight-tail.ts`). The source's size advances after each write
 * lands (`grew` wakes the readers); a reader reads up to it with positional reads and sleeps until
 * it moves. A reader never makes the writer wait and the writer never buffers for a reader, so
 * memory stays bounded by the stream buffers however large the bytes and however slow the reader.
 * Only the last two landings stay in memory, so a reader keeping up takes them from there instead
 * of reading back what was just written; one that falls behind reads the file.
 * The stage is the store's, so the bytes every reader got are the ones its `commit` publishes.
 */
import { Readable } from 'node:stream';

const READ_CHUNK = 256 * 1024;
/** Landings kept in memory for the readers (see `grew`): each is at most about 1 MiB. */
const RECENT_LANDINGS = 2;

type SpoolState = 'writing' | 'complete' | 'failed';

/** What a spool reads: bytes landed so far, positional reads of them, and an end to the handles. */
export interface TailSource {
  readonly size: number;
  read(buffer: Buffer, position: number): Promise<number>;
  /** Frees the source once no reader needs it (a `BlobStage` discards an uncommitted write). */
  abort(): Promise<void>;
}

export class Spool {
  readonly #stage: TailSource;
  #state: SpoolState = 'writing';
  #error: Error | undefined;
  #wakers = new Set<() => void>();
  /** The latest landings still in memory (see `grew`), oldest first. */
  #recent: Array<{ start: number; end: number; chunks: readonly Buffer[] }> = [];
  #refs = 0;
  #closed = false;

  constructor(stage: TailSource) {
    this.#stage = stage;
    // The spool's own reference, dropped by `dispose` once no new reader can join.
    this.#refs = 1;
  }

  get written(): number {
    return this.#stage.size;
  }

  /**
   * More bytes landed: readers waiting for them go on. With `landed` (the chunks that just landed,
   * ending at the new size), a reader at them takes them from memory instead of reading them back.
   */
  grew(landed?: readonly Buffer[]): void {
    if (landed && landed.length > 0) {
      const end = this.#stage.size;
      const start = end - landed.reduce((n, c) => n + c.length, 0);
      this.#recent = [...this.#recent, { start, end, chunks: landed }].slice(-RECENT_LANDINGS);
    }
    this.#wake();
  }

  /**
   * Up to `max` bytes from `pos` out of the recent landings, without a copy; undefined when they
   * are no longer in memory. Two landings are kept: a reader holding the last byte back stands
   * one byte before the newest landing.
   */
  #fromMemory(pos: number, max: number): Buffer | undefined {
    for (const landing of this.#recent) {
      if (pos < landing.start || pos >= landing.end) continue;
      let offset = landing.start;
      for (const chunk of landing.chunks) {
        if (pos < offset + chunk.length) {
          const from = pos - offset;
          return chunk.subarray(from, Math.min(chunk.length, from + max));
        }
        offset += chunk.length;
      }
    }
    return undefined;
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
    this.#recent = [];
    this.#wake();
  }

  /** Reserves a reader slot synchronously, so the handle stays open until `reader` takes it. */
  reserve(): () => void {
    this.#refs++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      void this.#unref();
    };
  }

  /** A stream of the spool from its first byte. Takes over a reservation from `reserve`. */
  reader(release: () => void): Readable {
    let pos = 0;
    let busy = false;
    let again = false;
    // A read cut short by a failed spool's stage ending says why the spool failed, not EBADF.
    const failure = (err: Error): Error => (this.#isFailed() && this.#error ? this.#error : err);
    const read = async (stream: Readable): Promise<void> => {
      for (;;) {
        if (stream.destroyed) return;
        if (this.#state === 'failed') {
          stream.destroy(this.#error);
          return;
        }
        // Until the bytes are verified, the last one is held back: a client that knows the
        // length (Content-Length) must never receive a complete body that later proves bad.
        const written = this.#stage.size;
        const available = (this.#state === 'complete' ? written : written - 1) - pos;
        if (available > 0) {
          const held = this.#fromMemory(pos, available);
          if (held) {
            pos += held.length;
            if (!stream.push(held)) return;
            continue;
          }
          const buf = Buffer.allocUnsafe(Math.min(available, READ_CHUNK));
          const bytesRead = await this.#stage.read(buf, pos);
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
    // One read loop at a time. A `_read` call that comes while it runs (the stream asks again
    // right after a push made inside the loop) is remembered, not dropped: the stream does not ask
    // twice, so a dropped request would leave the reader waiting for a loop that already returned.
    const pump = (stream: Readable): void => {
      busy = true;
      again = false;
      read(stream).then(
        () => {
          busy = false;
          if (again && !stream.destroyed) pump(stream);
        },
        (err: Error) => {
          busy = false;
          stream.destroy(failure(err));
        },
      );
    };
    return new Readable({
      read() {
        if (busy) {
          again = true;
          return;
        }
        pump(this);
      },
      destroy(err, done) {
        release();
        done(err);
      },
    });
  }

  /** No new readers will join: the stage ends (an uncommitted write is discarded) when the last reader ends. */
  async dispose(): Promise<void> {
    // A failed spool's readers only error from here on: its bytes can go at once.
    if (this.#state === 'failed') await this.#stage.abort().catch(() => undefined);
    await this.#unref();
  }

  /** Drops a reference; the last one ends the stage (its promise settles when the stage has ended). */
  async #unref(): Promise<void> {
    this.#refs--;
    if (this.#refs === 0 && !this.#closed) {
      this.#closed = true;
      this.#recent = [];
      await this.#stage.abort().catch(() => undefined);
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
