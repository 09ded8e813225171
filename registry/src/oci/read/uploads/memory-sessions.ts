/**
 * Upload sessions in process memory (the fs backend; the spec: lost on restart). Each session owns
 * one staged write of the store (`BlobStage`) that its chunks are appended to and hashed on the way
 * in. One request at a time per session: another is refused at once (`SessionBusyError`). An idle
 * session expires and its stage is aborted; stages of a previous process are the store's to sweep
 * (by age, when it opens).
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { DigestMismatchError, type BlobStage, type BlobStore, type Sha256Hex } from '../../../storage/types.js';
import { SessionBusyError, SessionGoneError, sweepEvery, type UploadSession, type UploadSessions } from './upload-sessions.js';

export interface MemorySession extends UploadSession {
  readonly stage: BlobStage;
  /**
   * Bytes of the requests that completed. Not the stage's size, which grows while a chunk streams
   * in: a status request during a PATCH must not report a chunk that may still be undone.
   */
  size: number;
  lastUsed: number;
  busy: boolean;
}

export class MemoryUploadSessions implements UploadSessions {
  readonly #sessions = new Map<string, MemorySession>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly blobs: BlobStore,
    private readonly idleMs = 60 * 60 * 1000,
  ) {
    this.#timer = sweepEvery(() => this.sweep(), Math.min(60_000, idleMs));
  }

  async open(indexName: string, repo: string): Promise<MemorySession> {
    const stage = await this.blobs.stage();
    const session: MemorySession = { id: randomUUID(), indexName, repo, stage, size: 0, lastUsed: Date.now(), busy: false };
    this.#sessions.set(session.id, session);
    return session;
  }

  get(id: string, indexName: string, repo: string): Promise<MemorySession | undefined> {
    const s = this.#sessions.get(id);
    if (!s || s.indexName !== indexName || s.repo !== repo) return Promise.resolve(undefined);
    s.lastUsed = Date.now();
    return Promise.resolve(s);
  }

  /** The live session of `s`, marked busy for the duration of `fn`. */
  async #exclusive<R>(s: UploadSession, fn: (m: MemorySession) => Promise<R>): Promise<R> {
    const m = this.#sessions.get(s.id);
    if (!m) throw new SessionGoneError(s.id);
    if (m.busy) throw new SessionBusyError(m);
    m.busy = true;
    try {
      return await fn(m);
    } finally {
      m.busy = false;
      m.lastUsed = Date.now();
    }
  }

  append(s: UploadSession, source: Readable, declared?: number): Promise<MemorySession> {
    return this.#exclusive(s, async (m) => {
      await m.stage.append(source, declared === undefined ? {} : { declared });
      m.size = m.stage.size;
      return m;
    });
  }

  commit(s: UploadSession, expected: Sha256Hex, last: Readable | null, beforePublish: (size: number) => Promise<void>, declared?: number): Promise<void> {
    return this.#exclusive(s, async (m) => {
      if (last !== null) {
        // A mismatch undoes this append: the session stays as it was, so the client may retry.
        await m.stage.append(last, { expect: expected, ...(declared === undefined ? {} : { declared }) });
        m.size = m.stage.size;
      } else {
        const actual = m.stage.digest();
        if (actual !== expected) throw new DigestMismatchError(expected, actual);
      }
      await beforePublish(m.size);
      await m.stage.commit(expected);
      await this.#discard(m);
    });
  }

  cancel(s: UploadSession): Promise<void> {
    return this.#exclusive(s, (m) => this.#discard(m));
  }

  async #discard(m: MemorySession): Promise<void> {
    this.#sessions.delete(m.id);
    await m.stage.abort();
  }

  async sweep(now = Date.now()): Promise<void> {
    const expired = [...this.#sessions.values()].filter((s) => !s.busy && now - s.lastUsed > this.idleMs);
    await Promise.all(expired.map((s) => this.#discard(s)));
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await Promise.all([...this.#sessions.values()].map((s) => this.#discard(s)));
  }
}
