/**
 * Blob upload sessions of the OCI API, behind one interface with two homes, chosen by
 * `Stores.shared` (design.md §4):
 *
 * - `MemoryUploadSessions` (fs backend): process memory, lost on restart, as the spec says; each
 *   session owns one of the process's own staged writes;
 * - `SharedUploadSessions` (s3 backend): in the shared store (`storage/shared-stages.ts`), so
 *   each verb of a chunked push may reach another process.
 *
 * Either way a chunk is hashed as it streams in, a commit compares digests and publishes, and no
 * blob is held in memory. A request that fails midway, or a last chunk that leaves the session at
 * another digest, leaves the session as it was.
 */
import type { Readable } from 'node:stream';
import type { Sha256Hex } from '../../../storage/types.js';

/** A session as the request that read it saw it. */
export interface UploadSession {
  readonly id: string;
  /** The hosted index the blob will be committed for, and the repository of the request. */
  readonly indexName: string;
  readonly repo: string;
  /** Bytes of the requests that completed (never a chunk still streaming in). */
  readonly size: number;
}

export interface UploadSessions {
  open(indexName: string, repo: string): Promise<UploadSession>;
  /** The session, if it exists and belongs to this index and repository. */
  get(id: string, indexName: string, repo: string): Promise<UploadSession | undefined>;
  /**
   * Appends one request's chunk; returns the session after it. `declared` (its Content-Length) is
   * reserved from the scratch budget before a byte is read (storage/scratch-budget.ts).
   */
  append(s: UploadSession, source: Readable, declared?: number): Promise<UploadSession>;
  /**
   * Appends `last` (if any), checks that the bytes hash to `expected` (`DigestMismatchError`
   * otherwise, the session as before), runs `beforePublish` (the index's hold on the digest),
   * publishes the blob and ends the session. `declared`: the length of `last`, as for `append`.
   */
  commit(s: UploadSession, expected: Sha256Hex, last: Readable | null, beforePublish: (size: number) => Promise<void>, declared?: number): Promise<void>;
  /** Ends the session and discards its bytes. */
  cancel(s: UploadSession): Promise<void>;
  close(): Promise<void>;
}

/**
 * Another request is using the session, or changed it since this one read it (two PATCHes at
 * once, possibly on two processes). `current` is the session now: the spec's 416 reports its range.
 */
export class SessionBusyError extends Error {
  constructor(readonly current: UploadSession) {
    super(`upload ${current.id} is receiving another request`);
    this.name = 'SessionBusyError';
  }
}

/** The session is gone: committed, cancelled or expired, possibly by another request meanwhile. */
export class SessionGoneError extends Error {
  constructor(readonly id: string) {
    super(`upload ${id} is unknown (it may have been committed, cancelled or expired)`);
    this.name = 'SessionGoneError';
  }
}

/** Runs an idle sweep every `everyMs`; a failed sweep (the store away) is simply tried again next time. */
export function sweepEvery(sweep: () => Promise<unknown>, everyMs: number): NodeJS.Timeout {
  return setInterval(() => void sweep().catch(() => undefined), everyMs).unref();
}
