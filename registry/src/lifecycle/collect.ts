/**
 * One garbage collection over the holds (storage/holds.ts) and the blob store: what is deleted,
 * and why that never takes bytes a document still references. `collector.ts` runs it under the
 * lease; this file is the collection itself.
 *
 * Steps:
 * 1. `M` = now; the cutoff is `M - grace`.
 * 2. Mark: every ecosystem's marker adds the digests its documents reference, per holder.
 * 3. List the digests of every holds document (set `H`), then every stored blob (sizes).
 * 4. Holds: for each document of `H`, read it (content and version). A holder some marker owns,
 *    whose digest its documents do not reference and whose hold is older than the cutoff, is
 *    released by compare-and-swap on the version read (`releaseJudged`); with the last holder
 *    the bytes go under the `releasing` marker. An owned, unreferenced holder without a time (an
 *    earlier version's hold) is given the time now instead (`stampUntimed`): released by a later
 *    run, once that time is past the grace period. A holder no marker owns is kept.
 *    A `releasing` marker older than the stale age (a killed release or run) is finished.
 * 5. Orphans: a blob no holds document named in step 3, last written before the cutoff, is
 *    deleted under a marker created only where no document exists (`deleteUnheld`).
 * 6. Stale staging (the store's sweep) and idle upload sessions (the shared stages' sweep).
 * A dry run does steps 1-5 reading only, and reports what 4 and 5 would do.
 *
 * Races considered (W: a writer; the others are another collection and a client's DELETE):
 * - W holds a digest (time t) and then stores bytes and writes its document (time T). If T
 *   precedes the mark's read of that document, the digest is marked. Otherwise the hold is
 *   judged by its time: released only if t < M - grace, i.e. W took longer than the grace
 *   period between its hold and its document (the grace period must exceed the longest push:
 *   a day by default). A hold written after step 4 read the document changed its version, so
 *   the judged release fails its compare-and-swap.
 * - W writes a document naming bytes it held long ago (a manifest naming a layer pushed last
 *   week, a promoted file): it touches first (holds again: a new time and a new version), then
 *   checks the bytes are stored, then writes (`Holder.touchStored`). A release judged before the
 *   touch fails its compare-and-swap; one that landed before the touch makes W's hold wait for
 *   the deletion (never joining a `releasing` document), and W's check then finds the bytes gone
 *   and fails the write cleanly (the ecosystem's "blob unknown"), never recording a document
 *   that points at deleted bytes.
 * - W holds and stores bytes that the blob listing showed unheld (an orphan): either W's hold
 *   created the document first (the orphan's marker cannot be created: nothing is deleted) or
 *   the marker came first (W's hold waits for the deletion, and W's store puts the bytes back;
 *   a store that skips bytes it finds present checks after the wait, so it finds them gone).
 * - A blob stored without a hold first (no current writer does; an earlier version killed
 *   between put and hold could) is protected only by its age: deleted when older than grace.
 * - Two collections at once (a lease lost to a long stall): every change is conditional on
 *   what each read, so they cannot undo each other; the lease only saves the duplicate work.
 * - A process killed mid-run: a release it judged is either written or not; a marker it left
 *   is finished by the next run (step 4), or taken over by a hold after the stale age (the
 *   window storage/holds.ts describes). Nothing else is half done.
 * - Clock skew: hold times are the writers' clocks, `M` the collector's; skew adds to the time a
 *   push may take, so the grace period must exceed both together.
 */
import type { BlobHolds, HoldsEntry } from '../storage/holds.js';
import type { SharedStages } from '../storage/shared-stages.js';
import type { BlobStore, Sha256Hex } from '../storage/types.js';
import { indexOfHolder, Marks, type HoldsMarker } from './marks.js';
import { Pacer } from './pace.js';
import { CountReads, UsageCounter, type UsageCount } from './usage/count.js';

