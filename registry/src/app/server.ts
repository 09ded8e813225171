/** Starts velodex for a loaded config: opens storage, builds the app, listens. */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import { ecosystems } from './ecosystems.js';
import { buildApp } from './app.js';
import { startupLines } from './banner.js';
import { join } from 'node:path';
import { Server as TlsServer } from 'node:tls';
import { readCertificatePair } from '../tls/pair.js';
import { leafFields, reloadCertificatePair } from '../tls/reload.js';
import { openStores } from '../storage/index.js';
import { startSweeper } from '../storage/sweeper.js';
import { scheduleRetention } from '../lifecycle/retention-schedule.js';
import { scheduleCollections, scheduleFirstCount } from '../lifecycle/schedule.js';
import { reportFields } from './lifecycle/gc.js';
import { ClusterLink, SoloLink } from '../workers/link.js';

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  /**
   * Stops serving and closes everything. `drainMs`: first let kept-alive connections end after
   * their next response, waiting at most this long (app/drain.ts); a stop on a signal does.
   */
  close(drainMs?: number): Promise<void>;
}

/**
 * `notes`: extra fields for the "velodex listening" log line. `worker`: this process is one of
 * several workers (`workers/`); it shares the store's locks and its counters through the link,
 * and leaves the "listening" line and the banner to the primary, which prints them once.
 */
export async function startServer(config: Config, notes: Record<string, string> = {}, worker?: ClusterLink): Promise<RunningServer> {
  const link = worker ?? new SoloLink();
  // Read first: a certificate that cannot be served stops the start before anything is opened.
  const certificate = config.tls ? await readCertificatePair(config.tls) : undefined;
  // The app's log exists only once the stores are open; until then a failure goes to stderr.
  let reportPeerError = (err: unknown): void => {
    process.stderr.write(`peer cache: ${err instanceof Error ? err.message : String(err)}\n`);
  };
  const stores = await openStores(config.storage, {
    scratchDir: join(config.dataDir, 'scratch'),
    peerRole: 'serve',
    onPeerError: (err) => reportPeerError(err),
    // Every worker process stages on the same disk: each takes its share of the scratch limit.
    ...(worker ? { workerLocks: worker.locks, scratchShares: config.workers.count } : {}),
  });
  const { app, ecosystems: running, events, retention, gc, gcTotals, usage, budgets, counters, search, drain } = await buildApp(config, stores, ecosystems, { link, ...(certificate ? { tls: certificate } : {}) });
  reportPeerError = (err) => app.log.warn({ err }, 'peer cache');
  usage.start();
  // In the background: serving never waits for the search index (search/keeper.ts).
  search?.start();
  const stopBudgets = budgets.start(counters, app.log);
  const stopCounts = scheduleFirstCount(gc, usage, app.log);
  const stopSweeper = startSweeper(stores, {
    onSwept: (removed) => {
      if (removed > 0) app.log.info({ event: 'staging_swept', removed }, 'removed stale staged writes left by stopped processes');
    },
    onError: (err) => app.log.warn({ err }, 'sweeping stale staged writes failed; the next sweep tries again'),
  });
  // Every process asks on its schedule; the lease lets one collect at a time (lifecycle/).
  const stopCollections = config.gc.enabled
    ? scheduleCollections(gc, config.gc.everySecs * 1000, {
        onReport: (report) => {
          gcTotals.record(report, Date.now());
          app.log.info(reportFields(report), 'garbage collection finished');
        },
        onBusy: (err) => app.log.debug({ event: 'gc_busy', reason: err.message }, 'garbage collection skipped: another process is collecting'),
        onError: (err) => app.log.warn({ err }, 'garbage collection failed; the next turn tries again'),
      })
    : () => undefined;
  await app.listen({ host: config.host, port: config.port });
  const secureServer = app.server instanceof TlsServer ? app.server : undefined;
  const stopTlsReload =
    config.tls && certificate && secureServer
      ? reloadCertificatePair(config.tls, certificate, (pair) => secureServer.setSecureContext({ cert: pair.cert, key: pair.key }), app.log)
      : () => undefined;
  await events.start();
  const everySecs = config.retention.everySecs;
  const stopRetention = everySecs !== undefined && retention.active ? scheduleRetention(retention, stores.meta, everySecs, app.log) : () => undefined;
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `${certificate ? 'https' : 'http'}://${host}:${port}`;
  const fields = {
    config: config.source,
    storage: config.storage.backend === 'fs' ? config.storage.path : `${config.storage.endpoint}/${config.storage.bucket}`,
    indexes: config.indexes.map((ix) => ({ name: ix.name, route: ix.route, ecosystem: ix.ecosystem, role: ix.role })),
    ...(certificate ? { tls: leafFields(certificate) } : {}),
    ...notes,
  };
  const banner = startupLines(config, url, running);
  if (worker) {
    worker.listening(url, banner, fields);
  } else {
    app.log.info({ url, ...fields, workers: 1 }, 'velodex listening');
    process.stderr.write(`${banner.join('\n')}\n`);
  }
  return {
    app,
    url,
    async close(drainMs = 0) {
      if (drainMs > 0) await drain.settle(drainMs);
      stopSweeper();
      stopTlsReload();
      stopRetention();
      stopCollections();
      stopCounts();
      await app.close();
      await search?.close();
      await stopBudgets();
      await usage.stop();
      await Promise.all(running.map((e) => e.close?.()));
      // After the app: requests still finishing may enqueue deliveries; those wait in the outbox.
      await events.close();
      // Last: writes above still drop the other processes' copies.
      await stores.close();
    },
  };
}
