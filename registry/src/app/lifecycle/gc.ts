/**
 * The garbage collector as the server and `velodex gc` build it (the markers of every ecosystem,
 * the `[gc]` settings), the admin action that runs it on demand, and the report as a person reads
 * it. The collection itself is lifecycle/'s.
 *
 *   POST /+admin/gc[?dry_run=1]   the report as JSON; 409 while another collection holds the
 *                                 lease; needs the admin token (`AdminGate.requireForAction`)
 */
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { AdminGate } from '../../access/admin-auth.js';
import type { Config } from '../../config/types.js';
import type { EcosystemModule } from '../../ecosystem/ecosystem.js';
import { HttpError } from '../../http/errors.js';
import type { CollectionReport } from '../../lifecycle/collect.js';
import { CollectionBusyError, GarbageCollector } from '../../lifecycle/collector.js';
import type { CollectionTotals } from '../../lifecycle/totals.js';
import { indexOfHolder, type HoldsMarker } from '../../lifecycle/marks.js';
import { UsageLedger } from '../../lifecycle/usage/ledger.js';
import type { Stores } from '../../storage/index.js';
import { dryRunOf } from './admin-action.js';

export interface CollectorBuild {
  /** Awaited after each deletion of bytes (`velodex gc`'s test hook), which judges one document at a time. */
  afterDelete?: (deleted: number) => Promise<void>;
  /** Where a real run records its exact count. */
  usage?: UsageLedger;
}

/** Every ecosystem's marker: what its documents reference, and which index a holder is of. */
export function holdsMarkers(config: Pick<Config, 'indexes'>, stores: Stores, modules: readonly EcosystemModule[]): HoldsMarker[] {
  const services = { meta: stores.meta, blobs: stores.blobs, indexes: config.indexes };
  return modules.flatMap((m) => (m.holdsMarker ? [m.holdsMarker(services)] : []));
}

/** The ledger of what each index holds, told of every change of holds this process makes. */
export function usageLedger(stores: Stores, markers: readonly HoldsMarker[]): UsageLedger {
  const usage = new UsageLedger({ meta: stores.meta, blobs: stores.blobs, indexOf: indexOfHolder(markers) });
  stores.holds.observe(usage);
  return usage;
}

export function garbageCollector(config: Pick<Config, 'gc' | 'indexes'>, stores: Stores, modules: readonly EcosystemModule[], build: CollectorBuild = {}): GarbageCollector {
  return new GarbageCollector({
    stores,
    markers: holdsMarkers(config, stores, modules),
    ...(build.usage ? { usage: build.usage } : {}),
    graceMs: config.gc.graceSecs * 1000,
    leaseMs: config.gc.leaseSecs * 1000,
    cpuShare: config.gc.cpuShare,
    owner: `${hostname()}/${process.pid}`,
    ...(build.afterDelete ? { afterDelete: build.afterDelete, atOnce: 1 } : {}),
  });
}

/** The lines `velodex gc` prints. */
export function reportLines(r: CollectionReport): string[] {
  const would = r.dryRun ? 'would be ' : '';
  return [
    `${r.dryRun ? 'dry run: nothing changed' : 'collection finished'} in ${r.durationMs} ms (grace ${r.graceSecs}s)`,
    `referenced digests: ${r.referenced}; holds read: ${r.holdsScanned}; blobs listed: ${r.blobsScanned}`,
    `holds ${would}released: ${r.holdsReleased}`,
    `blobs ${would}deleted: ${r.blobsDeleted} (${r.bytesDeleted} bytes); of them unheld: ${r.orphansDeleted}, left by a killed run: ${r.staleFinished}`,
    `holds of an earlier version ${would}timed: ${r.holdsStamped}; holds of indexes not in this config kept: ${r.holdsUnowned}`,
    ...(r.dryRun ? [] : [`stale staged writes removed: ${r.stagingSwept}; idle upload sessions removed: ${r.uploadsSwept}`]),
  ];
}

/** The fields of the log line of a run. */
export function reportFields(r: CollectionReport): Record<string, unknown> {
  return { event: 'gc', ...r };
}

export interface GcRouteOptions {
  gc: GarbageCollector;
  totals: CollectionTotals;
  admin: AdminGate;
}

export async function gcRoute(app: FastifyInstance, opts: GcRouteOptions): Promise<void> {
  app.post('/+admin/gc', async (request, reply) => {
    opts.admin.requireForAction(request);
    const dryRun = dryRunOf(request);
    let report: CollectionReport;
    try {
      report = await opts.gc.run({ dryRun });
    } catch (err) {
      if (err instanceof CollectionBusyError) {
        throw new HttpError(409, err.message, { 'cache-control': 'no-store' });
      }
      throw err;
    }
    opts.totals.record(report, Date.now());
    request.log.info(reportFields(report), dryRun ? 'garbage collection dry run (admin)' : 'garbage collection finished (admin)');
    return reply.header('cache-control', 'no-store').type('application/json').send(report);
  });
}