/** What a collection reads and changes: the stores (`Stores` has all of it). */
export interface CollectionStores {
  blobs: BlobStore;
  holds: BlobHolds;
  /** Removes stale staged writes; returns how many went. */
  sweep(): Promise<number>;
  sharedStages: SharedStages | null;
}

export interface CollectOptions {
  graceMs: number;
  dryRun: boolean;
  now?: () => number;
  /** Checked before every change: throws to stop the run (its lease was lost). */
  check?: () => void;
  /** Awaited after each deletion of bytes, with the number deleted so far (a test hook pauses here). */
  afterDelete?: (deleted: number) => Promise<void>;
  /** Holds documents judged at once (`AT_ONCE`; the test hook's pause wants 1). */
  atOnce?: number;
  /** The share of one core the collection may use (pace.ts); 1 or absent: as fast as it can. */
  cpuShare?: number;
  /** Told when the count read what (usage/count.ts), for the changes made meanwhile. */
  reads?: CountReads;
}

/** What a collection did, or in a dry run would do. */
export interface CollectionReport {
  dryRun: boolean;
  /** ISO 8601, when the mark began. */
  startedAt: string;
  durationMs: number;
  graceSecs: number;
  /** Distinct digests the documents reference. */
  referenced: number;
  /** Holds documents read. */
  holdsScanned: number;
  /** Holds released: a holder let go of a digest its documents no longer reference. */
  holdsReleased: number;
  /** Holds of an earlier version given a time: judged by a later collection. */
  holdsStamped: number;
  /** Holds kept because no ecosystem owns their holder (an index not in this config). */
  holdsUnowned: number;
  /** Stored blobs listed. */
  blobsScanned: number;
  /** Blobs deleted (their last hold released, orphans, stale markers finished), and their bytes. */
  blobsDeleted: number;
  bytesDeleted: number;
  /** Of those, blobs no holds document named. */
  orphansDeleted: number;
  /** `releasing` markers a killed process left, finished. */
  staleFinished: number;
  /** Stale staged writes and idle upload sessions removed (never in a dry run). */
  stagingSwept: number;
  uploadsSwept: number;
  /**
   * What each index and the store held, counted exactly as the run read the holds (before its own
   * releases: the ledger adds those, with every other change made meanwhile).
   */
  stored: UsageCount;
}

/** Holds documents judged at once. */
const AT_ONCE = 8;

