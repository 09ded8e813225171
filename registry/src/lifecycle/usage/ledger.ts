/**
 * How many bytes and objects each index holds, and the store in all: one document every process
 * reads and adds to,
 *
 *   lifecycle/usage   { indexes: { <index>: { bytes, objects } }, total: { bytes, objects },
 *                       countedAt, lastCollection }
 *
 * Kept by the writes, never by listing the store on a request:
 * - Each change of a digest's holders this process makes (storage/holds.ts `HoldsObserver`) is
 *   turned into deltas: an index whose holders gain the digest adds its size and one object, an
 *   index that loses its last holder of it subtracts them; the store's total (blobs anyone holds,
 *   each once) grows when a digest gets its first holder and shrinks when it loses its last.
 *   Sizes come from the writer, or are read at flush time (`stat`; bytes are stored just after
 *   their hold), or learnt from the deletion itself.
 * - The deltas are summed in memory and added to the document by compare-and-swap every
 *   `flushMs` (2 s): one store write per process per interval, never one per request.
 * - Every collection counts exactly (lifecycle/usage/count.ts) and replaces the figures
 *   (`recount`), correcting any drift (a process killed before its flush, a delta whose bytes
 *   never appeared). Writes go on while a count reads: from `beginCount` to `recount` every flush
 *   also writes its changes, each with its digest and time, to a journal in the document, and the
 *   recount adds those the count did not see (made after it read that digest's holds: its own
 *   releases too). Times are the writers' clocks: a change within the clock skew of the read is
 *   judged by it. A journal past `MAX_JOURNAL` changes is dropped and the count stands alone.
 *
 * What a reader sees (`/+status`, metrics, quotas) is the document as this process last read or
 * wrote it (at most `flushMs` old) plus its own deltas not yet flushed.
 */
import type { Sha256Hex, BlobStore, MetaStore } from '../../storage/types.js';
import type { HoldsObserver } from '../../storage/holds.js';
import { updateDoc } from '../../storage/update.js';
import { PeriodicFlush } from '../periodic-flush.js';
import type { CountReads, UsageCount } from './count.js';

export interface UsageFigures {
  bytes: number;
  objects: number;
}

export interface LastCollection {
  /** ISO 8601. */
  endedAt: string;
  result: 'ok' | 'failed';
  blobsDeleted: number;
  bytesDeleted: number;
  /** Why it failed (never a credential: store errors name the store and the cause). */
  error?: string;
}

export interface UsageDoc {
  indexes: Record<string, UsageFigures>;
  total: UsageFigures;
  /** When the figures were last counted exactly (ISO 8601); null: only ever kept by writes. */
  countedAt: string | null;
  lastCollection?: LastCollection;
  /** The changes flushed while a count runs (`beginCount` to `recount`). */
  journal?: Journal;
}

/** One flushed change: digest, index (or the total), objects, bytes, when (epoch ms). */
type JournalEntry = [hex: string, key: string, objects: number, bytes: number, at: number];

interface Journal {
  /** When the count began (epoch ms); a journal older than a day is abandoned. */
  since: number;
  entries: JournalEntry[];
  /** More changes than a journal keeps: the count stands alone. */
  overflow?: boolean;
}

export const USAGE_KEY = 'lifecycle/usage';
const DEFAULT_FLUSH_MS = 2_000;
/** Flushes a digest whose bytes have not appeared waits through before its delta is dropped. */
const MAX_SIZE_TRIES = 30;
/** Sizes learnt from deletions, kept until the next flush reads them. */
const MAX_LEARNT = 10_000;
/**
 * Changes a journal keeps: about 110 bytes each, and every flush during a count rewrites the
 * document, so this bounds what a flush writes (about half a MiB).
 */
const MAX_JOURNAL = 5_000;
/** A journal whose count never recorded (its process killed) is dropped after this. */
const JOURNAL_MAX_AGE_MS = 24 * 3600_000;

/**
 * The pending changes of a digest, each kept apart with its time (a count judges each by it: one
 * made before the count read the digest and one made after must not cancel out): per index (and
 * the total, key `TOTAL`) an object gained (1) or lost (-1).
 */
interface Pending {
  changes: Array<{ key: string; n: number; at: number }>;
  tries: number;
}

/** A change counted with its size, not yet flushed. */
interface Change {
  hex: Sha256Hex;
  key: string;
  objects: number;
  bytes: number;
  at: number;
}

const TOTAL = '\n';

export interface UsageLedgerOptions {
  meta: MetaStore;
  blobs: BlobStore;
  /** The index a holder belongs to; null for a holder of no single index (an earlier version's). */
  indexOf: (holder: string) => string | null;
  flushMs?: number;
  now?: () => number;
}

export class UsageLedger implements HoldsObserver {
  readonly #o: UsageLedgerOptions;
  readonly #pending = new Map<Sha256Hex, Pending>();
  readonly #learnt = new Map<Sha256Hex, number>();
  /** Changes whose size is known but not yet in the document, and their sums per index. */
  #changes: Change[] = [];
  readonly #unflushed = new Map<string, UsageFigures>();
  #doc: UsageDoc = emptyDoc();
  readonly #flush: PeriodicFlush;

