/**
 * The per-index summary documents behind `/+status`: one small MetaStore document per index at
 * `observe/summary/<index name>`, kept current by the writes themselves, so a status request reads
 * documents instead of scanning the store, and every replica on a shared store reads the same.
 *
 * - `serial` grows by one with every write an index commits (upload, yank, delete, restore,
 *   promote, manifest push or delete). The server's `serial` is the sum over its indexes: each
 *   term only grows (compare-and-swap increments, so concurrent writers on several processes
 *   never lose one), so the sum only grows too, whichever replica answers.
 * - `projects` maps each project (or repository) to its number of files (or manifests) as the
 *   writer saw it right after its write: an absolute value, so a lost or repeated update heals
 *   with the next write of that project; 0 drops the project.
 * - `recent` is the newest uploads first, capped at `MAX_RECENT`.
 *
 * The names a write touched are told to this process's listeners (the search's change log,
 * search/changes.ts, when search is on): the search keeps its own small document, since this one
 * holds a count per project (megabytes at 100k projects) and is no reading for every refresh.
 *
 * Cost and contention: a committed write adds one read and one conditional write of its index's
 * document before its response, and all writers of an index share that document, so on a shared
 * store every conflict costs another read and write. Within a process, the writes that arrive
 * while the document is being written wait and go together in the next write (`updateDoc`'s
 * group commit, storage/update.ts), so at most one writer per process races for it, however many
 * requests are in flight: 48 concurrent uploads through 3 processes on MinIO cost 8 read-write
 * pairs, against about 200 with one compare-and-swap per upload. `updateDoc` gives up after
 * about 5 s of conflicts; the client's write does not fail then (`recordAfterCommit` logs it),
 * only the serial misses those counts.
 *
 * - `kept` maps each page or tag a cached index serves on after its upstream deleted it
 *   (`upstream_deletions = "keep"`) to when that was first seen (ms since the epoch): set and
 *   cleared by `markKept`, told by the one refresh that set or cleared the copy's own mark, so
 *   it moves no serial (the content did not change). Its size is the number of such copies, one
 *   short entry each (an upstream's deletes, not its contents).
 *
 * The writer updates the summary after its own write has committed. A process that dies in
 * between leaves the summary one write behind: the ecosystem's scan (`Ecosystem.scanIndex`)
 * rebuilds `projects` and `recent` (never `serial`, which cannot be recounted and stays as is).
 */
import type { MetaStore } from '../storage/types.js';
import { updateDoc } from '../storage/update.js';

export const MAX_RECENT = 50;

export interface RecentUpload {
  /** ISO 8601 UTC. */
  time: string;
  /** The name of the index that stores it. */
  index: string;
  project: string;
  version?: string;
  filename: string;
  /** Which credential uploaded it (`upload_token`, `token:<name>`), where the ecosystem keeps it. */
  by?: string;
}

export interface IndexSummaryDoc {
  serial: number;
  projects: Record<string, number>;
  recent: RecentUpload[];
  /** When a scan last rebuilt `projects` and `recent`. */
  scannedAt?: string;
  /** A cached index's copies kept after the upstream deleted them: name (a project, `repo:tag`) -> since (ms). */
  kept?: Record<string, number>;
}

/** What one write changed: absolute file counts of the projects it touched, and its uploads. */
export interface SummaryChange {
  projects?: Record<string, number>;
  uploads?: RecentUpload[];
  /** Projects the write changed beyond those in `projects` (a yank, an override): for the listeners. */
  changed?: string[];
}

/** Told of every change this process records, with the names it touched (after the document is written, or failed to be). */
export type SummaryListener = (indexName: string, names: readonly string[]) => Promise<void> | void;

/** The names a change touched. */
export function changedNames(change: SummaryChange): string[] {
  return [...new Set([...Object.keys(change.projects ?? {}), ...(change.changed ?? [])])];
}

/** What a scan of an index's metadata found. */
export interface ScannedSummary {
  projects: Record<string, number>;
  recent: RecentUpload[];
}

const empty = (): IndexSummaryDoc => ({ serial: 0, projects: {}, recent: [] });

