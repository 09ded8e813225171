/**
 * The CRC32 of every part of a file that grows at its end. A part's request must carry its
 * checksum (`x-amz-checksum-crc32`, `put.ts`) before its first byte; knowing it beforehand lets the
 * part stream from the file to the store instead of being read whole into memory first.
 *
 * The first part's is computed from the file when it is asked for: most stages never need it (a
 * blob that fits one part goes up checked by its sha256). Every later part's is computed while its
 * bytes are written (they pass through memory then, hot in the cache), so a large blob is read
 * once more only for its first part.
 *
 * Only the end of the file is ever undone (a failed append truncates what it wrote): `mark`
 * before the bytes, `rewind` to it when they are taken back.
 */
import { createReadStream } from 'node:fs';
import { crc32 } from 'node:zlib';

/** Where the checksums stood: `rewind` goes back there. */
export interface ChecksumMark {
  readonly length: number;
  readonly whole: number;
  readonly tail: number;
  readonly tailLength: number;
}

/** Bytes read at once when the first part's checksum is computed from the file. */
const READ_BYTES = 1024 * 1024;

export class PartChecksums {
  /** Bytes written to the file. */
  #length = 0;
  /** The CRC32 of each whole part after the first, in order. */
  readonly #whole: number[] = [];
  /** The CRC32 of the bytes after the last whole part (past the first part), and how many there are. */
  #tail = 0;
  #tailLength = 0;

  constructor(
    readonly partSize: number,
    /** The file: the first part's checksum is read from it. */
    private readonly path: string,
  ) {}

  /** Bytes recorded so far. */
  get length(): number {
    return this.#length;
  }

  /** `bytes` were written at the file's end. */
  add(bytes: Buffer): void {
    // The first part's bytes are only counted.
    let off = Math.min(bytes.length, Math.max(0, this.partSize - this.#length));
    this.#length += bytes.length;
    while (off < bytes.length) {
      const take = Math.min(bytes.length - off, this.partSize - this.#tailLength);
      this.#tail = crc32(bytes.subarray(off, off + take), this.#tail);
      this.#tailLength += take;
      off += take;
      if (this.#tailLength === this.partSize) {
        this.#whole.push(this.#tail);
        this.#tail = 0;
        this.#tailLength = 0;
      }
    }
  }

  mark(): ChecksumMark {
    return { length: this.#length, whole: this.#whole.length, tail: this.#tail, tailLength: this.#tailLength };
  }

  /** The bytes recorded since `mark` were taken back. */
  rewind(mark: ChecksumMark): void {
    this.#length = mark.length;
    this.#whole.length = mark.whole;
    this.#tail = mark.tail;
    this.#tailLength = mark.tailLength;
  }

  /**
   * The CRC32 of part `index` (from 0), `length` bytes long: a whole part, or the last one. Any
   * other slice was not recorded as such: an error, never a wrong checksum.
   */
  async of(index: number, length: number): Promise<number> {
    const end = index * this.partSize + length;
    const fits = length === this.partSize ? end <= this.#length : end === this.#length;
    if (!fits || length > this.partSize) throw new Error(`no checksum for part ${index + 1} of ${length} bytes: ${this.#length} bytes were recorded in parts of ${this.partSize}`);
    if (index === 0) return this.#read(length);
    return this.#whole[index - 1] ?? this.#tail;
  }

  /** The CRC32 of the file's first `length` bytes. */
  async #read(length: number): Promise<number> {
    if (length === 0) return 0;
    let crc = 0;
    let read = 0;
    for await (const chunk of createReadStream(this.path, { start: 0, end: length - 1, highWaterMark: READ_BYTES })) {
      crc = crc32(chunk as Buffer, crc);
      read += (chunk as Buffer).length;
    }
    if (read !== length) throw new Error(`${this.path} ended after ${read} of its first ${length} bytes`);
    return crc;
  }
}
