/**
 * Zip (wheels, eggs) through yauzl with lazy entries. yauzl reads through a RandomAccessReader over
 * ranged reads of the source, so only the central directory and the members we open are read;
 * small reads (headers) go through a little block cache instead of one ranged read each.
 */
import { PassThrough, type Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';
import * as yauzl from 'yauzl';
import { ArchiveError } from './errors.js';
import type { Guard } from './limits.js';
import { formatOf, memberPath, unsafeReason } from './names.js';
import type { ArchiveSource } from './source.js';
import { chain, exactSize } from './streams.js';
import type { MemberInfo, MemberKind, Visit } from './types.js';

const BLOCK_SIZE = 64 * 1024;
const CACHED_BLOCKS = 8;

class SourceReader extends yauzl.RandomAccessReader {
  readonly #blocks = new Map<number, Promise<Buffer>>();

  constructor(
    private readonly source: ArchiveSource,
    private readonly guard: Guard,
  ) {
    super();
  }

  /** Member data: one ranged read, streamed. `end` is exclusive here. */
  override _readStreamForRange(start: number, end: number): Readable {
    const out = this.guard.track(new PassThrough());
    this.source.open({ start, end: end - 1 }).then(
      (stream) => {
        this.guard.track(stream);
        chain(stream, out);
      },
      (err: Error) => out.destroy(err),
    );
    return out;
  }

  /** Header reads: served from cached blocks. */
  override read(buffer: Buffer, offset: number, length: number, position: number, callback: (err: Error | null) => void): void {
    this.#copy(buffer, offset, length, position).then(
      () => callback(null),
      (err: Error) => callback(err),
    );
  }

  override close(callback: (err: Error | null) => void): void {
    this.#blocks.clear();
    setImmediate(() => callback(null));
  }

  async #copy(buffer: Buffer, offset: number, length: number, position: number): Promise<void> {
    if (position < 0 || position + length > this.source.size) {
      throw new ArchiveError('corrupt', 'the zip archive points past its own end');
    }
    let done = 0;
    while (done < length) {
      const at = position + done;
      const index = Math.floor(at / BLOCK_SIZE);
      const block = await this.#block(index);
      const from = at - index * BLOCK_SIZE;
      const n = Math.min(length - done, block.length - from);
      if (n <= 0) throw new ArchiveError('corrupt', 'the zip archive ends unexpectedly');
      block.copy(buffer, offset + done, from, from + n);
      done += n;
    }
  }

  #block(index: number): Promise<Buffer> {
    let block = this.#blocks.get(index);
    if (!block) {
      const start = index * BLOCK_SIZE;
      const end = Math.min(this.source.size, start + BLOCK_SIZE) - 1;
      block = this.source.open({ start, end }).then(async (s) => Buffer.concat(await this.guard.track(s).toArray()));
      block.catch(() => this.#blocks.delete(index));
      this.#blocks.set(index, block);
      const oldest = this.#blocks.keys().next().value;
      if (this.#blocks.size > CACHED_BLOCKS && oldest !== undefined) this.#blocks.delete(oldest);
    }
    return block;
  }
}

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const MADE_BY_UNIX = 3;
const DOS_DIRECTORY = 0x10;

function kindOf(entry: yauzl.Entry, name: string): MemberKind {
  if (name.endsWith('/')) return 'directory';
  const unixType = entry.versionMadeBy >> 8 === MADE_BY_UNIX ? (entry.externalFileAttributes >>> 16) & S_IFMT : 0;
  if (unixType === S_IFLNK) return 'symlink';
  if (unixType === S_IFDIR || (entry.externalFileAttributes & DOS_DIRECTORY) !== 0) return 'directory';
  if (unixType !== 0 && unixType !== S_IFREG) return 'other';
  return 'file';
}

export async function walkZip(source: ArchiveSource, guard: Guard, visit: Visit): Promise<void> {
  const reader = new SourceReader(source, guard);
  const zip = await yauzl.fromRandomAccessReaderPromise(reader, source.size, {
    lazyEntries: true,
    autoClose: false,
    // We decode names ourselves: yauzl would abort the whole archive on one unsafe name, and we
    // want such members listed (flagged) rather than hidden.
    decodeStrings: false,
    validateEntrySizes: true,
  });
  try {
    const entries = zip.eachEntry();
    for (;;) {
      const step = await entries.next();
      if (step.done) break;
      guard.entry();
      const entry = step.value;
      const name = yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, entry.fileNameRaw, entry.extraFields, true);
      const path = memberPath(name);
      const kind = kindOf(entry, name);
      const info: MemberInfo = { path, kind, size: entry.uncompressedSize, compressedSize: entry.compressedSize };
      const nested = formatOf(path);
      if (kind === 'file' && nested !== null && nested !== 'download-only') info.nested = nested;
      if (entry.isEncrypted()) info.encrypted = true;
      const unsafe = unsafeReason(path);
      if (unsafe) info.unsafe = unsafe;
      const more = await visit({ info, open: () => openEntry(zip, entry, info, guard) });
      if (!more) break;
    }
  } finally {
    try {
      zip.close();
    } catch {
      // already closed
    }
  }
}

async function openEntry(zip: yauzl.ZipFile, entry: yauzl.Entry, info: MemberInfo, guard: Guard): Promise<Readable> {
  const what = `member ${info.path}`;
  if (entry.isEncrypted()) throw new ArchiveError('unsupported', `${what} is encrypted; encrypted zip members cannot be previewed`);
  const method = entry.compressionMethod;
  if (method !== 0 && method !== 8) {
    throw new ArchiveError('unsupported', `${what} uses zip compression method ${method}; only stored (0) and deflate (8) members can be previewed`);
  }
  // Raw bytes: we inflate ourselves to meter both sides of the decompressor.
  const raw = guard.track(await zip.openReadStreamPromise(entry, { decodeFileData: false }));
  if (method === 0) return chain(raw, exactSize(entry.uncompressedSize, what), guard.meter(what));
  const input = guard.counter();
  return chain(raw, input.stream, guard.track(createInflateRaw()), exactSize(entry.uncompressedSize, what), guard.meter(what, input));
}
