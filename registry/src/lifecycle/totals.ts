/** What this process's collections reclaimed so far: the `velodex_gc_*` metrics read it at scrape time. */
import type { CollectionReport } from './collect.js';

export class CollectionTotals {
  runs = 0;
  holdsReleased = 0;
  blobsDeleted = 0;
  bytesDeleted = 0;
  /** When the last real run of this process ended, epoch ms; 0 before any. */
  lastRunMs = 0;

  /** Counts a finished run; dry runs reclaim nothing and are not counted. */
  record(report: CollectionReport, endedMs: number): void {
    if (report.dryRun) return;
    this.runs += 1;
    this.holdsReleased += report.holdsReleased;
    this.blobsDeleted += report.blobsDeleted;
    this.bytesDeleted += report.bytesDeleted;
    this.lastRunMs = endedMs;
  }
}
