/**
 * The two stores every index shares. Backends (`fs/`, later `s3/`) implement these; nothing above
 * this folder knows which backend runs.
 */
import type { Readable } from 'node:stream';

/** A sha256 digest as 64 lowercase hex characters (no `sha256:` prefix). */
export type Sha256Hex = string;

export interface BlobInfo {
  digest: Sha256Hex;
  size: number;
}

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

/** Content-addressed bytes. A blob becomes visible only once its digest has been verified. */
export interface BlobStore {
  /**
   * Streams `source` into staging while hashing it, and publishes it under its digest. With
   * `expected`, bytes that hash to anything else are discarded and `DigestMismatchError` thrown.
   */
  put(source: Readable, expected?: Sha256Hex): Promise<BlobInfo>;
  /** Publishes a local file that the caller has already written (and may have hashed). */
  putFile(path: string, expected?: Sha256Hex): Promise<BlobInfo>;
  get(digest: Sha256Hex, range?: ByteRange): Promise<Readable | null>;
  stat(digest: Sha256Hex): Promise<BlobInfo | null>;
  /** Returns false when the blob did not exist. */
  delete(digest: Sha256Hex): Promise<boolean>;
}

export interface Versioned<T> {
  doc: T;
  /** Opaque; pass it back to `put` to detect concurrent changes. */
  version: string;
}

/** Small JSON documents keyed by slash-separated paths, with compare-and-swap writes. */
export interface MetaStore {
  get<T>(key: string): Promise<Versioned<T> | null>;
  /**
   * Writes `doc` if the stored version is still `ifVersion` (`null`: only if absent; `undefined`:
   * unconditionally). Throws `ConflictError` otherwise. Returns the new version.
   */
  put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string>;
  /** Deletes; with `ifVersion`, only if unchanged. Returns false when absent. */
  delete(key: string, ifVersion?: string): Promise<boolean>;
  /** Every key below `prefix` (a folder, without trailing slash), in no particular order. */
  list(prefix: string): AsyncIterable<string>;
}

export class DigestMismatchError extends Error {
  constructor(
    readonly expected: Sha256Hex,
    readonly actual: Sha256Hex,
  ) {
    super(`content digest sha256:${actual} does not match the expected sha256:${expected}`);
    this.name = 'DigestMismatchError';
  }
}

export class ConflictError extends Error {
  constructor(readonly key: string) {
    super(`concurrent change to ${key}`);
    this.name = 'ConflictError';
  }
}

/**
 * The backing store did not answer, or answered with a failure of its own (down, unreachable,
 * overloaded). The operation may or may not have taken effect; a request fails with a 5xx and the
 * process carries on. The message names the store and the cause, never a credential.
 */
export class StoreUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreUnavailableError';
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
export function isSha256Hex(value: string): boolean {
  return SHA256_HEX.test(value);
}

const KEY_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._+~-]*$/;
/** Metadata keys are built by the server, but are checked anyway: a bad one is a bug, not input. */
export function assertSafeKey(key: string): void {
  const segments = key.split('/');
  if (segments.length === 0 || !segments.every((s) => KEY_SEGMENT.test(s))) {
    throw new Error(`unsafe metadata key: ${JSON.stringify(key)}`);
  }
}
