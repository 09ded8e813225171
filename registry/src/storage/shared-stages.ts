/**
 * Staged writes that live in the shared store, so that any process sharing it can append to one,
 * commit it or discard it: each append may come from another process, none holds the write in
 * memory or on its disk between calls. The owner (say, an upload session) keeps its own fields in
 * the document as an opaque `owner` value; this layer names no ecosystem.
 *
 *   shared-stages/<id>            one MetaStore document per stage (`StageDoc`)
 *   chunks/<id>/<uuid>            one chunk object per append (`ChunkStore`)
 *
 * The document lists the chunks in order with their sizes, the total size, and the sha256 state
 * after the last chunk (hash-wasm's saved state), so an append hashes only its own bytes.
 *
 * Protocol, everything by compare-and-swap on the document's version:
 *
 * - `append`: streams the source into a new chunk object while hashing it from the saved state,
 *   then writes the document with the chunk added, only if it is still the version read. A source
 *   that fails midway leaves no object and the document as it was. When another writer changed the
 *   document meanwhile (two appends at once, a commit, a discard, the sweep), the chunk object is
 *   removed and `ConflictError` thrown: the document never mixes the two. A long append rewrites
 *   `lastUsed` (by the same compare-and-swap) every quarter of the idle time, so the sweep never
 *   takes a stage that is receiving bytes, and a lost race shows as early as it can.
 * - `commit(expected)`: the digest comes from the saved state (after a last chunk, if any); on a
 *   mismatch nothing changes. Then the document is marked `committing` with that digest (by CAS:
 *   an append racing it loses), the caller's `beforePublish` runs, and the bytes are published:
 *   server-side composed from the chunks when the store can (`ChunkStore.compose`), otherwise
 *   streamed chunk by chunk through an ordinary stage, which hashes them again. Either way the blob
 *   appears whole or not at all. The document, then the chunks, are deleted last. A commit cut
 *   short (its process killed) leaves the document `committing`; a commit of the same digest from
 *   any process continues it (publishing identical bytes twice is harmless), the sweep ends it
 *   otherwise.
 * - `discard`: a conditional delete (the tombstone write of the S3 MetaStore), then the chunks, then
 *   an unconditional delete that clears the tombstone.
 * - `sweep`: any process may run it; a stage whose `lastUsed` is older than the idle time is
 *   discarded by the same CAS, so one written meanwhile survives; chunk objects that no document
 *   lists and that are older than the idle time (an append's process killed between its object and
 *   its CAS, a removal that failed) are removed.
 */
import { randomUUID } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createSHA256, type IHasher } from 'hash-wasm';
import { ScratchBudget } from './scratch-budget.js';
import { ConflictError, DigestMismatchError, type BlobInfo, type BlobStore, type ChunkRef, type ChunkStore, type MetaStore, type Sha256Hex } from './types.js';

const FOLDER = 'shared-stages';

export interface StageDoc<T> {
  owner: T;
  size: number;
  chunks: ChunkRef[];
  /** hash-wasm's sha256 state after `size` bytes, base64. */
  hash: string;
  /** Set once a commit verified this digest and began publishing. */
  committing?: Sha256Hex;
  /** Epoch ms. */
  created: number;
  lastUsed: number;
}

/** A stage as last read or written: a snapshot, with the version later writes are conditional on. */
export interface SharedStage<T> {
  readonly id: string;
  readonly version: string;
  readonly doc: StageDoc<T>;
}

export interface SharedStagesOptions {
  /** A stage unused for longer is swept (and a long append refreshes it four times as often). */
  idleMs?: number;
  now?: () => number;
  /**
   * Covers each chunk while it streams in (s3: to a scratch file, sent part by part): the
   * `[storage] scratch_limit` of the stores (`scratch-budget.ts`); default: no limit.
   */
  scratch?: ScratchBudget;
}

export interface CommitOptions {
  /** Bytes to append first (an upload's last chunk); the commit then covers them too. */
  last?: Readable;
  /** The declared length of `last`, reserved from the scratch budget first. */
  declared?: number;
  /** Runs once the digest verified, before any byte is published (a hold on the digest). */
  beforePublish?: (size: number) => Promise<void>;
}

export class SharedStages {
  readonly idleMs: number;
  readonly #now: () => number;
  readonly #budget: ScratchBudget;

