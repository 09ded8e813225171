/**
 * `velodex retention [--config FILE] [--dry-run]`: one retention run (or its plan) from the
 * command line, on the store the config names, without serving. The server's own parts do the
 * work (the app is built, never listens), so a run here is the run the schedule and the admin
 * endpoint do: the same lease, the same DELETE path, the same webhook events. The events wait in
 * the store's outbox: a server sends them (on a shared store within its rescan interval, on fs
 * at its next start). Log lines go to stderr; the report is the caller's to print.
 *
 * `velodex retention --url URL [--token-file F] [--dry-run]` (`retentionAtServer`) opens no
 * store: the running server does the run (`POST /+admin/retention`, admin-client.ts) and its
 * JSON report is printed as a local run's.
 *
 * On the fs backend the store's compare-and-swap holds within one server's processes only: with
 * a server running use `--url` (or its schedule); a local run is for a data dir no server uses
 * (docs/storage-lifecycle.md).
 */
import { join } from 'node:path';
import type { Config } from '../../config/types.js';
import type { RetentionReport } from '../../lifecycle/retention.js';
import { openStores } from '../../storage/index.js';
import { buildApp } from '../app.js';
import { ecosystems } from '../ecosystems.js';
import { AdminActionError, postAdminAction } from './admin-client.js';

export async function retentionCommand(config: Config, dryRun: boolean): Promise<RetentionReport | 'busy'> {
  const stores = await openStores(config.storage, { scratchDir: join(config.dataDir, 'scratch') });
  const { app, ecosystems: running, events, retention } = await buildApp(config, stores, ecosystems, { logSink: process.stderr });
  try {
    await app.ready();
    return await retention.run({ dryRun, trigger: 'command' });
  } finally {
    await app.close();
    await Promise.all(running.map((e) => e.close?.()));
    await events.close();
    await stores.close();
  }
}

/** The retention run (or plan) of the running server `url`, or 'busy' while another run holds the lease. */
export async function retentionAtServer(url: string, token: string, dryRun: boolean): Promise<RetentionReport | 'busy'> {
  const answer = await postAdminAction(url, 'retention', token, dryRun);
  if (answer.kind === 'busy') return 'busy';
  const r = answer.body as Partial<RetentionReport> | null;
  if (!r || typeof r.dryRun !== 'boolean' || !Array.isArray(r.indexes)) {
    throw new AdminActionError("the server's retention report lacks dryRun or indexes: is it a velodex of another version?");
  }
  return r as RetentionReport;
}
