/**
 * Blob upload sessions: process memory only (the spec: lost on restart). Each session owns one
 * staged write of the store (`BlobStage`) that its chunks are appended to and hashed on the way in,
 * so a commit only compares digests and publishes the stage; no blob is ever held in memory. An
 * idle session expires and its stage is aborted. Stages of a previous process are the store's to
 * sweep (by age, when it opens).
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { BlobStage, BlobStore, Sha256Hex } from '../storage/types.js';

export interface UploadSession {
  readonly id: string;
  /** The hosted index the blob will be committed for, and the repository of the request. */
  readonly indexName: string;
  readonly repo: string;
  readonly stage: BlobStage;
  /**
   * Bytes of the requests that completed. Not the stage's size, which grows while a chunk streams
   * in: a status request during a PATCH must not report a chunk that may still be undone.
   */
  size: number;
  lastUsed: number;
  busy: boolean;
}

export class UploadSessions {
  readonly #sessions = new Map<string, UploadSession>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly blobs: BlobStore,
    private readonly idleMs = 60 * 60 * 1000,
  ) {
    this.#timer = setInterval(() => void this.sweep(), Math.min(60_000, idleMs)).unref();
  }

  async open(indexName: string, repo: string): Promise<UploadSession> {
    const stage = await this.blobs.stage();
    const session: UploadSession = {
      id: randomUUID(),
      indexName,
      repo,
      stage,
      size: 0,
      lastUsed: Date.now(),
      busy: false,
    };
    this.#sessions.set(session.id, session);
    return session;
  }

  /** The session, if it exists and belongs to this index and repository. */
  get(id: string, indexName: string, repo: string): UploadSession | undefined {
    const s = this.#sessions.get(id);
    if (!s || s.indexName !== indexName || s.repo !== repo) return undefined;
    s.lastUsed = Date.now();
    return s;
  }

  /**
   * Appends a chunk, hashing it on the way. A chunk that fails midway (client gone, disk full),
   * or that leaves the session at another digest than `expect`, is undone: the session is as
   * it was before the request.
   */
  async append(s: UploadSession, source: Readable, expect?: Sha256Hex): Promise<void> {
    try {
      await s.stage.append(source, expect === undefined ? {} : { expect });
      s.size = s.stage.size;
    } finally {
      s.lastUsed = Date.now();
    }
  }

  /** Hex digest of the bytes so far, leaving the session open for more. */
  digest(s: UploadSession): string {
    return s.stage.digest();
  }

  /** Forgets a session and aborts its stage (harmless once committed). */
  async discard(s: UploadSession): Promise<void> {
    this.#sessions.delete(s.id);
    await s.stage.abort();
  }

  async sweep(now = Date.now()): Promise<void> {
    const expired = [...this.#sessions.values()].filter((s) => !s.busy && now - s.lastUsed > this.idleMs);
    await Promise.all(expired.map((s) => this.discard(s)));
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await Promise.all([...this.#sessions.values()].map((s) => this.discard(s)));
  }
}
