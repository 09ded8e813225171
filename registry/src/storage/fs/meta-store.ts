/**
 * Filesystem MetaStore: one JSON file per key under `root/meta/`. Writes go to a temp file that
 * is written durably (O_DSYNC) and renamed over the old one (then its folder is fsynced), so a
 * reader sees the old or the new document, never a torn one. Compare-and-swap is exact among the
 * processes that share the store's `KeyLocks`: one process, or the worker processes of one server
 * (`workers/`); the s3 backend is for replicas.
 */
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, constants, open as openCb, statSync, write as writeCb, type BigIntStats } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { promisify } from 'node:util';
import { fsyncPath } from './blob-store.js';
import { deepFreeze } from '../freeze.js';
import { unlessMissing } from './missing.js';
import { ProcessKeyLocks, type KeyLocks } from '../key-locks.js';
import { assertSafeKey, ConflictError, type MetaStore, type Versioned } from '../types.js';

export class FsMetaStore implements MetaStore {
  readonly #root: string;
  readonly #tmp: string;
  readonly #parsed = new Map<string, { stamp: string; doc: unknown; version: string }>();
  /** Folders under `meta/` this process made or found (see `#renameInto`), oldest first. */
  readonly #folders = new Set<string>();

  constructor(
    root: string,
    private readonly locks: KeyLocks = new ProcessKeyLocks(),
  ) {
    this.#root = join(root, 'meta');
    this.#tmp = join(root, 'staging');
  }