export async function collect(stores: CollectionStores, markers: readonly HoldsMarker[], opts: CollectOptions): Promise<CollectionReport> {
  const now = opts.now ?? Date.now;
  const check = opts.check ?? (() => undefined);
  const { holds, blobs } = stores;
  const started = now();
  const cutoff = started - opts.graceMs;
  const report: CollectionReport = {
    dryRun: opts.dryRun,
    startedAt: new Date(started).toISOString(),
    durationMs: 0,
    graceSecs: Math.round(opts.graceMs / 1000),
    referenced: 0,
    holdsScanned: 0,
    holdsReleased: 0,
    holdsStamped: 0,
    holdsUnowned: 0,
    blobsScanned: 0,
    blobsDeleted: 0,
    bytesDeleted: 0,
    orphansDeleted: 0,
    staleFinished: 0,
    stagingSwept: 0,
    uploadsSwept: 0,
    stored: { indexes: {}, total: { bytes: 0, objects: 0 } },
  };
  const indexOf = indexOfHolder(markers);

  const pacer = new Pacer(opts.cpuShare ?? 1);
  const marks = new Marks();
  marks.pace = () => pacer.step();
  for (const marker of markers) await marker.mark(marks);
  report.referenced = marks.size;
  const counter = new UsageCounter(indexOf, marks);

  // The holds first, the blobs after: a blob put after its hold was listed is never an orphan
  // candidate without a document that `deleteUnheld` then finds.
  const reads = opts.reads ?? new CountReads();
  reads.holdsListedFrom = now();
  const held = new Set<Sha256Hex>();
  for await (const hex of holds.digests()) {
    held.add(hex);
    if (held.size % 1000 === 0) await pacer.step();
  }
  const sizes = new Map<Sha256Hex, number>();
  const orphans: Sha256Hex[] = [];
  for await (const blob of blobs.list()) {
    sizes.set(blob.digest, blob.size);
    if (sizes.size % 1000 === 0) await pacer.step();
    if (!held.has(blob.digest) && blob.modifiedMs < cutoff) orphans.push(blob.digest);
  }
  report.blobsScanned = sizes.size;

  const deletedBytes = async (hex: Sha256Hex): Promise<void> => {
    report.blobsDeleted += 1;
    report.bytesDeleted += sizes.get(hex) ?? 0;
    if (!opts.dryRun) await opts.afterDelete?.(report.blobsDeleted);
  };

  const judge = async (entry: HoldsEntry): Promise<void> => {
    const { doc, hex } = entry;
    report.holdsScanned += 1;
    if (doc.releasing !== undefined) {
      if (!holds.isStale(doc)) return;
      if (opts.dryRun) {
        report.staleFinished += 1;
        if (sizes.has(hex)) await deletedBytes(hex);
        return;
      }
      check();
      const deleted = await holds.finishStale(entry);
      if (deleted === null) return;
      report.staleFinished += 1;
      if (deleted) await deletedBytes(hex);
      return;
    }
    const release: string[] = [];
    let untimed = false;

    for (const holder of doc.holders) {
      if (!markers.some((m) => m.owns(holder))) {
        report.holdsUnowned += 1;
        continue;
      }
      if (marks.has(holder, hex)) continue;
      const at = doc.touched?.[holder];
      if (at === undefined) untimed = true;
      else if (at < cutoff) release.push(holder);
    }
    if (release.length > 0) {
      const last = release.length === doc.holders.length;
      if (opts.dryRun) {
        report.holdsReleased += release.length;
        if (last && sizes.has(hex)) await deletedBytes(hex);
        return;
      }
      check();
      const done = await holds.releaseJudged(entry, release);
      if (done.released) report.holdsReleased += release.length;
      if (done.deleted) await deletedBytes(hex);
      return;
    }
    if (untimed) {
      if (opts.dryRun) report.holdsStamped += 1;
      else if (await holds.stampUntimed(entry)) report.holdsStamped += 1;
    }
  };

  await eachAtOnce(held, opts.atOnce ?? AT_ONCE, async (hex) => {
    const entry = await holds.entry(hex);
    // Counted as read, if its bytes are there (stored after the listing: asked now); what changes
    // after (this collection's releases too) the ledger adds.
    if (entry && entry.doc.releasing === undefined && entry.doc.holders.length > 0) {
      const size = sizes.get(hex) ?? (await blobs.stat(hex))?.size;
      if (size !== undefined) counter.held(hex, entry.doc.holders, size);
    }
    reads.read(hex, now());
    if (entry) await judge(entry);
    await pacer.step();
  });

  for (const hex of orphans) {
    await pacer.step();
    if (opts.dryRun) {
      report.orphansDeleted += 1;
      await deletedBytes(hex);
      continue;
    }
    check();
    const deleted = await holds.deleteUnheld(hex);
    if (deleted) {
      report.orphansDeleted += 1;
      await deletedBytes(hex);
    }
  }

  if (!opts.dryRun) {
    check();
    report.stagingSwept = await stores.sweep();
    report.uploadsSwept = (await stores.sharedStages?.sweep())?.stages ?? 0;
  }
  report.stored = counter.result();
  report.durationMs = now() - started;
  return report;
}

/** Runs `fn` over `items`, at most `limit` at a time; the first failure stops it and is thrown. */
async function eachAtOnce<T>(items: Iterable<T>, limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const it = items[Symbol.iterator]();
  let failed = false;
  const worker = async (): Promise<void> => {
    for (let next = it.next(); !next.done && !failed; next = it.next()) {
      try {
        await fn(next.value);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
}