function newestFirst(a: RecentUpload, b: RecentUpload): number {
  return a.time < b.time ? 1 : a.time > b.time ? -1 : 0;
}

export function capRecent(uploads: RecentUpload[]): RecentUpload[] {
  return [...uploads].sort(newestFirst).slice(0, MAX_RECENT);
}

/** One write's change, applied to the document (serial, absolute project counts, recent uploads). */
function apply(doc: IndexSummaryDoc, change: SummaryChange): void {
  doc.serial += 1;
  // The change serials the search kept here before it had its own log (search/changes.ts): dropped on the next write.
  const legacy = doc as IndexSummaryDoc & { changed?: unknown; changedFloor?: unknown };
  delete legacy.changed;
  delete legacy.changedFloor;
  for (const [project, files] of Object.entries(change.projects ?? {})) {
    if (files > 0) doc.projects[project] = files;
    else delete doc.projects[project];
  }
  if (change.uploads?.length) doc.recent = capRecent([...change.uploads, ...doc.recent]);
}

export class IndexSummaries {
  readonly #listeners: SummaryListener[] = [];

  constructor(private readonly meta: MetaStore) {}

  /** `listener` hears of every change recorded through this object (this process's writes). */
  listen(listener: SummaryListener): void {
    this.#listeners.push(listener);
  }

  static key(indexName: string): string {
    return `observe/summary/${indexName}`;
  }

  async read(indexName: string): Promise<IndexSummaryDoc | null> {
    return (await this.meta.get<IndexSummaryDoc>(IndexSummaries.key(indexName)))?.doc ?? null;
  }

  /**
   * Counts one committed write of `indexName`. Writes of one index that arrive while its document
   * is being written are applied together by the next write (`updateDoc` groups them: one
   * compare-and-swap for the batch), so a process contends for the document with the other
   * processes only, never with itself: with P processes at most P writers race for it.
   */
  async record(indexName: string, change: SummaryChange = {}): Promise<void> {
    try {
      await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => {
        const doc = current ?? empty();
        apply(doc, change);
        return doc;
      });
    } finally {
      await this.#tell(indexName, changedNames(change));
    }
  }

  /** The listeners run after the write, whatever became of it; a listener's failure is its own. */
  async #tell(indexName: string, names: string[]): Promise<void> {
    if (names.length === 0) return;
    await Promise.all(this.#listeners.map(async (l) => {
      try {
        await l(indexName, names);
      } catch {
        // A listener keeps its own failures (the search index logs them); the write stands.
      }
    }));
  }

  /**
   * `record`, for writers whose own write has already committed: a failure is logged, not thrown
   * (the client's write succeeded; the next write of the project or a scan heals the summary).
   */
  async recordAfterCommit(indexName: string, change: SummaryChange, log: { warn(obj: object, msg: string): void }): Promise<void> {
    try {
      await this.record(indexName, change);
    } catch (err) {
      log.warn({ index: indexName, err: err instanceof Error ? err.message : String(err) }, 'status summary not updated');
    }
  }

  /**
   * A cached copy of `name` is served on after its upstream's delete since `since` (ms), or, with
   * null, no longer (the upstream has it again, or it was dropped). No serial moves.
   */
  async markKept(indexName: string, name: string, since: number | null): Promise<void> {
    await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => {
      const listed = current?.kept && Object.hasOwn(current.kept, name);
      if (since === null) {
        if (!listed) return undefined;
        delete current!.kept![name];
        return current;
      }
      if (listed && current!.kept![name] === since) return undefined;
      const doc = current ?? empty();
      doc.kept ??= {};
      Object.defineProperty(doc.kept, name, { value: since, enumerable: true, writable: true, configurable: true });
      return doc;
    });
  }

  /** Replaces what a scan can recount; the serial stays. Returns the repaired document. */
  async repair(indexName: string, scanned: ScannedSummary, now = new Date()): Promise<IndexSummaryDoc> {
    const { doc } = await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => ({
      serial: current?.serial ?? 0,
      ...(current?.kept ? { kept: current.kept } : {}),
      projects: scanned.projects,
      recent: capRecent(scanned.recent),
      scannedAt: now.toISOString(),
    }));
    return doc ?? { ...empty(), ...scanned };
  }
}
