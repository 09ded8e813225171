/**
 * S3 MetaStore: one object per key, `<prefix>meta/<key>.json`, holding the document's JSON. Every
 * process that shares the bucket shares the documents; nothing is cached here, so a write
 * acknowledged by one process is what the next `get` of any process reads.
 *
 *   <prefix>meta/<key>.json   JSON text (never empty)     the document; its ETag is the version
 *                             empty object (0 bytes)      a tombstone: the key is absent
 *
 * The `.json` suffix keeps a document's name from being the folder of other documents (`a/b`
 * beside `a/b/c`): MinIO stores both, but its listing does not descend below a name that is
 * itself an object, so `a/b/c` would be missing from `list('a')`.
 *
 * Compare-and-swap rests on the object store's conditional PUT (a 412 when the condition fails):
 *
 * - create (`ifVersion` null): PUT with `If-None-Match: *`. When that fails because a tombstone
 *   holds the key, PUT again with `If-Match: <the tombstone's ETag>`.
 * - replace (`ifVersion` given): PUT with `If-Match: <ifVersion>`; a 404 (the key went away)
 *   counts as a conflict like the 412.
 * - delete with `ifVersion`: S3 DELETE has no condition this store can rely on (MinIO ignores
 *   `If-Match` on DELETE and deletes anyway; test/storage/meta-store.test.ts shows it), so the
 *   delete is a conditional PUT of a tombstone with `If-Match: <ifVersion>`. Readers and `list`
 *   treat a 0-byte object as absent (a document is never empty: the shortest JSON is 1 byte).
 * - delete without `ifVersion`: an unconditional DELETE, which also clears a tombstone.
 *
 * Versions are ETags. For a plain PUT, S3 and MinIO derive the ETag from the content, so writing
 * the same bytes again yields the same version; a writer whose stale version matches identical
 * content writes over exactly the document it read, which is what compare-and-swap promises.
 *
 * Remaining windows:
 * - A write whose answer is lost (the connection breaks after the store applied it) fails with
 *   `StoreUnavailableError` although it took effect; a caller's retry then sees its own write as a
 *   concurrent change. updateDoc re-reads and re-applies its change, so changes must be idempotent
 *   where that matters (setting a field is; appending to a list is not).
 * - Tombstones stay in the bucket (0 bytes each) until an unconditional delete of the key: a
 *   sweep could delete one only with a conditional DELETE, which the stores this runs on lack.
 *
 * Each write is one PUT on the lean request path (`requests.ts`) carrying its condition
 * (`If-Match` or `If-None-Match`) as a header, its body's sha256 signed as the payload over http,
 * and its answer's `ETag` is the new version. Reads are one GET on that path, whose response
 * carries the body and its `ETag`, the version of exactly the bytes read (a HEAD then GET could
 * pair one version with another's bytes).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { assertSafeKey, ConflictError, type MetaStore, type Versioned } from '../types.js';
import type { S3Location } from './connect.js';
import { ByteLru } from '../byte-lru.js';
import { deepFreeze } from '../freeze.js';
import { asUnavailable, isNotFound, isPreconditionFailed } from './errors.js';

const SUFFIX = '.json';
const JSON_TYPE = { 'Content-Type': 'application/json' };
/** Keys per listing page; S3's maximum. */
const LIST_PAGE = 1000;

export class S3MetaStore implements MetaStore {
  readonly #loc: S3Location;
  /** `<prefix>meta/`: every document's object name starts with it. */
  readonly #base: string;
  /** Parsed documents by key, with the ETag they were read at (see `get`); least recently used first. */
  readonly #parsed = new ByteLru<{ etag: string; doc: unknown; bytes: number }>(MAX_CACHED_BYTES, (entry) => entry.bytes);
  /** Keys this process last found absent (read, or deleted), oldest first: for `seen`. */
  readonly #absent = new Set<string>();

  constructor(loc: S3Location) {
    this.#loc = loc;
    this.#base = `${loc.prefix}meta/`;
  }