  constructor(
    private readonly meta: MetaStore,
    private readonly chunks: ChunkStore,
    private readonly blobs: BlobStore,
    opts: SharedStagesOptions = {},
  ) {
    this.idleMs = opts.idleMs ?? 60 * 60 * 1000;
    this.#now = opts.now ?? Date.now;
    this.#budget = opts.scratch ?? new ScratchBudget();
  }

  async open<T>(owner: T): Promise<SharedStage<T>> {
    const id = randomUUID();
    const now = this.#now();
    const doc: StageDoc<T> = { owner, size: 0, chunks: [], hash: encode((await createSHA256()).init().save()), created: now, lastUsed: now };
    const version = await this.meta.put(keyOf(id), doc, null);
    return { id, version, doc };
  }

  /** The stage, or null when it does not exist (never did, committed, discarded, swept). */
  async get<T>(id: string): Promise<SharedStage<T> | null> {
    if (!/^[0-9a-f-]{36}$/.test(id)) return null;
    const got = await this.meta.get<StageDoc<T>>(keyOf(id));
    return got ? { id, version: got.version, doc: got.doc } : null;
  }

  /** The sha256 of the bytes so far. */
  async digest(stage: SharedStage<unknown>): Promise<Sha256Hex> {
    return (await hasherAt(stage.doc.hash)).digest('hex');
  }

  /**
   * Appends `source` as one chunk (see the protocol above). With `expect`, a stage that would then
   * have another digest is left as it was and `DigestMismatchError` thrown. `ConflictError`: the
   * stage changed (or went) meanwhile, and this append left no trace.
   */
  append<T>(stage: SharedStage<T>, source: Readable, opts: { expect?: Sha256Hex; declared?: number } = {}): Promise<SharedStage<T>> {
    return this.#append(stage, source, opts.expect, false, opts.declared);
  }

