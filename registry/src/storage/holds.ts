/**
 * Per-digest holds on the shared BlobStore. Every ecosystem stores its bytes in the one
 * content-addressed store, so the same digest can be wanted by several of them (a wheel pushed
 * again as an OCI blob). A small MetaStore document per digest lists who holds the bytes; a
 * holder lets go with `release`, and the bytes are deleted only when the last holder has gone.
 * Holder names are opaque strings chosen by the callers; this layer names no ecosystem.
 *
 *   holds/<ab>/<hex>   { holders: [...], touched: {h: ms} }  held
 *                      { holders: [], releasing: <ms> }      the last holder is deleting the bytes
 *
 * `touched` records, per holder, when it last held the digest: every `hold` writes it, also for a
 * digest the holder holds already (a manifest PUT holds what it names again: a "touch"), so the
 * garbage collector (lifecycle/) can tell a hold just taken for bytes whose referencing document
 * is still on its way (a blob pushed before its manifest) from one nobody has used for a long
 * time. A holder without a time was recorded by an earlier version: it counts as held just now.
 *
 * Order of operations, so that a release and a new hold of the same digest cannot lose bytes:
 *
 * - A writer holds first and stores the bytes after (`hold`, then `put`): once the hold is
 *   recorded no release deletes the bytes, and bytes put after a deletion come back.
 * - `release` drops the holder by compare-and-swap. When it was the last one it does not delete
 *   the document but marks it `releasing`, deletes the bytes, and then removes the marked
 *   document only if it is still the version it wrote (the re-check).
 * - `hold` never joins a `releasing` document: it waits until the release has finished (the
 *   document is gone), so its own `put` comes after the deletion and the bytes survive.
 * - The collector's releases go the same way, each by compare-and-swap on the very version it
 *   judged (`releaseJudged`): a hold written since (a touch) changes the version, and the
 *   release does not happen. Bytes that no document names are deleted under a `releasing`
 *   marker created only where no document exists (`deleteUnheld`), so a `hold` either wins
 *   (the marker is not created) or waits for the deletion and stores its bytes again after it.
 *   A marker a killed process left is finished by `finishStale`, which first renews it by
 *   compare-and-swap (a hold that took it over wins), so holds wait for it again.
 *
 * Remaining window: a release that stalls between marking and deleting for longer than
 * `staleMs` (30 s; a crashed process leaves such a marker behind) is taken over by the next
 * `hold`, whose bytes the stalled release may then delete; the final compare-and-swap of the
 * release notices the takeover but cannot bring the bytes back. Callers that store bytes without
 * holding them first are not protected at all.
 */
import { isSha256Hex, ConflictError, type BlobStore, type MetaStore, type ReadOptions, type Sha256Hex } from './types.js';

export interface HoldsDoc {
  /** Holder names, sorted, no duplicates. */
  holders: string[];
  /** Set (epoch ms) while the last holder deletes the bytes. */
  releasing?: number;
  /**
   * When each holder last held (or touched) the digest, epoch ms. A holder missing here was
   * recorded by an earlier version, which kept no times: read as held now (`heldAt`).
   */
  touched?: Record<string, number>;
}

/** One holds document as a collection reads it: the version is what a judged release is conditional on. */
export interface HoldsEntry {
  hex: Sha256Hex;
  doc: HoldsDoc;
  version: string;
}

/** What a judged release did. */
export interface JudgedRelease {
  /** The document was still the judged version, and the holders were let go. */
  released: boolean;
  /** No holder was left, so the bytes were deleted (or were already gone). */
  last: boolean;
  /** The bytes were deleted by this call. */
  deleted: boolean;
}

export interface ReleaseResult {
  /** The holder held the digest, and no longer does. */
  released: boolean;
  /** It was the last holder, so the bytes were up for deletion. */
  last: boolean;
  /** The bytes were deleted (false also when they were already gone). */
  deleted: boolean;
}

