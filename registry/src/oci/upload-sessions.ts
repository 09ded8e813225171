/**
 * Blob upload sessions: process memory only (the spec: lost on restart). Each session spools its
 * bytes to one file under the store's spool folder and hashes them as they arrive, so a commit
 * only compares digests and publishes the file; no blob is ever held in memory. An idle session
 * expires and its spool file is removed.
 */
import { createHash, randomUUID, type Hash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open, readdir, truncate, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';

const SPOOL_PREFIX = 'oci-upload-';

export interface UploadSession {
  readonly id: string;
  /** The hosted index the blob will be committed for, and the repository of the request. */
  readonly indexName: string;
  readonly repo: string;
  readonly spoolPath: string;
  size: number;
  hash: Hash;
  lastUsed: number;
  busy: boolean;
}

/** Where a session was before a chunk; restoring it undoes the chunk. */
export interface Checkpoint {
  size: number;
  hash: Hash;
}

export class UploadSessions {
  readonly #sessions = new Map<string, UploadSession>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly spoolDir: string,
    private readonly idleMs = 60 * 60 * 1000,
  ) {
    this.#timer = setInterval(() => void this.sweep(), Math.min(60_000, idleMs)).unref();
  }

  /** Removes spool files a previous process left behind (its sessions are gone). */
  async removeOrphans(): Promise<void> {
    const names = await readdir(this.spoolDir).catch(() => [] as string[]);
    const live = new Set([...this.#sessions.values()].map((s) => s.spoolPath));
    await Promise.all(
      names
        .filter((n) => n.startsWith(SPOOL_PREFIX))
        .map((n) => join(this.spoolDir, n))
        .filter((p) => !live.has(p))
        .map((p) => unlink(p).catch(() => undefined)),
    );
  }

  async open(indexName: string, repo: string): Promise<UploadSession> {
    const id = randomUUID();
    const spoolPath = join(this.spoolDir, `${SPOOL_PREFIX}${id}`);
    const fh = await open(spoolPath, 'wx');
    await fh.close();
    const session: UploadSession = { id, indexName, repo, spoolPath, size: 0, hash: createHash('sha256'), lastUsed: Date.now(), busy: false };
    this.#sessions.set(id, session);
    return session;
  }

  /** The session, if it exists and belongs to this index and repository. */
  get(id: string, indexName: string, repo: string): UploadSession | undefined {
    const s = this.#sessions.get(id);
    if (!s || s.indexName !== indexName || s.repo !== repo) return undefined;
    s.lastUsed = Date.now();
    return s;
  }

  checkpoint(s: UploadSession): Checkpoint {
    return { size: s.size, hash: s.hash.copy() };
  }

  async rollback(s: UploadSession, cp: Checkpoint): Promise<void> {
    await truncate(s.spoolPath, cp.size);
    s.size = cp.size;
    s.hash = cp.hash;
  }

  /**
   * Appends a chunk, hashing it on the way. A chunk that fails midway (client gone, disk full) is
   * undone, so the session's size and hash always describe exactly the bytes in its file.
   */
  async append(s: UploadSession, source: Readable): Promise<void> {
    const cp = this.checkpoint(s);
    let added = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
        s.hash.update(chunk);
        added += chunk.length;
        done(null, chunk);
      },
    });
    try {
      await pipeline(source, tap, createWriteStream(s.spoolPath, { flags: 'a' }));
      s.size = cp.size + added;
    } catch (err) {
      await this.rollback(s, cp).catch(() => undefined);
      throw err;
    } finally {
      s.lastUsed = Date.now();
    }
  }

  /** Hex digest of the bytes so far, leaving the session open for more. */
  digest(s: UploadSession): string {
    return s.hash.copy().digest('hex');
  }

  /** Forgets a session and removes its spool file. */
  async discard(s: UploadSession): Promise<void> {
    this.#sessions.delete(s.id);
    await unlink(s.spoolPath).catch(() => undefined);
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