  /** `append`; with `commit`, the same compare-and-swap also marks the stage `committing` (`expect` then required). */
  async #append<T>(stage: SharedStage<T>, source: Readable, expect: Sha256Hex | undefined, commit: boolean, declared?: number): Promise<SharedStage<T>> {
    if (stage.doc.committing !== undefined) throw new ConflictError(keyOf(stage.id));
    let version = stage.version;
    let lost = false;
    // Keeps `lastUsed` fresh while a long chunk streams in, by CAS on the latest version; one
    // refresh at a time, and the last one has landed before the final write reads `version`.
    let refreshing = Promise.resolve();
    const refresh = setInterval(() => {
      refreshing = refreshing.then(async () => {
        if (lost) return;
        try {
          version = await this.meta.put(keyOf(stage.id), { ...stage.doc, lastUsed: this.#now() }, version);
        } catch (err) {
          // Another writer changed the stage; a store that did not answer is tried again next time.
          if (err instanceof ConflictError) lost = true;
        }
      });
    }, this.idleMs / 4);
    refresh.unref();
    const written = await this.#writeChunk(stage, source, declared).finally(() => clearInterval(refresh));
    await refreshing;
    if (!written) return stage;
    const { chunk, hasher } = written;
    const drop = async (err: Error): Promise<never> => {
      await this.chunks.remove(chunk.name).catch(() => undefined);
      throw err;
    };
    const doc: StageDoc<T> = { ...stage.doc, size: stage.doc.size + chunk.size, chunks: [...stage.doc.chunks, chunk], hash: encode(hasher.save()), lastUsed: this.#now() };
    if (expect !== undefined) {
      const actual = hasher.digest('hex');
      if (actual !== expect) return drop(new DigestMismatchError(expect, actual));
      if (commit) doc.committing = expect;
    }
    if (lost) return drop(new ConflictError(keyOf(stage.id)));
    try {
      return { id: stage.id, version: await this.meta.put(keyOf(stage.id), doc, version), doc };
    } catch (err) {
      return drop(err as Error);
    }
  }

  /** Streams `source` into a new chunk, hashing from the stage's state; null for no bytes at all. */
  async #writeChunk(stage: SharedStage<unknown>, source: Readable, declared: number | undefined): Promise<{ chunk: ChunkRef; hasher: IHasher } | null> {
    // Reserved before a byte is read; covered as it streams, given back once the chunk is written.
    const claim = this.#budget.claim();
    try {
      if (declared !== undefined) await claim.reserve(declared);
      return await this.#writeCounted(stage, source, claim.meter());
    } finally {
      claim.release();
    }
  }

  async #writeCounted(stage: SharedStage<unknown>, source: Readable, meter: Transform): Promise<{ chunk: ChunkRef; hasher: IHasher } | null> {
    const hasher = await hasherAt(stage.doc.hash);
    const name = `${stage.id}/${randomUUID()}`;
    const hashing = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hasher.update(chunk);
        done(null, chunk);
      },
    });
    // The pipeline destroys `hashing` when the source (or the meter, past the budget) fails, which fails the write.
    const [size] = await Promise.all([this.chunks.write(name, hashing), pipeline(source, meter, hashing)]);
    if (size === 0) {
      await this.chunks.remove(name);
      return null;
    }
    return { chunk: { name, size }, hasher };
  }

  /**
   * Verifies the digest and publishes the stage's bytes under it (see the protocol above), then
   * ends the stage. `DigestMismatchError` and `ConflictError` leave the stage as it was.
   */
  async commit<T>(stage: SharedStage<T>, expected: Sha256Hex, opts: CommitOptions = {}): Promise<BlobInfo> {
    let current = stage;
    // A last chunk and the mark are one write: a commit that fails leaves no chunk behind.
    if (opts.last !== undefined) current = await this.#append(current, opts.last, expected, true, opts.declared);
    if (current.doc.committing !== expected) {
      const actual = await this.digest(current);
      if (actual !== expected) throw new DigestMismatchError(expected, actual);
      const doc: StageDoc<T> = { ...current.doc, committing: expected, lastUsed: this.#now() };
      current = { id: current.id, version: await this.meta.put(keyOf(current.id), doc, current.version), doc };
    }
    await opts.beforePublish?.(current.doc.size);
    await this.#publish(current.doc.chunks, expected, current.doc.size);
    await this.#end(current.id, current.doc.chunks);
    return { digest: expected, size: current.doc.size };
  }

  async #publish(chunks: readonly ChunkRef[], digest: Sha256Hex, size: number): Promise<void> {
    // Content-addressed: bytes already stored (another commit of this stage, or another upload) are not sent again.
    if ((await this.blobs.stat(digest)) !== null) return;
    try {
      if (await this.chunks.compose(chunks, digest)) return;
      const stage = await this.blobs.stage({ expected: digest, declared: size });
      try {
        for (const c of chunks) {
          const body = await this.chunks.read(c.name);
          if (body === null) throw new Error(`chunk ${c.name} of a shared stage is missing`);
          await stage.append(body);
        }
        await stage.commit(digest);
      } finally {
        await stage.abort();
      }
    } catch (err) {
      // A commit of the same stage elsewhere may have published and removed the chunks first.
      if ((await this.blobs.stat(digest)) !== null) return;
      throw err;
    }
  }

  /** Discards the stage; `ConflictError` when it changed since read (it then stays). */
  async discard(stage: SharedStage<unknown>): Promise<void> {
    if (!(await this.meta.delete(keyOf(stage.id), stage.version))) return;
    await this.#end(stage.id, stage.doc.chunks);
  }

  /** Removes the document, then the chunks: best effort, what is left is swept by age. */
  async #end(id: string, chunks: readonly ChunkRef[]): Promise<void> {
    await this.meta.delete(keyOf(id)).catch(() => undefined);
    await Promise.all(chunks.map((c) => this.chunks.remove(c.name).catch(() => undefined)));
  }

  /** Discards stages idle for longer than the idle time, and chunk objects no stage lists. Returns how many of each went. */
  async sweep(): Promise<{ stages: number; chunks: number }> {
    const cutoff = this.#now() - this.idleMs;
    let stages = 0;
    for await (const key of this.meta.list(FOLDER)) {
      const id = key.slice(FOLDER.length + 1);
      const stage = await this.get(id);
      if (stage === null || stage.doc.lastUsed >= cutoff) continue;
      try {
        await this.discard(stage);
        stages++;
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
      }
    }
    let chunks = 0;
    const listed = new Map<string, Set<string>>();
    for await (const name of this.chunks.listOlder(cutoff)) {
      const id = name.split('/')[0] ?? '';
      let names = listed.get(id);
      if (names === undefined) {
        names = new Set((await this.get(id))?.doc.chunks.map((c) => c.name));
        listed.set(id, names);
      }
      if (names.has(name)) continue;
      await this.chunks.remove(name);
      chunks++;
    }
    return { stages, chunks };
  }
}

function keyOf(id: string): string {
  return `${FOLDER}/${id}`;
}

async function hasherAt(state: string): Promise<IHasher> {
  const hasher = await createSHA256();
  hasher.load(Buffer.from(state, 'base64'));
  return hasher;
}

function encode(state: Uint8Array): string {
  return Buffer.from(state).toString('base64');
}
