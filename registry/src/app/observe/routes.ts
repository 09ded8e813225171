/**
 * The observation surface as one fastify plugin: `GET /+status` (status.ts) and `GET /+stats`
 * (stats.ts). Everything it reads is passed in; it names no ecosystem. `details=admin` is an
 * admin surface: with `[admin] token` set it answers only a request that carries the token
 * (access/admin-auth.ts); the plain document stays open (the operator and the dashboard read it).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AdminGate } from '../../access/admin-auth.js';
import type { ReadGate } from '../../access/read-gate.js';
import type { Config } from '../../config/types.js';
import type { Ecosystem } from '../../ecosystem/ecosystem.js';
import type { IndexSummaries } from '../../observe/summary.js';
import type { ServerCounters } from './server-counters.js';
import { buildStats } from './stats.js';
import { parseStatsQuery } from './stats-query.js';
import { buildStatus, parseStatusQuery, type StatusSources } from './status.js';
import { SummaryScans } from './summary-scans.js';

export interface ObserveOptions {
  config: Pick<Config, 'indexes' | 'storage' | 'rateLimit' | 'workers'>;
  /** The per-index summary documents `/+status` reads. */
  summaries: IndexSummaries;
  ecosystems: readonly Ecosystem[];
  /** The counters of every worker of this server (one process: its own). */
  counters: ServerCounters;
  startedAt: Date;
  admin: AdminGate;
  /** One index's stats name its projects: a private index's only to a caller who reads it. */
  readGate: ReadGate;
  /** What each index and the store hold (lifecycle/usage/). */
  usage: StatusSources['usage'];
  /** This process's scratch budget (storage/scratch-budget.ts). */
  scratch: StatusSources['scratch'];
  /** `[storage] peer_cache` of this process, or null. */
  peerCache: StatusSources['peerCache'];
}

function queryOf(request: FastifyRequest): URLSearchParams {
  const url = request.raw.url ?? '';
  const at = url.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : url.slice(at + 1));
}

export async function observeRoutes(app: FastifyInstance, opts: ObserveOptions): Promise<void> {
  const { config, summaries, counters, startedAt } = opts;
  const ecosystems = new Map(opts.ecosystems.map((e) => [e.id, e]));
  const indexes = config.indexes;
  const scans = new SummaryScans(summaries);

  app.get('/+status', async (request, reply) => {
    const query = parseStatusQuery(queryOf(request));
    if (query.details) opts.admin.require(request);
    const totals = await counters.totals();
    const doc = await buildStatus(
      {
        indexes,
        storageBackend: config.storage.backend,
        storageRedirect: config.storage.redirect !== undefined,
        ecosystems,
        summaries,
        scans,
        requests: totals.requests,
        rateLimit: { enabled: config.rateLimit.enabled, counters: totals.rateLimit },
        workers: config.workers.count,
        startedAt,
        usage: opts.usage,
        scratch: opts.scratch,
        peerCache: opts.peerCache,
      },
      query,
    );
    return reply.header('cache-control', 'no-store').type('application/json').send(doc);
  });

  app.get('/+stats', async (request, reply) => {
    const query = parseStatsQuery(queryOf(request));
    const named = query.depth === 'server' ? undefined : indexes.find((i) => i.route === query.route);
    if (named) opts.readGate.require(named, request);
    const doc = buildStats({ indexes, ecosystems, counters: (await counters.totals()).usage, startedAt, usage: opts.usage }, query);
    return reply.header('cache-control', 'no-store').type('application/json').send(doc);
  });
}