/** One holder's view of the holds: what an ecosystem passes to the neutral roles. */
export interface Holder {
  readonly name: string;
  /**
   * Records the hold; true when it is new. Call before storing the bytes; `size`, when known, is
   * what accounting counts. `fresh`: the document is most likely absent (the bytes were just
   * found missing from the store, or are new to the caller): a hint, never trusted (see
   * `BlobHolds.hold`).
   */
  hold(hex: Sha256Hex, size?: number, opts?: HoldOptions): Promise<boolean>;
  isHeld(hex: Sha256Hex): Promise<boolean>;
  release(hex: Sha256Hex): Promise<ReleaseResult>;
  /** `touchStored` for this holder. */
  touchStored(hexes: readonly Sha256Hex[]): Promise<Sha256Hex[]>;
}

export interface HoldOptions {
  fresh?: boolean;
}

/**
 * Told of every change of a digest's holders this process makes, after it is written: what
 * accounting (lifecycle/usage/) counts. Called synchronously; it must not throw or block.
 */
export interface HoldsObserver {
  /**
   * The holders of `hex` went from `before` to `after` (a new holder, or holders let go); `size`
   * when the writer knew the size of the bytes it holds them for.
   */
  changed(hex: Sha256Hex, before: readonly string[], after: readonly string[], size?: number): void;
  /** The size of bytes about to be deleted (their last holder went), so they can be counted once gone. */
  deleting(hex: Sha256Hex, size: number): void;
}

export interface BlobHoldsOptions {
  /** How long a `releasing` marker is waited for before a hold takes it over. */
  staleMs?: number;
  now?: () => number;
}

const DEFAULT_STALE_MS = 30_000;
/** Digests `touchStored` holds and checks at once. */
const TOUCH_AT_ONCE = 8;
/** Where the holds documents live in the MetaStore. */
const FOLDER = 'holds';
/** Conflicts tolerated per call; each round of concurrent writers lets one through. */
const MAX_CONFLICTS = 200;
/**
 * Segments of `[A-Za-z0-9._-]` starting with a letter or digit, joined by '/': callers may name a
 * holder inside a holder (an OCI index's repository, `oci.<index>/<repo path>`). No empty segment,
 * no `.` or `..` of its own, nothing a key or a log line could misread.
 */
const HOLDER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/;
/** Longer names are a caller's mistake: a holds document lists every holder of its digest. */
const MAX_HOLDER_NAME = 512;

const NOT_HELD: ReleaseResult = { released: false, last: false, deleted: false };

export class BlobHolds {
  readonly #meta: MetaStore;
  readonly #blobs: BlobStore;
  readonly #staleMs: number;
  readonly #now: () => number;
  readonly #observers: HoldsObserver[] = [];

  constructor(meta: MetaStore, blobs: BlobStore, opts: BlobHoldsOptions = {}) {
    this.#meta = meta;
    this.#blobs = blobs;
    this.#staleMs = opts.staleMs ?? DEFAULT_STALE_MS;
    this.#now = opts.now ?? Date.now;
  }

  /** Tells `observer` of every change of holders from now on. */
  observe(observer: HoldsObserver): void {
    this.#observers.push(observer);
  }

  #changed(hex: Sha256Hex, before: readonly string[], after: readonly string[], size?: number): void {
    for (const o of this.#observers) o.changed(hex, before, after, size);
  }

  /** A holder bound to its name. */
  as(name: string): Holder {
    checkHolder(name);
    return {
      name,
      hold: (hex, size, opts) => this.hold(hex, name, size, opts),
      isHeld: (hex) => this.isHeldBy(hex, name),
      release: (hex) => this.release(hex, name),
      touchStored: (hexes) => this.touchStored(hexes, name),
    };
  }