  constructor(opts: UsageLedgerOptions) {
    this.#o = opts;
    this.#flush = new PeriodicFlush(() => this.#flushOnce(), opts.flushMs ?? DEFAULT_FLUSH_MS);
  }

  changed(hex: Sha256Hex, before: readonly string[], after: readonly string[], size?: number): void {
    const had = this.#indexes(before);
    const has = this.#indexes(after);
    const at = this.#now();
    const delta = (key: string, n: number): void => {
      let p = this.#pending.get(hex);
      if (!p) this.#pending.set(hex, (p = { changes: [], tries: 0 }));
      p.changes.push({ key, n, at });
    };
    for (const ix of has) if (!had.has(ix)) delta(ix, 1);
    for (const ix of had) if (!has.has(ix)) delta(ix, -1);
    // The store's total: blobs with at least one holder, each once.
    if (before.length === 0 && after.length > 0) delta(TOTAL, 1);
    if (before.length > 0 && after.length === 0) delta(TOTAL, -1);
    // A size the writer knew counts at once (a quota checked next sees it), not at the flush.
    if (size !== undefined) this.#resolve(hex, size);
  }

  deleting(hex: Sha256Hex, size: number): void {
    if (this.#learnt.size >= MAX_LEARNT) this.#learnt.clear();
    this.#learnt.set(hex, size);
  }

  /** An index's figures as this process knows them; zero for one that holds nothing (yet). */
  usage(index: string): UsageFigures {
    return plus(this.#doc.indexes[index], this.#unflushed.get(index));
  }

  total(): UsageFigures {
    return plus(this.#doc.total, this.#unflushed.get(TOTAL));
  }

  get countedAt(): string | null {
    return this.#doc.countedAt;
  }

  get lastCollection(): LastCollection | undefined {
    return this.#doc.lastCollection;
  }

  /** Starts flushing (and reading what other processes flushed) every `flushMs`, the first time now. */
  start(): void {
    this.#flush.start();
    void this.flush().catch(() => undefined);
  }

  stop(): Promise<void> {
    return this.#flush.stop();
  }

  /** Adds this process's deltas to the document, and reads what the others added. One at a time. */
  flush(): Promise<void> {
    return this.#flush.run();
  }

  /** A count begins: from now on every flush journals its changes, until `recount`. */
  async beginCount(): Promise<void> {
    await this.flush();
    const since = this.#now();
    const { doc } = await updateDoc<UsageDoc>(this.#o.meta, USAGE_KEY, (current) => ({ ...(current ?? emptyDoc()), journal: { since, entries: [] } }));
    if (doc) this.#doc = doc;
  }

  /**
   * Replaces the figures with an exact count (a collection's) and the journalled changes it did
   * not see (`reads` says which), after flushing what this process changed; ends the journal.
   * `lastCollection` is kept unless given.
   */
  async recount(counted: UsageCount, reads?: CountReads, lastCollection?: LastCollection): Promise<void> {
    await this.flush();
    const countedAt = new Date(this.#now()).toISOString();
    const { doc } = await updateDoc<UsageDoc>(this.#o.meta, USAGE_KEY, (current) => {
      let figures: UsageDoc = { ...emptyDoc(), indexes: counted.indexes, total: counted.total };
      const journal = current?.journal;
      if (reads && journal && !journal.overflow) {
        const missed = journal.entries.filter(([hex, , , , at]) => reads.holdsChangedAfter(hex, at));
        figures = applyChanges(figures, missed.map(([hex, key, objects, bytes, at]) => ({ hex, key, objects, bytes, at })));
      }
      const last = lastCollection ?? current?.lastCollection;
      return { indexes: figures.indexes, total: figures.total, countedAt, ...(last ? { lastCollection: last } : {}) };
    });
    if (doc) this.#doc = doc;
  }

  /** Records how the last collection ended (a failed one changes no figures). */
  async recordCollection(last: LastCollection): Promise<void> {
    const { doc } = await updateDoc<UsageDoc>(this.#o.meta, USAGE_KEY, (current) => ({ ...(current ?? emptyDoc()), lastCollection: last }));
    if (doc) this.#doc = doc;
  }

  async #flushOnce(): Promise<void> {
    await this.#resolveSizes();
    if (this.#changes.length === 0) {
      const got = await this.#o.meta.get<UsageDoc>(USAGE_KEY);
      this.#doc = got?.doc ?? emptyDoc();
      return;
    }
    let changes = this.#changes;
    this.#changes = [];
    this.#unflushed.clear();
    if (this.#doc.journal) changes = await this.#whenStored(changes);
    const now = this.#now();
    try {
      const { doc } = await updateDoc<UsageDoc>(this.#o.meta, USAGE_KEY, (current) => journalled(applyChanges(current ?? emptyDoc(), changes), changes, now));
      if (doc) this.#doc = doc;
    } catch (err) {
      // Not written: kept for the next flush.
      for (const c of changes) this.#add(c);
      throw err;
    }
  }

  /**
   * While a count runs: a gain counts from when its bytes were stored, not from its hold (a count
   * counts a held digest only once its bytes are there), so each gain's time becomes the later of
   * the two (the store's time of the bytes; one `stat` per gain, only during a count).
   */
  async #whenStored(changes: Change[]): Promise<Change[]> {
    const stored = new Map<Sha256Hex, number | undefined>();
    for (const c of changes) {
      if (c.objects <= 0) continue;
      if (!stored.has(c.hex)) stored.set(c.hex, (await this.#o.blobs.stat(c.hex).catch(() => null))?.modifiedMs);
      const at = stored.get(c.hex);
      if (at !== undefined) c.at = Math.max(c.at, at);
    }
    return withoutEmptyHolds(changes);
  }

  /** Turns pending changes into byte deltas where the size is known now. */
  async #resolveSizes(): Promise<void> {
    const hexes = [...this.#pending.keys()];
    for (const hex of hexes) {
      const p = this.#pending.get(hex);
      if (!p) continue;
      let size = this.#learnt.get(hex);
      size ??= (await this.#o.blobs.stat(hex).catch(() => null))?.size;
      if (size === undefined) {
        // Gains wait for their bytes; losses whose bytes went without a size learnt are dropped.
        const gains = p.changes.some(({ n }) => n > 0);
        p.tries += 1;
        if (gains && p.tries < MAX_SIZE_TRIES) continue;
        this.#pending.delete(hex);
        continue;
      }
      this.#resolve(hex, size);
    }
    this.#learnt.clear();
  }

  /** The pending changes of `hex`, counted with its size. */
  #resolve(hex: Sha256Hex, size: number): void {
    const p = this.#pending.get(hex);
    if (!p) return;
    this.#pending.delete(hex);
    for (const { key, n, at } of p.changes) this.#add({ hex, key, objects: n, bytes: n * size, at });
  }

  #add(change: Change): void {
    this.#changes.push(change);
    const cur = this.#unflushed.get(change.key) ?? { bytes: 0, objects: 0 };
    this.#unflushed.set(change.key, { bytes: cur.bytes + change.bytes, objects: cur.objects + change.objects });
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }

  #indexes(holders: readonly string[]): Set<string> {
    const out = new Set<string>();
    for (const h of holders) {
      const ix = this.#o.indexOf(h);
      if (ix !== null) out.add(ix);
    }
    return out;
  }
}

export function emptyDoc(): UsageDoc {
  return { indexes: {}, total: { bytes: 0, objects: 0 }, countedAt: null };
}

function plus(a: UsageFigures | undefined, b: UsageFigures | undefined): UsageFigures {
  return { bytes: Math.max(0, (a?.bytes ?? 0) + (b?.bytes ?? 0)), objects: Math.max(0, (a?.objects ?? 0) + (b?.objects ?? 0)) };
}

/**
 * `changes` without each gain that a later loss (same digest, same index) undid before the bytes
 * were there: a hold taken on bytes that were gone, released by a collection, then the bytes
 * stored again by a new hold. Moved to when the bytes were stored, that gain would come after its
 * own loss, and a count that read the digest between the two would add it and not the loss. Such
 * a pair never counted anywhere, so both go.
 */
function withoutEmptyHolds(changes: readonly Change[]): Change[] {
  const dropped = new Set<Change>();
  const gains = new Map<string, Change[]>();
  for (const c of changes) {
    const key = `${c.hex} ${c.key}`;
    if (c.objects > 0) {
      gains.set(key, [...(gains.get(key) ?? []), c]);
      continue;
    }
    const open = gains.get(key);
    const gain = open?.at(-1);
    if (open && gain && gain.at > c.at) {
      open.pop();
      dropped.add(gain).add(c);
    }
  }
  return dropped.size === 0 ? [...changes] : changes.filter((c) => !dropped.has(c));
}

function applyChanges(doc: UsageDoc, changes: readonly Change[]): UsageDoc {
  const indexes = { ...doc.indexes };
  let total = doc.total;
  for (const c of changes) {
    const d = { bytes: c.bytes, objects: c.objects };
    if (c.key === TOTAL) total = plus(total, d);
    else indexes[c.key] = plus(indexes[c.key], d);
  }
  return { ...doc, indexes, total };
}

/** `doc` with `changes` in its journal, if a count is running (and the journal not full or abandoned). */
function journalled(doc: UsageDoc, changes: readonly Change[], now: number): UsageDoc {
  const journal = doc.journal;
  if (!journal) return doc;
  if (now - journal.since > JOURNAL_MAX_AGE_MS) {
    const { journal: _abandoned, ...rest } = doc;
    return rest;
  }
  if (journal.overflow || journal.entries.length + changes.length > MAX_JOURNAL) return { ...doc, journal: { since: journal.since, entries: [], overflow: true } };
  return { ...doc, journal: { since: journal.since, entries: [...journal.entries, ...changes.map((c): JournalEntry => [c.hex, c.key, c.objects, c.bytes, c.at])] } };
}
