/**
 * `velodex gc [--config FILE] [--dry-run]`: one collection of the configured store from the
 * command line, without a server: the same collector, lease and markers a server runs
 * (`gc.ts`). Prints the report and returns the exit code: 0 when it ran, 75 (EX_TEMPFAIL) when
 * another process holds the lease.
 *
 * The s3 backend's compare-and-swap holds across every process, so this may run beside live
 * servers. The fs backend's holds only among the worker processes of one server: there, run it
 * while no server uses the data dir, or ask the running server (`POST /+admin/gc`).
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
      out(`velodex gc: ${err.message}; try again once it has finished`);
      return EX_TEMPFAIL;
    }
    throw err;
  }
}
