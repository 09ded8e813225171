/**
 * Filesystem MetaStore: one JSON file per key under `root/meta/`. Writes go to a temp file that
 * is fsynced and renamed over the old one, so a reader sees the old or the new document, never a
 * torn one. Compare-and-swap is exact within one process (a per-key lock); the fs backend is for
 * a single server process, the s3 backend for replicas.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fsyncPath } from './blob-store.js';
import { assertSafeKey, ConflictError, type MetaStore, type Versioned } from '../types.js';

export class FsMetaStore implements MetaStore {
  readonly #root: string;
  readonly #tmp: string;
  readonly #locks = new Map<string, Promise<unknown>>();

  constructor(root: string) {
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
    try {
      const text = await readFile(this.#path(key), 'utf8');
      return { text, version: versionOf(text) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async get<T>(key: string): Promise<Versioned<T> | null> {
    const found = await this.#read(key);
    return found ? { doc: JSON.parse(found.text) as T, version: found.version } : null;
  }

  /** Serialises writers of one key inside this process. */
  async #locked<R>(key: string, fn: () => Promise<R>): Promise<R> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.#locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    }
  }

  async put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string> {
    const path = this.#path(key);
    return this.#locked(key, async () => {
      if (ifVersion !== undefined) {
        const current = await this.#read(key);
        if ((current?.version ?? null) !== ifVersion) throw new ConflictError(key);
      }
      const text = JSON.stringify(doc);
      await mkdir(dirname(path), { recursive: true });
      const tmp = join(this.#tmp, `meta-${randomUUID()}`);
      try {
        await writeFile(tmp, text, { flag: 'wx' });
        await fsyncPath(tmp);
        await rename(tmp, path);
      } finally {
        await unlink(tmp).catch(() => undefined);
      }
      await fsyncPath(dirname(path));
      return versionOf(text);
    });
  }

  async delete(key: string, ifVersion?: string): Promise<boolean> {
    const path = this.#path(key);
    return this.#locked(key, async () => {
      const current = await this.#read(key);
      if (!current) return false;
      if (ifVersion !== undefined && current.version !== ifVersion) throw new ConflictError(key);
      await unlink(path);
      return true;
    });
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertSafeKey(prefix);
    const base = join(this.#root, prefix);
    let entries: string[];
    try {
      entries = await readdir(base, { recursive: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const entry of entries) {
      if (!entry.endsWith('.json')) continue;
      const rel = relative(this.#root, join(base, entry)).split(sep).join('/');
      yield rel.slice(0, -'.json'.length);
    }
  }
}

function versionOf(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}
