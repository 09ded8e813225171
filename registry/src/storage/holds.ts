/**
 * Per-digest holds on the shared BlobStore. Every ecosystem stores its bytes in the one
 * content-addressed store, so the same digest can be wanted by several of them (a wheel pushed
 * again as an OCI blob). A small MetaStore document per digest lists who holds the bytes; a
 * holder lets go with `release`, and the bytes are deleted only when the last holder has gone.
 * Holder names are opaque strings chosen by the callers; this layer names no ecosystem.
 *
 *   holds/<ab>/<hex>   { holders: [...] }                  held
 *                      { holders: [], releasing: <ms> }    the last holder is deleting the bytes
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
 *
 * Remaining window: a release that stalls between marking and deleting for longer than
 * `staleMs` (30 s; a crashed process leaves such a marker behind) is taken over by the next
 * `hold`, whose bytes the stalled release may then delete; the final compare-and-swap of the
 * release notices the takeover but cannot bring the bytes back. Callers that store bytes without
 * holding them first are not protected at all.
 */
import { isSha256Hex, ConflictError, type BlobStore, type MetaStore, type Sha256Hex } from './types.js';

export interface HoldsDoc {
  /** Holder names, sorted, no duplicates. */
  holders: string[];
  /** Set (epoch ms) while the last holder deletes the bytes. */
  releasing?: number;
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
  /** Records the hold; true when it is new. Call before storing the bytes. */
  hold(hex: Sha256Hex): Promise<boolean>;
  isHeld(hex: Sha256Hex): Promise<boolean>;
  release(hex: Sha256Hex): Promise<ReleaseResult>;
}

export interface BlobHoldsOptions {
  /** How long a `releasing` marker is waited for before a hold takes it over. */
  staleMs?: number;
  now?: () => number;
}

const DEFAULT_STALE_MS = 30_000;
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

  constructor(meta: MetaStore, blobs: BlobStore, opts: BlobHoldsOptions = {}) {
    this.#meta = meta;
    this.#blobs = blobs;
    this.#staleMs = opts.staleMs ?? DEFAULT_STALE_MS;
    this.#now = opts.now ?? Date.now;
  }

  /** A holder bound to its name. */
  as(name: string): Holder {
    checkHolder(name);
    return {
      name,
      hold: (hex) => this.hold(hex, name),
      isHeld: (hex) => this.isHeldBy(hex, name),
      release: (hex) => this.release(hex, name),
    };
  }

  /** Who holds `hex` now (nobody while its bytes are being deleted). */
  async holders(hex: Sha256Hex): Promise<string[]> {
    const doc = (await this.#meta.get<HoldsDoc>(keyOf(hex)))?.doc;
    return doc && doc.releasing === undefined ? [...doc.holders] : [];
  }

  async isHeldBy(hex: Sha256Hex, holder: string): Promise<boolean> {
    return (await this.holders(hex)).includes(holder);
  }

  /**
   * Adds `holder` to the digest's holders; true when it was not there yet. An existing hold costs
   * one read and no write. Waits while the bytes are being deleted by a release.
   */
  async hold(hex: Sha256Hex, holder: string): Promise<boolean> {
    checkHolder(holder);
    const key = keyOf(hex);
    let conflicts = 0;
    for (;;) {
      const current = await this.#meta.get<HoldsDoc>(key);
      const doc = current?.doc;
      let holders: string[] = [];
      if (doc?.releasing !== undefined) {
        if (this.#now() - doc.releasing < this.#staleMs) {
          await pause(5 + Math.random() * 20);
          continue;
        }
        // A release that stalled or crashed: take the document over (it lists no holders).
      } else if (doc) {
        if (doc.holders.includes(holder)) return false;
        holders = doc.holders;
      }
      try {
        await this.#meta.put<HoldsDoc>(key, { holders: [...holders, holder].sort() }, current ? current.version : null);
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
    for (;;) {
      const current = await this.#meta.get<HoldsDoc>(key);
      const doc = current?.doc;
      if (!current || !doc || doc.releasing !== undefined || !doc.holders.includes(holder)) return NOT_HELD;
      const rest = doc.holders.filter((h) => h !== holder);
      try {
        if (rest.length > 0) {
          await this.#meta.put<HoldsDoc>(key, { holders: rest }, current.version);
          return { released: true, last: false, deleted: false };
        }
        marked = await this.#meta.put<HoldsDoc>(key, { holders: [], releasing: this.#now() }, current.version);
        break;
      } catch (err) {
        conflicts = await backOff(err, key, conflicts);
      }
    }
    let deleted: boolean;
    try {
      deleted = await this.#blobs.delete(hex);
    } catch (err) {
      // Undo the marker so the hold stays as it was and the caller may retry.
      await this.#meta.put<HoldsDoc>(key, { holders: [holder] }, marked).catch(() => undefined);
      throw err;
    }
    try {
      await this.#meta.delete(key, marked);
    } catch (err) {
      // A hold took the marker over as stale: the window described at the top of this file.
      if (!(err instanceof ConflictError)) throw err;
    }
    return { released: true, last: true, deleted };
  }
}

/** Sharded like the blob layout, so no folder of the fs backend grows to millions of entries. */
function keyOf(hex: Sha256Hex): string {
  if (!isSha256Hex(hex)) throw new Error(`not a sha256 digest: ${hex}`);
  return `holds/${hex.slice(0, 2)}/${hex}`;
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
