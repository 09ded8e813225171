/**
 * `velodex gc [--config FILE] [--dry-run]`: one collection of the configured store from the
 * command line, without a server: the same collector, lease and markers a server runs
 * (`gc.ts`). Prints the report and returns the exit code: 0 when it ran, 75 (EX_TEMPFAIL) when
 * another process holds the lease.
 *
 * `velodex gc --url URL [--token-file F] [--dry-run]` (`gcAtServer`) opens no store: it asks the
 * running server (`POST /+admin/gc`, with the admin token: admin-client.ts) and prints the same
 * lines from the JSON it answers; the same exit codes, and 1 when the server refuses or cannot
 * be reached.
 *
 * The s3 backend's compare-and-swap holds across every process, so a local run may go beside
 * live servers. The fs backend's holds only among the worker processes of one server: on fs with
 * a server running, use `--url` (a local run is for a data dir no server uses).
 *
 * `VELODEX_TEST_GC_PAUSE_AFTER=N` (a test hook, named as such): after the N-th deletion of
 * bytes the command prints `gc test pause after N deletions` and waits, so that a test can kill
 * it at that point.
 */
import { join } from 'node:path';
import type { Config } from '../../config/types.js';
import type { EcosystemModule } from '../../ecosystem/ecosystem.js';
import { CollectionBusyError } from '../../lifecycle/collector.js';
import { openStores } from '../../storage/index.js';
import type { CollectionReport } from '../../lifecycle/collect.js';
import { AdminActionError, postAdminAction } from './admin-client.js';
import { garbageCollector, holdsMarkers, reportLines, usageLedger } from './gc.js';

export const EX_TEMPFAIL = 75;

export async function gcCommand(config: Config, modules: readonly EcosystemModule[], dryRun: boolean, out: (line: string) => void): Promise<number> {
  const stores = await openStores(config.storage, { scratchDir: join(config.dataDir, 'scratch') });
  const pauseAfter = Number(process.env.VELODEX_TEST_GC_PAUSE_AFTER ?? 0);
  const afterDelete =
    pauseAfter > 0
      ? async (deleted: number) => {
          if (deleted < pauseAfter) return;
          if (deleted === pauseAfter) out(`gc test pause after ${deleted} deletions`);
          // A timer that keeps the process alive: it waits here until killed.
          await new Promise(() => setInterval(() => undefined, 60_000));
        }
      : undefined;
  // The run's exact count is recorded as a server's would be (lifecycle/usage/).
  const usage = usageLedger(stores, holdsMarkers(config, stores, modules));
  const gc = garbageCollector(config, stores, modules, { usage, ...(afterDelete ? { afterDelete } : {}) });
  try {
    const report = await gc.run({ dryRun });
    for (const line of reportLines(report)) out(line);
    return 0;
  } catch (err) {
    if (err instanceof CollectionBusyError) {
      out(busyLine(err.message));
      return EX_TEMPFAIL;
    }
    throw err;
  } finally {
    await stores.close();
  }
}

/** The collection at the running server `url`: its report printed as a local run prints it. */
export async function gcAtServer(url: string, token: string, dryRun: boolean, out: (line: string) => void): Promise<number> {
  const answer = await postAdminAction(url, 'gc', token, dryRun);
  if (answer.kind === 'busy') {
    out(busyLine(answer.message));
    return EX_TEMPFAIL;
  }
  for (const line of reportLines(collectionReportOf(answer.body))) out(line);
  return 0;
}

function busyLine(message: string): string {
  return `velodex gc: ${message}; try again once it has finished`;
}

const REPORT_NUMBERS = [
  'durationMs', 'graceSecs', 'referenced', 'holdsScanned', 'holdsReleased', 'holdsStamped', 'holdsUnowned',
  'blobsScanned', 'blobsDeleted', 'bytesDeleted', 'orphansDeleted', 'staleFinished', 'stagingSwept', 'uploadsSwept',
] as const satisfies readonly (keyof CollectionReport)[];

/** The endpoint's JSON as a report, checked field by field (a server of another version may differ). */
function collectionReportOf(body: unknown): CollectionReport {
  const r = body as Partial<Record<keyof CollectionReport, unknown>> | null;
  const missing = r === null || typeof r !== 'object' ? ['the report'] : REPORT_NUMBERS.filter((k) => typeof r[k] !== 'number');
  if (r && typeof r.dryRun !== 'boolean') missing.push('dryRun');
  if (missing.length > 0) throw new AdminActionError(`the server's gc report lacks ${missing.join(', ')}: is it a velodex of another version?`);
  return r as CollectionReport;
}
