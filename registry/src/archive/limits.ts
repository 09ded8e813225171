/**
 * Bounds that hold whatever an archive claims about itself, and the per-request `Guard` that
 * enforces them: a byte budget, a compression-ratio check, a deadline that tears every open stream
 * down, and clean-up of temporary files.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { ArchiveError } from './errors.js';

/** Members returned by one listing; past this the listing stops and says `truncated`. */
export const MAX_MEMBERS_LISTED = 10_000;
/** Entries looked at by one request (finding a member walks the whole archive to catch duplicates). */
export const MAX_ENTRIES_SCANNED = 100_000;
/** Archives inside archives: `a.zip!/b.tar.gz!/c.whl!/x` is depth 3. */
export const MAX_NESTING_DEPTH = 3;
/** Decompressed or extracted bytes produced for one request, summed over every nesting level. */
export const MAX_BYTES_PER_REQUEST = 64 * 1024 * 1024;
/** Output/input ratio of one decompressor above which we call it a bomb (deflate tops out near 1032:1). */
export const MAX_COMPRESSION_RATIO = 200;
/** The ratio check starts once a decompressor has produced this much: tiny, very regular files are fine. */
export const RATIO_CHECK_FLOOR = 4 * 1024 * 1024;
/** Bytes of one member returned by one preview; the rest is reachable with `offset`. */
export const MAX_PREVIEW_BYTES = 1024 * 1024;
/** A nested zip (which needs random access) up to this size is held in memory, larger ones spill to a temp file. */
export const MAX_NESTED_IN_MEMORY = 16 * 1024 * 1024;
/** Wall-clock budget of one request. */
export const TIME_BUDGET_MS = 10_000;

export interface ArchiveLimits {
  maxMembersListed: number;
  maxEntriesScanned: number;
  maxNestingDepth: number;
  maxBytesPerRequest: number;
  maxCompressionRatio: number;
  ratioCheckFloor: number;
  maxPreviewBytes: number;
  maxNestedInMemory: number;
  timeBudgetMs: number;
}

export const DEFAULT_LIMITS: Readonly<ArchiveLimits> = Object.freeze({
  maxMembersListed: MAX_MEMBERS_LISTED,
  maxEntriesScanned: MAX_ENTRIES_SCANNED,
  maxNestingDepth: MAX_NESTING_DEPTH,
  maxBytesPerRequest: MAX_BYTES_PER_REQUEST,
  maxCompressionRatio: MAX_COMPRESSION_RATIO,
  ratioCheckFloor: RATIO_CHECK_FLOOR,
  maxPreviewBytes: MAX_PREVIEW_BYTES,
  maxNestedInMemory: MAX_NESTED_IN_MEMORY,
  timeBudgetMs: TIME_BUDGET_MS,
});

interface Destroyable {
  destroy(): unknown;
}

export class Guard {
  readonly limits: ArchiveLimits;
  #bytes = 0;
  #entries = 0;
  #failure: ArchiveError | null = null;
  readonly #streams = new Set<Destroyable>();
  readonly #cleanups: (() => Promise<void>)[] = [];

  constructor(limits: Partial<ArchiveLimits> = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /** Throws once the request has failed (deadline passed); walkers call it between entries. */
  check(): void {
    if (this.#failure) throw this.#failure;
  }

  /** Counts one archive entry looked at. */
  entry(): void {
    this.check();
    if (++this.#entries > this.limits.maxEntriesScanned) {
      throw new ArchiveError('too-large', `the archive has more than ${this.limits.maxEntriesScanned} entries, more than one request may scan`);
    }
  }

  /** Counts produced bytes against the request budget. */
  spend(n: number): void {
    this.check();
    this.#bytes += n;
    if (this.#bytes > this.limits.maxBytesPerRequest) {
      throw new ArchiveError('too-large', `inspecting this would decompress more than ${mib(this.limits.maxBytesPerRequest)} MiB, the limit of one request`);
    }
  }

  remainingBytes(): number {
    return this.limits.maxBytesPerRequest - this.#bytes;
  }

  /** Registers a stream to be destroyed when the request ends, however it ends. */
  track<S extends Destroyable>(stream: S): S {
    this.#streams.add(stream);
    return stream;
  }

  /** Forgets a stream that has been dealt with, so that a long walk does not pile them up. */
  untrack(stream: Destroyable): void {
    this.#streams.delete(stream);
  }

  onCleanup(fn: () => Promise<void>): void {
    this.#cleanups.push(fn);
  }

  /**
   * A pass-through that spends every byte it sees; with `input`, it also checks the ratio of its
   * output to the bytes counted by `input` (put `input` before a decompressor, this after it).
   */
  meter(what: string, input?: { count: number }): Transform {
    let out = 0;
    return this.track(
      new Transform({
        transform: (chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) => {
          out += chunk.length;
          try {
            this.spend(chunk.length);
            const { maxCompressionRatio: ratio, ratioCheckFloor: floor } = this.limits;
            if (input && out > floor && out > ratio * Math.max(input.count, 1)) {
              throw new ArchiveError('too-large', `${what} expands more than ${ratio}:1, refused as a likely decompression bomb`);
            }
          } catch (err) {
            done(err as Error);
            return;
          }
          done(null, chunk);
        },
      }),
    );
  }

  /** Counts bytes going into a decompressor, for `meter`'s ratio check. */
  counter(): { stream: Transform; count: number } {
    const state = { stream: undefined as unknown as Transform, count: 0 };
    state.stream = this.track(
      new Transform({
        transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
          state.count += chunk.length;
          done(null, chunk);
        },
      }),
    );
    return state;
  }

  /** Runs `work` under the deadline; afterwards every tracked stream is destroyed and temp files removed. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new ArchiveError('timeout', `inspecting the archive took longer than the ${this.limits.timeBudgetMs} ms budget of one request`);
        this.#fail(err);
        reject(err);
      }, this.limits.timeBudgetMs);
    });
    const job = work();
    job.catch(() => undefined); // settled late after a timeout: nobody listens any more
    try {
      return await Promise.race([job, deadline]);
    } finally {
      clearTimeout(timer);
      this.#fail(this.#failure ?? new ArchiveError('timeout', 'the request has ended'));
      for (const fn of this.#cleanups.splice(0)) await fn().catch(() => undefined);
    }
  }

  #fail(err: ArchiveError): void {
    this.#failure = err;
    // Destroyed without an error: a stream nobody listens to must not raise an 'error' event.
    // Whoever is still reading sees a premature close, then `check()` tells them why.
    for (const s of this.#streams) s.destroy();
    this.#streams.clear();
  }
}

function mib(n: number): string {
  return (n / (1024 * 1024)).toFixed(n % (1024 * 1024) === 0 ? 0 : 1);
}
