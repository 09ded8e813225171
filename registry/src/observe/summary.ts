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
}

export interface IndexSummaryDoc {
  serial: number;
  projects: Record<string, number>;
  recent: RecentUpload[];
  /** When a scan last rebuilt `projects` and `recent`. */
  scannedAt?: string;
}

/** What one write changed: absolute file counts of the projects it touched, and its uploads. */
export interface SummaryChange {
  projects?: Record<string, number>;
  uploads?: RecentUpload[];
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

export class IndexSummaries {
  constructor(private readonly meta: MetaStore) {}

  static key(indexName: string): string {
    return `observe/summary/${indexName}`;
  }

  async read(indexName: string): Promise<IndexSummaryDoc | null> {
    return (await this.meta.get<IndexSummaryDoc>(IndexSummaries.key(indexName)))?.doc ?? null;
  }

  /** Counts one committed write of `indexName`. */
  async record(indexName: string, change: SummaryChange = {}): Promise<void> {
    await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => {
      const doc = current ?? empty();
      doc.serial += 1;
      for (const [project, files] of Object.entries(change.projects ?? {})) {
        if (files > 0) doc.projects[project] = files;
        else delete doc.projects[project];
      }
      if (change.uploads?.length) doc.recent = capRecent([...change.uploads, ...doc.recent]);
      return doc;
    });
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

  /** Replaces what a scan can recount; the serial stays. Returns the repaired document. */
  async repair(indexName: string, scanned: ScannedSummary, now = new Date()): Promise<IndexSummaryDoc> {
    const { doc } = await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => ({
      serial: current?.serial ?? 0,
      projects: scanned.projects,
      recent: capRecent(scanned.recent),
      scannedAt: now.toISOString(),
    }));
    return doc ?? { ...empty(), ...scanned };
  }
}