  async init(): Promise<void> {
    await mkdir(this.#root, { recursive: true });
    await mkdir(this.#tmp, { recursive: true });
  }

  #path(key: string): string {
    assertSafeKey(key);
    return join(this.#root, `${key}.json`);
  }

  async #read(key: string): Promise<{ text: string; version: string } | null> {
    const text = await unlessMissing(readFile(this.#path(key), 'utf8'));
    return text === null ? null : { text, version: versionOf(text) };
  }

  /**
   * Reads through a cache of parsed documents validated by the file's identity: every write
   * renames a new file into place, so an unchanged inode, size, mtime and ctime mean unchanged
   * bytes. A warm read costs one stat of the path (no open, read, hash or parse); a miss opens the
   * file and stamps what it read with the handle's own fstat, so a rename between the two cannot
   * pair one file's stamp with another's bytes. A document found missing is remembered as missing
   * and validated the same way: the next read stats the path and opens nothing while it is still
   * absent. Cached documents are frozen: callers must copy before changing one (updateDoc does).
   *
   * The warm stat runs synchronously, on purpose: it is the stat of a path this process just read,
   * which the kernel answers from its inode cache in about a microsecond, while a hop through
   * libuv's thread pool costs tens of microseconds of queueing and context switches under load
   * (measured: a warm manifest GET, three such stats, went from 5.5k to 8k requests/s). Opens and
   * reads stay asynchronous. The price: on a data dir whose stats wait on a network (NFS), those
   * waits block the process (docs/storage.md says to keep the fs backend on a local disk).
   */
  async get<T>(key: string): Promise<Versioned<T> | null> {
    const path = this.#path(key);
    const hit = this.#parsed.get(key);
    if (hit) {
      const st = statSync(path, { bigint: true, throwIfNoEntry: false });
      const stamp = st ? stampOf(st) : MISSING;
      if (stamp === hit.stamp) {
        // Re-insert: Map order is the LRU order.
        this.#parsed.delete(key);
        this.#parsed.set(key, hit);
        return hit.stamp === MISSING ? null : { doc: hit.doc as T, version: hit.version };
      }
      this.#parsed.delete(key);
      if (!st) {
        this.#remember(key, { stamp: MISSING, doc: null, version: '' });
        return null;
      }
    }
    // A document never read is looked for in place first: most such reads on a cold pull are of
    // documents not written yet (a new blob's holds), and a stat that finds no entry answers from
    // the kernel's caches at once, where an open through the thread pool costs a hop to fail.
    // One that is there is opened as before (the stamp comes from the open handle).
    const fh = statSync(path, { throwIfNoEntry: false }) ? await unlessMissing(open(path, 'r')) : null;
    if (!fh) {
      this.#remember(key, { stamp: MISSING, doc: null, version: '' });
      return null;
    }
    try {
      const stamp = stampOf(await fh.stat({ bigint: true }));
      const text = await fh.readFile('utf8');
      const entry = { stamp, doc: deepFreeze(JSON.parse(text) as unknown), version: versionOf(text) };
      if (text.length <= MAX_CACHED_DOC_BYTES) this.#remember(key, entry);
      return { doc: entry.doc as T, version: entry.version };
    } finally {
      await fh.close();
    }
  }

  /**
   * The version of `key` as stored now, null when absent: from the parsed-document cache when the
   * file's stamp still matches (as `get` trusts it; a read-modify-write has just read the document
   * there), else read from the file (not opened when the stat finds none). Called under the key's
   * lock: no other writer of this store moves it meanwhile.
   */
  async #currentVersion(key: string, path: string): Promise<string | null> {
    const st = statSync(path, { bigint: true, throwIfNoEntry: false });
    const hit = this.#parsed.get(key);
    if (hit && (st ? stampOf(st) : MISSING) === hit.stamp) return hit.stamp === MISSING ? null : hit.version;
    // Absent at the stat is absent: a create-if-absent of a document never read (a new blob's
    // holds) opens nothing, as `get` does not for a document never written.
    if (!st) return null;
    return (await this.#read(key))?.version ?? null;
  }

  /**
   * Remembers the document this process has just renamed into place, so the next read of it (a
   * tag map read back by the request that wrote it, the holds a pull checks) costs one stat
   * rather than an open, a read and a parse. Called under the key's lock: no writer sharing it
   * can have moved the file since the rename, so the stamp taken now is the written file's. The
   * cached document is parsed from the text written, never the caller's object (which it may
   * still change, and which a cached document's freezing would freeze). A document too large
   * to cache, or a stat that fails, leaves the cache without it (the next read opens the file).
   */
  #rememberWritten(key: string, path: string, text: string, version: string): void {
    this.#parsed.delete(key);
    if (text.length > MAX_CACHED_DOC_BYTES) return;
    const st = statSync(path, { bigint: true, throwIfNoEntry: false });
    if (st) this.#remember(key, { stamp: stampOf(st), doc: deepFreeze(JSON.parse(text) as unknown), version });
  }

  #remember(key: string, entry: { stamp: string; doc: unknown; version: string }): void {
    this.#parsed.delete(key);
    this.#parsed.set(key, entry);
    if (this.#parsed.size > MAX_CACHED_DOCS) this.#parsed.delete(this.#parsed.keys().next().value as string);
  }

  async put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string> {
    const path = this.#path(key);
    return this.locks.run(key, async () => {
      if (ifVersion !== undefined && (await this.#currentVersion(key, path)) !== ifVersion) throw new ConflictError(key);
      const text = JSON.stringify(doc);
      const dir = dirname(path);
      const tmp = join(this.#tmp, `meta-${randomUUID()}`);
      try {
        await writeSynced(tmp, text);
        await this.#renameInto(tmp, path);
      } catch (err) {
        // Renamed, the temp file is gone: only a failed write leaves one behind.
        await unlink(tmp).catch(() => undefined);
        throw err;
      }
      await fsyncPath(dir);
      const version = versionOf(text);
      this.#rememberWritten(key, path, text, version);
      return version;
    });
  }

  /**
   * Renames `tmp` to `path`, making `path`'s folder first the first time this process writes
   * there. Folders under `meta/` are never removed by the server, so one known to exist is not
   * made again (a `mkdir -p` per write was a third of a write's system calls); should one be
   * gone anyway, the rename fails with ENOENT and the folder is made again.
   */
  async #renameInto(tmp: string, path: string): Promise<void> {
    const dir = dirname(path);
    if (!this.#folders.has(dir)) {
      await mkdir(dir, { recursive: true });
      this.#rememberFolder(dir);
    }
    try {
      await rename(tmp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      this.#folders.delete(dir);
      await mkdir(dir, { recursive: true });
      this.#rememberFolder(dir);
      await rename(tmp, path);
    }
  }

  #rememberFolder(dir: string): void {
    this.#folders.add(dir);
    if (this.#folders.size > MAX_KNOWN_FOLDERS) this.#folders.delete(this.#folders.values().next().value as string);
  }

  async delete(key: string, ifVersion?: string): Promise<boolean> {
    const path = this.#path(key);
    return this.locks.run(key, async () => {
      const current = await this.#currentVersion(key, path);
      if (current === null) return false;
      if (ifVersion !== undefined && current !== ifVersion) throw new ConflictError(key);
      await unlink(path);
      return true;
    });
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertSafeKey(prefix);
    const base = join(this.#root, prefix);
    const entries = (await unlessMissing(readdir(base, { recursive: true }))) ?? [];
    for (const entry of entries) {
      if (!entry.endsWith('.json')) continue;
      const rel = relative(this.#root, join(base, entry)).split(sep).join('/');
      yield rel.slice(0, -'.json'.length);
    }
  }
}

/** Bound of the remembered folders: forgetting one costs one `mkdir -p` on its next write. */
const MAX_KNOWN_FOLDERS = 4096;

/**
 * Writes `text` to a new file at `path`, durably: the file is opened with O_DSYNC, so the write
 * returns once its bytes (and the size that reads them) are on the disk, as a write and an
 * fdatasync would, in one hop through the thread pool instead of two. The open and the write go
 * through the thread pool; the close, which waits on nothing, is made in place.
 */
async function writeSynced(path: string, text: string): Promise<void> {
  const fd = await openFd(path, NEW_SYNCED_FILE, 0o666);
  try {
    const bytes = Buffer.from(text);
    for (let off = 0; off < bytes.length; ) off += (await writeFd(fd, bytes, off, bytes.length - off, off)).bytesWritten;
  } finally {
    closeSync(fd);
  }
}

/** 'wx' (create, never over an existing file), each write durable when it returns. */
const NEW_SYNCED_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_DSYNC;
const openFd = promisify(openCb);
const writeFd = promisify(writeCb);

/** Bounds of the parsed-document cache: entries, and the size of a document worth keeping. */
const MAX_CACHED_DOCS = 4096;
const MAX_CACHED_DOC_BYTES = 1024 * 1024;

/** The stamp of a document that was not there when last looked for. */
const MISSING = 'missing';

/** A file's identity: a rename-into-place write changes the inode, so equal stamps mean equal bytes. */
function stampOf(st: BigIntStats): string {
  return `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

function versionOf(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}