  /**
   * What a writer does before it records a document naming digests it already holds (a manifest
   * naming layers pushed earlier, a promoted file): holds each again (refreshing its time, so a
   * collection that judged the old hold cannot release it: its compare-and-swap fails), then
   * checks that the bytes are still stored. Returns the digests whose bytes are gone (a release
   * won the race: a write that needs them must fail); empty when all are there. `TOUCH_AT_ONCE`
   * at a time.
   */
  async touchStored(hexes: readonly Sha256Hex[], holder: string): Promise<Sha256Hex[]> {
    const unique = [...new Set(hexes)];
    const gone: Sha256Hex[] = [];
    for (let i = 0; i < unique.length; i += TOUCH_AT_ONCE) {
      const batch = unique.slice(i, i + TOUCH_AT_ONCE);
      await Promise.all(
        batch.map(async (hex) => {
          await this.hold(hex, holder);
          if ((await this.#blobs.stat(hex)) === null) gone.push(hex);
        }),
      );
    }
    return gone;
  }

  /** Who holds `hex` now (nobody while its bytes are being deleted); `opts.recent` for a request's read. */
  async holders(hex: Sha256Hex, opts?: ReadOptions): Promise<string[]> {
    const doc = (await this.#meta.get<HoldsDoc>(keyOf(hex), opts))?.doc;
    return doc && doc.releasing === undefined ? [...doc.holders] : [];
  }

  async isHeldBy(hex: Sha256Hex, holder: string): Promise<boolean> {
    return (await this.holders(hex)).includes(holder);
  }

  /**
   * Adds `holder` to the digest's holders, or refreshes its time when it holds the digest already
   * (a touch); true when it was not there yet. One read and one write. Waits while the bytes are
   * being deleted by a release.
   *
   * `fresh`: the caller just found the bytes missing (a pull-through about to store them), and a
   * digest's document goes with its bytes, so it is written at once if absent, without the read;
   * where one exists after all (another holder's, a release's), the write fails and the usual
   * read and write follow. One store request instead of two for every blob a cold pull stores.
   */
  async hold(hex: Sha256Hex, holder: string, size?: number, opts: HoldOptions = {}): Promise<boolean> {
    checkHolder(holder);
    const key = keyOf(hex);
    if (opts.fresh === true) {
      const first: HoldsDoc = { holders: [holder], touched: { [holder]: this.#now() } };
      try {
        await this.#meta.put<HoldsDoc>(key, first, null);
        this.#changed(hex, [], first.holders, size);
        return true;
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
      }
    }
    let conflicts = 0;
    for (;;) {
      const current = await this.#meta.get<HoldsDoc>(key);
      const doc = current?.doc;
      let next: HoldsDoc = { holders: [holder], touched: { [holder]: this.#now() } };
      if (doc?.releasing !== undefined) {
        if (this.#now() - doc.releasing < this.#staleMs) {
          await pause(5 + Math.random() * 20);
          continue;
        }
        // A release that stalled or crashed: take the document over (it lists no holders).
      } else if (doc) {
        const holders = doc.holders.includes(holder) ? doc.holders : [...doc.holders, holder].sort();
        next = { holders, touched: { ...doc.touched, [holder]: this.#now() } };
      }
      try {
        await this.#meta.put<HoldsDoc>(key, next, current ? current.version : null);
        const before = !doc || doc.releasing !== undefined ? [] : doc.holders;
        if (before.includes(holder)) return false;
        this.#changed(hex, before, next.holders, size);
        return true;
      } catch (err) {
        conflicts = await backOff(err, key, conflicts);
      }
    }
  }

  /**
   * Removes `holder`; when nobody else holds the digest, deletes the bytes and the document.
   * `released` is false (and nothing changes) when `holder` did not hold it.
   */
  async release(hex: Sha256Hex, holder: string): Promise<ReleaseResult> {
    const key = keyOf(hex);
    let conflicts = 0;
    let marked: string;
    let undo: HoldsDoc;
    for (;;) {
      const current = await this.#meta.get<HoldsDoc>(key);
      const doc = current?.doc;
      if (!current || !doc || doc.releasing !== undefined || !doc.holders.includes(holder)) return NOT_HELD;
      undo = { holders: [holder], touched: pick(doc.touched, [holder]) };
      const rest = without(doc, [holder]);
      try {
        if (rest) {
          await this.#meta.put<HoldsDoc>(key, rest, current.version);
          this.#changed(hex, doc.holders, rest.holders);
          return { released: true, last: false, deleted: false };
        }
        marked = await this.#meta.put<HoldsDoc>(key, { holders: [], releasing: this.#now() }, current.version);
        this.#changed(hex, doc.holders, []);
        break;
      } catch (err) {
        conflicts = await backOff(err, key, conflicts);
      }
    }
    // Undone on failure so the hold stays as it was and the caller may retry.
    const deleted = await this.#deleteMarked(hex, marked, undo);
    return { released: true, last: true, deleted };
  }

  /**
   * When `holder` last held the digest by `doc` (epoch ms); a holder recorded without a time (by
   * an earlier version) counts as holding it now.
   */
  heldAt(doc: HoldsDoc, holder: string): number {
    return doc.touched?.[holder] ?? this.#now();
  }

  /** The holds document of `hex` with its version, or null. */
  async entry(hex: Sha256Hex): Promise<HoldsEntry | null> {
    const got = await this.#meta.get<HoldsDoc>(keyOf(hex));
    return got && { hex, doc: got.doc, version: got.version };
  }

  /** The digest of every holds document (a listing; in no particular order). */
  async *digests(): AsyncIterable<Sha256Hex> {
    for await (const key of this.#meta.list(FOLDER)) {
      const hex = key.slice(key.lastIndexOf('/') + 1);
      if (isSha256Hex(hex)) yield hex;
    }
  }

  /**
   * Gives the holders a document lists without a time (an earlier version's) the time now, by
   * compare-and-swap on `entry.version`, so a later collection can judge their age. False when
   * the document changed meanwhile (a hold wrote times of its own, or a release).
   */
  async stampUntimed(entry: HoldsEntry): Promise<boolean> {
    const { doc } = entry;
    if (doc.releasing !== undefined) return false;
    const now = this.#now();
    const touched = { ...doc.touched };
    for (const h of doc.holders) touched[h] ??= now;
    return this.#putIf(keyOf(entry.hex), { holders: doc.holders, touched }, entry.version);
  }

  /**
   * Lets `holders` go from the digest, only if its document is still `entry.version` (what the
   * collector judged); when none is left, deletes the bytes as `release` does (marker, bytes,
   * conditional removal of the marker). Anything changed meanwhile: nothing is done.
   */
  async releaseJudged(entry: HoldsEntry, holders: readonly string[]): Promise<JudgedRelease> {
    const key = keyOf(entry.hex);
    const rest = without(entry.doc, holders);
    if (entry.doc.releasing !== undefined) return { released: false, last: false, deleted: false };
    if (rest) {
      const released = await this.#putIf(key, rest, entry.version);
      if (released) this.#changed(entry.hex, entry.doc.holders, rest.holders);
      return { released, last: false, deleted: false };
    }
    let marked: string;
    try {
      marked = await this.#meta.put<HoldsDoc>(key, { holders: [], releasing: this.#now() }, entry.version);
    } catch (err) {
      if (err instanceof ConflictError) return { released: false, last: false, deleted: false };
      throw err;
    }
    this.#changed(entry.hex, entry.doc.holders, []);
    const deleted = await this.#deleteMarked(entry.hex, marked, entry.doc);
    return { released: true, last: true, deleted };
  }

  /**
   * Deletes bytes no holds document names (an orphan): a `releasing` marker is created only if no
   * document exists, the bytes are deleted, the marker removed. Null when a document appeared
   * first (someone holds the digest now): nothing is done.
   */
  async deleteUnheld(hex: Sha256Hex): Promise<boolean | null> {
    let marked: string;
    try {
      marked = await this.#meta.put<HoldsDoc>(keyOf(hex), { holders: [], releasing: this.#now() }, null);
    } catch (err) {
      if (err instanceof ConflictError) return null;
      throw err;
    }
    return this.#deleteMarked(hex, marked, null);
  }

  /** Whether `doc` is a marker older than the stale age: a release that stalled or whose process died. */
  isStale(doc: HoldsDoc): boolean {
    return doc.releasing !== undefined && doc.holders.length === 0 && this.#now() - doc.releasing >= this.#staleMs;
  }

  /**
   * Finishes what a killed release left: renews the stale marker (by compare-and-swap, so a hold
   * that took it over wins and nothing is done), deletes the bytes, removes the marker. Null when
   * the document changed meanwhile.
   */
  async finishStale(entry: HoldsEntry): Promise<boolean | null> {
    if (!this.isStale(entry.doc)) return null;
    let marked: string;
    try {
      marked = await this.#meta.put<HoldsDoc>(keyOf(entry.hex), { holders: [], releasing: this.#now() }, entry.version);
    } catch (err) {
      if (err instanceof ConflictError) return null;
      throw err;
    }
    return this.#deleteMarked(entry.hex, marked, null);
  }

  /**
   * The second half of every deletion: the bytes under the marker `marked`, then the marker
   * (only if it is still the version written). A failed deletion puts `undo` back in its place
   * (or removes the marker when there is nothing to put back) and rethrows.
   */
  async #deleteMarked(hex: Sha256Hex, marked: string, undo: HoldsDoc | null): Promise<boolean> {
    const key = keyOf(hex);
    let deleted: boolean;
    try {
      if (this.#observers.length > 0) {
        const size = (await this.#blobs.stat(hex))?.size;
        if (size !== undefined) for (const o of this.#observers) o.deleting(hex, size);
      }
      deleted = await this.#blobs.delete(hex);
    } catch (err) {
      const restore = undo ? this.#meta.put<HoldsDoc>(key, undo, marked) : this.#meta.delete(key, marked);
      await restore.catch(() => undefined);
      throw err;
    }
    try {
      await this.#meta.delete(key, marked);
    } catch (err) {
      // A hold took the marker over as stale: the window described at the top of this file.
      if (!(err instanceof ConflictError)) throw err;
    }
    return deleted;
  }

  /** A compare-and-swap write; false on a conflict. */
  async #putIf(key: string, doc: HoldsDoc, version: string): Promise<boolean> {
    try {
      await this.#meta.put<HoldsDoc>(key, doc, version);
      return true;
    } catch (err) {
      if (err instanceof ConflictError) return false;
      throw err;
    }
  }
}


/** `doc` without `gone` among its holders (and their times); null when nobody is left. */
function without(doc: HoldsDoc, gone: readonly string[]): HoldsDoc | null {
  const holders = doc.holders.filter((h) => !gone.includes(h));
  if (holders.length === 0) return null;
  return doc.touched === undefined ? { holders } : { holders, touched: pick(doc.touched, holders) };
}

function pick(touched: Record<string, number> | undefined, holders: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const h of holders) {
    const at = touched?.[h];
    if (at !== undefined) out[h] = at;
  }
  return out;
}

/** Sharded like the blob layout, so no folder of the fs backend grows to millions of entries. */
function keyOf(hex: Sha256Hex): string {
  if (!isSha256Hex(hex)) throw new Error(`not a sha256 digest: ${hex}`);
  return `${FOLDER}/${hex.slice(0, 2)}/${hex}`;
}

function checkHolder(name: string): void {
  if (name.length > MAX_HOLDER_NAME || !HOLDER_NAME.test(name)) throw new Error(`invalid holder name: ${JSON.stringify(name)}`);
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Rethrows anything but a conflict; after a conflict waits a little (randomised, growing). */
async function backOff(err: unknown, key: string, conflicts: number): Promise<number> {
  if (!(err instanceof ConflictError)) throw err;
  if (conflicts + 1 >= MAX_CONFLICTS) throw new ConflictError(key);
  await pause(Math.random() * 2 * Math.min(conflicts + 1, 10));
  return conflicts + 1;
}
