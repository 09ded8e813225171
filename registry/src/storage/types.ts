/**
 * The two stores every index shares. Backends (`fs/`, later `s3/`) implement these; nothing above
 * this folder knows which backend runs.
 */
import type { Readable } from 'node:stream';
import { NeutralError } from '../errors/neutral.js';

/** A sha256 digest as 64 lowercase hex characters (no `sha256:` prefix). */
export type Sha256Hex = string;

export interface BlobInfo {
  digest: Sha256Hex;
  size: number;
  /** When its bytes were written, epoch ms, where the store says (`stat` of fs and s3). */
  modifiedMs?: number;
}

/** A published blob as a listing of the store gives it. */
export interface StoredBlob extends BlobInfo {
  /** When its bytes were last written (fs: the file's mtime; s3: the object's LastModified), epoch ms. */
  modifiedMs: number;
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
  /**
   * Begins a staged write (see `BlobStage`): for bytes that must be checked, read back or
   * fanned out before they are published, or that arrive over several requests.
   */
  stage(opts?: StageOptions): Promise<BlobStage>;
  /**
   * Streams a blob, or null when absent. A whole read is verified on the way (`verify.ts`): bytes
   * that do not hash to `digest` (changed in the store behind its back) end the stream with
   * `DigestMismatchError` instead of its last chunk. A ranged read cannot be verified and is not.
   */
  get(digest: Sha256Hex, range?: ByteRange): Promise<Readable | null>;
  stat(digest: Sha256Hex): Promise<BlobInfo | null>;
  /** Returns false when the blob did not exist. */
  delete(digest: Sha256Hex): Promise<boolean>;
  /**
   * Every published blob, in no particular order, one page of the backend's listing at a time:
   * for the garbage collector (lifecycle/), never on a request's path. Blobs published or
   * deleted while it runs may or may not appear.
   */
  list(): AsyncIterable<StoredBlob>;
}

/**
 * Where a client may fetch a stored blob itself, instead of through this process: a short-lived
 * URL of the object store (s3 with `[storage] redirect = true`). The bytes are then not verified
 * on their way out (`verify.ts`); the object store's integrity is trusted for them.
 */
export interface BlobRedirect {
  /** A URL for the whole blob, or null when it is too small to be worth a redirect. */
  urlFor(blob: BlobInfo): Promise<string | null>;
}

export interface StageOptions {
  /**
   * The caller will read back what it writes (`read`, `readBack`). A backend whose staging is
   * remote (an S3 multipart upload) keeps a local copy in the data dir's scratch folder for it;
   * without this option such a backend may refuse reads.
   */
  readBack?: boolean;
  /**
   * The digest the bytes must have, when it is known before they arrive (a blob fetched by its
   * digest, a file whose sha256 the upstream gave, a push that names its digest). `commit` then
   * refuses other bytes with `DigestMismatchError` (as `commit(expected)` does), and a backend may
   * write straight to where a blob of that digest goes, unseen until the commit (s3: a multipart
   * upload to the blob's key, with no staging object to copy); the fs backend needs no such help.
   */
  expected?: Sha256Hex;
  /**
   * The bytes the caller expects to write (a declared Content-Length, an upstream's announced
   * size): reserved from the scratch budget before the stage begins (`scratch-budget.ts`), so a
   * write that cannot fit is refused before any byte is read (`ScratchTooLargeError`,
   * `ScratchBusyError` after a bounded wait). Bytes beyond it are counted as they land.
   */
  declared?: number;
  /**
   * The caller found no blob of the expected digest just before it began (a pull-through's
   * fetch): the commit does not ask the store again before it publishes (s3: one HEAD fewer per
   * blob). Should another process have stored it meanwhile, the same bytes go to the same key.
   */
  absent?: boolean;
}

export interface AppendOptions {
  /**
   * Told the new size each time bytes land (for readers tailing the stage), and the chunks that
   * just landed, in order and ending at that size: readers may take them from memory. Nobody may
   * change them.
   */
  onWritten?: (size: number, landed: readonly Buffer[]) => void;
  /**
   * The digest the whole stage must have once this append is in (an upload's last chunk): when
   * it has another, the append is undone like a failed one and `DigestMismatchError` thrown.
   */
  expect?: Sha256Hex;
  /** The bytes this append expects (a chunk's declared length): reserved first, as `StageOptions.declared`. */
  declared?: number;
}

/**
 * A write owned by the store: bytes stream in while they are hashed and counted, can be read back
 * where validation needs random access (a zip's directory is at its end), and become visible only
 * through `commit`, under the digest computed on the way in. Nothing staged is ever visible under
 * a digest; a stage left behind by a killed process is swept by age, never by a reader.
 *
 *   const stage = await blobs.stage();
 *   try {
 *     await stage.append(body);            // any number of times (an upload session's chunks)
 *     ...validate through stage.read / stage.readBack...
 *     await stage.commit(expected);        // DigestMismatchError: nothing published
 *   } finally {
 *     await stage.abort();                 // discards an uncommitted write; frees local copies
 *   }
 */