  #name(key: string): string {
    assertSafeKey(key);
    return `${this.#base}${key}${SUFFIX}`;
  }

  /**
   * Reads through a cache of parsed documents validated by the store: a document read before is
   * asked for with `If-None-Match: <its ETag>`, and a 304 (unchanged) hands back the parsed copy,
   * so every read is still one request to the store (a write by any process is seen at once) but
   * an unchanged document is neither sent nor parsed again. Cached documents are frozen, as the fs
   * backend's are: callers copy before changing one (updateDoc does).
   */
  async get<T>(key: string): Promise<Versioned<T> | null> {
    // `get` makes it the most recently used.
    const known = this.#parsed.get(key);
    const current = await this.#fetch(key, known?.etag);
    if (current === UNCHANGED && known) {
      return { doc: known.doc as T, version: known.etag };
    }
    this.#parsed.delete(key);
    if (current === null || current === UNCHANGED || current.text === '') {
      this.#sawAbsent(key);
      return null;
    }
    const doc = this.#remember(key, current.text, current.etag);
    return { doc: doc as T, version: current.etag };
  }

  /**
   * The version this process last read or wrote under `key` (`MetaStore.seen`): a guess that a
   * compare-and-swap checks. A write whose version matches skips the read before it: one request
   * to the store instead of two.
   */
  seen(key: string): Versioned<unknown> | null | undefined {
    const known = this.#parsed.get(key);
    if (known) return { doc: known.doc, version: known.etag };
    return this.#absent.has(key) ? null : undefined;
  }

  /** Keeps the parsed document read or written at `etag`; a parsed document costs a few times its text (ByteLru keeps none larger than the budget). */
  #remember(key: string, text: string, etag: string): unknown {
    this.#absent.delete(key);
    const doc = deepFreeze(JSON.parse(text) as unknown);
    this.#parsed.set(key, { etag, doc, bytes: text.length * 3 });
    return doc;
  }

  #sawAbsent(key: string): void {
    this.#parsed.delete(key);
    this.#absent.delete(key);
    this.#absent.add(key);
    if (this.#absent.size > MAX_ABSENT_KEYS) this.#absent.delete(this.#absent.values().next().value as string);
  }

  async put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string> {
    const text = JSON.stringify(doc) as string | undefined;
    if (text === undefined) throw new TypeError(`cannot store ${typeof doc} as a document (${key})`);
    let etag: string;
    try {
      etag = await this.#put(key, Buffer.from(text), ifVersion);
    } catch (err) {
      // Whatever the store holds now, it is not what this process last saw.
      this.#parsed.delete(key);
      this.#absent.delete(key);
      throw err;
    }
    this.#remember(key, text, etag);
    return etag;
  }

  async #put(key: string, body: Buffer, ifVersion: string | null | undefined): Promise<string> {
    if (ifVersion === undefined) return this.#write(key, body, {});
    if (ifVersion !== null) return this.#writeIf(key, body, { 'If-Match': quote(ifVersion) });
    try {
      return await this.#write(key, body, { 'If-None-Match': '*' });
    } catch (err) {
      if (!isPreconditionFailed(err)) throw err;
    }
    // Something holds the key: a live document (a conflict) or a tombstone (replace it).
    const current = await this.#read(key);
    if (current === null || current.text !== '') throw new ConflictError(key);
    return this.#writeIf(key, body, { 'If-Match': quote(current.etag) });
  }

  async delete(key: string, ifVersion?: string): Promise<boolean> {
    // Absent once this succeeds; unknown if it fails.
    this.#parsed.delete(key);
    this.#absent.delete(key);
    const deleted = await this.#delete(key, ifVersion);
    this.#sawAbsent(key);
    return deleted;
  }

  async #delete(key: string, ifVersion: string | undefined): Promise<boolean> {
    if (ifVersion === undefined) return this.#remove(key);
    try {
      await this.#writeIf(key, Buffer.alloc(0), { 'If-Match': quote(ifVersion) });
      return true;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
    // Refused: absent (false, as for any delete of a missing key) or changed (a conflict).
    const current = await this.#read(key);
    if (current === null || current.text === '') return false;
    throw new ConflictError(key);
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertSafeKey(prefix);
    const folder = `${this.#base}${prefix}/`;
    let token = '';
    do {
      let page;
      try {
        page = await this.#loc.client.listObjectsV2Query(this.#loc.bucket, folder, token, '', LIST_PAGE, '');
      } catch (err) {
        throw asUnavailable(err, this.#loc.endpoint, `listing ${prefix}`);
      }
      for (const item of page.objects) {
        // Size 0: a tombstone, i.e. a deleted document.
        if (item.name?.endsWith(SUFFIX) && item.size > 0) yield item.name.slice(this.#base.length, -SUFFIX.length);
      }
      token = page.isTruncated ? page.nextContinuationToken : '';
    } while (token !== '');
  }

  /** The object's text and ETag, or null when there is no object (a tombstone reads as ''). */
  async #read(key: string): Promise<{ text: string; etag: string } | null> {
    const current = await this.#fetch(key);
    return current === UNCHANGED ? null : current;
  }

  /**
   * As `#read`; with `ifNoneMatch`, `UNCHANGED` when the object still has that ETag (the store answered 304).
   */
  async #fetch(key: string, ifNoneMatch?: string): Promise<{ text: string; etag: string } | typeof UNCHANGED | null> {
    const name = this.#name(key);
    let res: IncomingMessage;
    try {
      const headers: Record<string, string> = ifNoneMatch === undefined ? {} : { 'If-None-Match': quote(ifNoneMatch) };
      res = await this.#loc.requests.request('GET', name, headers, [200, 304]);
    } catch (err) {
      if (isNotFound(err)) return null;
      throw asUnavailable(err, this.#loc.endpoint, `reading ${key}`);
    }
    if (res.statusCode === 304) {
      res.resume();
      return UNCHANGED;
    }
    if (typeof res.headers.etag !== 'string') {
      res.destroy();
      // S3 answers every GET with the object's ETag; a store that does not cannot version documents.
      throw new Error('the object store returned no ETag with a GET: the S3 MetaStore needs it as the version');
    }
    const etag = unquote(res.headers.etag);
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      return { text: Buffer.concat(chunks).toString('utf8'), etag };
    } catch (err) {
      throw asUnavailable(err, this.#loc.endpoint, `reading ${key}`);
    }
  }

  /** One PUT; returns the new ETag. */
  async #write(key: string, body: Buffer, condition: Record<string, string>): Promise<string> {
    const name = this.#name(key);
    try {
      const { requests } = this.#loc;
      // Signed as the payload only over http: over https the request signs none (`requests.ts`).
      const sha256 = requests.signsPayload ? createHash('sha256').update(body).digest('hex') : undefined;
      const res = await requests.request('PUT', name, { ...JSON_TYPE, ...condition }, [200], { bytes: body, ...(sha256 === undefined ? {} : { sha256 }) });
      res.resume();
      const etag = res.headers.etag;
      // S3 answers every PUT with the new object's ETag; a store that does not cannot version documents.
      if (typeof etag !== 'string' || etag === '') throw new Error('the object store returned no ETag with a PUT: the S3 MetaStore needs it as the version');
      return unquote(etag);
    } catch (err) {
      throw asUnavailable(err, this.#loc.endpoint, `writing ${key}`);
    }
  }

  /** A PUT with `If-Match`: a 412, or a 404 because the object is gone, is a ConflictError. */
  async #writeIf(key: string, body: Buffer, condition: Record<string, string>): Promise<string> {
    try {
      return await this.#write(key, body, condition);
    } catch (err) {
      if (isPreconditionFailed(err) || isNotFound(err)) throw new ConflictError(key);
      throw err;
    }
  }

  /** Unconditional DELETE; true when a document (not a tombstone) was there. */
  async #remove(key: string): Promise<boolean> {
    const name = this.#name(key);
    let existed: boolean;
    try {
      existed = (await this.#loc.client.statObject(this.#loc.bucket, name)).size > 0;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw asUnavailable(err, this.#loc.endpoint, `deleting ${key}`);
    }
    try {
      await this.#loc.client.removeObject(this.#loc.bucket, name);
    } catch (err) {
      throw asUnavailable(err, this.#loc.endpoint, `deleting ${key}`);
    }
    return existed;
  }
}

/** The bytes the parsed-document cache may take, reckoned from the documents' text. */
const MAX_CACHED_BYTES = 64 * 1024 * 1024;
/** Keys remembered as absent for `seen`: a key each, only a guess, so a bound keeps it small. */
const MAX_ABSENT_KEYS = 4096;

/** `#read`'s answer when the store said the document has not changed since the ETag asked about. */
const UNCHANGED = Symbol('unchanged');

/** ETags travel quoted in headers (RFC 9110); versions are handed out without the quotes. */
function quote(etag: string): string {
  return `"${etag}"`;
}

function unquote(etag: string): string {
  return etag.replace(/^(W\/)?"(.*)"$/, '$2');
}
