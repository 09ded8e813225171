/**
 * The CRC32 of every part of a file that grows at its end, computed while its bytes are written
 * (they pass through memory then, hot in the cache). A part's request must carry its checksum
 * (`x-amz-checksum-crc32`, `put.ts`) before its first byte; knowing it beforehand lets the part
 * stream from the file to the store instead of being read whole into memory, or read twice.
 *
 * Only the end of the file is ever undone (a failed append truncates what it wrote): `mark`
 * before the bytes, `rewind` to it when they are taken back.
 */
import { crc32 } from 'node:zlib';

/** Where the checksums stood: `rewind` goes back there. */
export interface ChecksumMark {
  readonly whole: number;
  readonly tail: number;
  readonly tailLength: number;
}

export class PartChecksums {
  /** The CRC32 of each whole part, in order. */
  readonly #whole: number[] = [];
  /** The CRC32 of the bytes after the last whole part, and how many there are. */
  #tail = 0;
  #tailLength = 0;

  constructor(readonly partSize: number) {}

  /** Bytes recorded so far. */
  get length(): number {
    return this.#whole.length * this.partSize + this.#tailLength;
  }

  /** `bytes` were written at the file's end. */
  add(bytes: Buffer): void {
    let off = 0;
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
    return { whole: this.#whole.length, tail: this.#tail, tailLength: this.#tailLength };
  }

  /** The bytes recorded since `mark` were taken back. */
  rewind(mark: ChecksumMark): void {
    this.#whole.length = mark.whole;
    this.#tail = mark.tail;
    this.#tailLength = mark.tailLength;
  }

  /**
   * The CRC32 of part `index` (from 0), `length` bytes long: a whole part, or the bytes after the
   * last whole one. Any other slice was not recorded as such: an error, never a wrong checksum.
   */
  of(index: number, length: number): number {
    const whole = this.#whole[index];
    if (whole !== undefined && length === this.partSize) return whole;
    if (index === this.#whole.length && length === this.#tailLength) return this.#tail;
    throw new Error(`no checksum for part ${index + 1} of ${length} bytes: ${this.length} bytes were recorded in parts of ${this.partSize}`);
  }
}