export interface BlobStage {
  /** Opaque and unique; names the stage in logs (and, later, in a persisted upload session). */
  readonly id: string;
  /** Bytes written so far; grows during `append` as each write lands. */
  readonly size: number;
  /**
   * The file on this machine that holds the bytes as they land (fs, and s3's local copy), which
   * another process of this server may open and tail while this one writes.
   */
  readonly localPath?: string;
  /**
   * Streams `source` onto the end while hashing it; resolves once every byte has landed. A
   * failure midway undoes this append (size and digest are as before it) and rejects. One append
   * at a time.
   */
  append(source: Readable, opts?: AppendOptions): Promise<void>;
  /** The sha256 of the bytes so far; the stage stays open for more. */
  digest(): Sha256Hex;
  /**
   * Random access to bytes already written: fills `buffer` from `position`, returns the bytes
   * read (fewer at the end). Valid until `abort`, also after `commit` (readers may still tail).
   */
  read(buffer: Buffer, position: number): Promise<number>;
  /** Streams bytes already written (`range` inclusive, or all); same lifetime as `read`. */
  readBack(range?: ByteRange): Readable;
  /**
   * Publishes the bytes under the digest computed while they streamed in. With `expected`, a
   * different digest throws `DigestMismatchError` and publishes nothing. Committing bytes that
   * are already stored is not an error. No append after a commit.
   */
  commit(expected?: Sha256Hex): Promise<BlobInfo>;
  /**
   * Ends the stage: an uncommitted write is discarded, local copies are freed. Idempotent, and
   * harmless after `commit`, so owners call it in a `finally`.
   */
  abort(): Promise<void>;
}

/**
 * Objects of a shared store that hold the pieces of a staged write several processes take part in
 * (`shared-stages.ts`): named by the caller, never visible under a digest, each written whole or
 * not at all. Only backends that other processes share (s3) have them.
 */
export interface ChunkStore {
  /** Streams `source` into a new object `name`, which exists only once every byte landed. Returns the size. */
  write(name: string, source: Readable): Promise<number>;
  /** Streams a chunk; `null` when it is absent. */
  read(name: string): Promise<Readable | null>;
  /** Removes a chunk; absent is no error. */
  remove(name: string): Promise<void>;
  /**
   * Publishes the concatenation of `chunks` as the blob `digest` inside the store (S3: a multipart
   * upload whose parts are server-side copies), whole or not at all. False, with nothing done, when
   * the store cannot (S3 needs every part but the last to be at least 5 MiB).
   */
  compose(chunks: readonly ChunkRef[], digest: Sha256Hex): Promise<boolean>;
  /** Every chunk (its name) last written before `before` (ms since the epoch). */
  listOlder(before: number): AsyncIterable<string>;
}

/** A chunk's name is the caller's (`<stage>/<uuid>`), but never leaves the chunk folder. */
export function assertChunkName(name: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(name) || name.includes('..')) throw new Error(`unsafe chunk name: ${JSON.stringify(name)}`);
}

export interface ChunkRef {
  name: string;
  size: number;
}

export interface Versioned<T> {
  doc: T;
  /** Opaque; pass it back to `put` to detect concurrent changes. */
  version: string;
}

/** How a read may be answered. */
export interface ReadOptions {
  /**
   * A copy read from the store a moment ago will do: with `[storage] read_cache_ms` set
   * (`recent-reads.ts`), such a read may be answered from this process's memory, at most that old.
   * For the read paths of requests (tags, manifests, pages, holds checked before serving), never
   * for a read that decides a write (updateDoc reads without it).
   */
  recent?: boolean;
}

/** The read of a request that serves content (a page, a manifest, a blob's holds): it may be recent. */
export const REQUEST_READ: ReadOptions = Object.freeze({ recent: true });

/** Small JSON documents keyed by slash-separated paths, with compare-and-swap writes. */
export interface MetaStore {
  /** The document and its version, or null when absent. Documents are frozen: copy before changing one. */
  get<T>(key: string, opts?: ReadOptions): Promise<Versioned<T> | null>;
  /**
   * Writes `doc` if the stored version is still `ifVersion` (`null`: only if absent; `undefined`:
   * unconditionally). Throws `ConflictError` otherwise. Returns the new version.
   */
  put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string>;
  /** Deletes; with `ifVersion`, only if unchanged. Returns false when absent. */
  delete(key: string, ifVersion?: string): Promise<boolean>;
  /** Every key below `prefix` (a folder, without trailing slash), in no particular order. */
  list(prefix: string): AsyncIterable<string>;
  /**
   * What this process last read or wrote under `key`, without asking the store (null: found
   * absent; undefined: nothing known): a guess for a compare-and-swap (`updateDoc`), never an
   * answer, for it may be stale. A store that keeps nothing leaves it out.
   */
  seen?(key: string): Versioned<unknown> | null | undefined;
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
 * process carries on. The message names the store and the cause, never a credential; it is for
 * the server's log (each ecosystem's answer says only that the store is not answering).
 */
export class StoreUnavailableError extends NeutralError {
  readonly kind = 'store_unavailable';

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
