/**
 * `velodex retention [--config FILE] [--dry-run]`: one retention run (or its plan) from the
 * command line, on the store the config names, without serving. The server's own parts do the
 * work (the app is built, never listens), so a run here is the run the schedule and the admin
 * endpoint do: the same lease, the same DELETE path, the same webhook events. The events wait in
 * the store's outbox: a server sends them (on a shared store within its rescan interval, on fs
 * at its next start). Log lines go to stderr; the report is the caller's to print.
 *
 * On the fs backend the store's compare-and-swap holds within one server's processes only: run
 * it while the server is stopped, or use the admin endpoint or the schedule of the running
 * server (docs/storage-lifecycle.md).
 */
import { join } from 'node:path';
import type { Config } from '../../config/types.js';
import type { RetentionReport } from '../../lifecycle/retention.js';
import { openStores } from '../../storage/index.js';
import { buildApp } from '../app.js';
import { ecosystems } from '../ecosystems.js';

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
  }
}
