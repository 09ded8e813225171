/**
 * The repair scans behind `/+status?details=admin` (status.ts): a hosted index whose summary no
 * scan has rebuilt yet is scanned through its ecosystem, and the result stored (observe/summary.ts).
 *
 * A scan reads every record of an index, so a burst of admin requests must not start one each:
 * - concurrent requests for one index share one scan (single-flight by index name);
 * - scans of different indexes run one after another in this process, never at once;
 * - a scan first reads the summary again: a request that read it before another scan stored it
 *   (or before another replica did) finds it rebuilt and scans nothing.
 * Another process on a shared store may still scan the same index at the same time; the second
 * write replaces the first with the same counts.
 */
import { PromiseFlights } from '../../roles/promise-flights.js';
import type { IndexSummaries, IndexSummaryDoc, ScannedSummary } from '../../observe/summary.js';

export interface EnsuredSummary {
  doc: IndexSummaryDoc;
  /** Whether a scan ran for it (this request's or one it joined). */
  scanned: boolean;
}

export class SummaryScans {
  readonly #flights = new PromiseFlights<EnsuredSummary>();
  /** The end of the last queued scan; never rejects, so one failed scan does not stop the next. */
  #tail: Promise<void> = Promise.resolve();

  constructor(private readonly summaries: IndexSummaries) {}

  /** The summary of `indexName`, rebuilt by `scan` and stored first if no scan has rebuilt it. */
  ensure(indexName: string, scan: () => Promise<ScannedSummary>): Promise<EnsuredSummary> {
    return this.#flights.run(indexName, () =>
      this.#oneAtATime(async () => {
        const current = await this.summaries.read(indexName);
        if (current?.scannedAt !== undefined) return { doc: current, scanned: false };
        return { doc: await this.summaries.repair(indexName, await scan()), scanned: true };
      }),
    );
  }

  #oneAtATime<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(fn);
    this.#tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }
}
