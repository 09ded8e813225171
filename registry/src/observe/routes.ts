/**
 * The observation surface as one fastify plugin: `GET /+status` (status.ts) and `GET /+stats`
 * (stats.ts). Everything it reads is passed in; it names no ecosystem.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ServerContext, Ecosystem } from '../http/ecosystem.js';
import type { ServerCounters } from './server-counters.js';
import { buildStats } from './stats.js';
import { parseStatsQuery } from './stats-query.js';
import { buildStatus, parseStatusQuery } from './status.js';

export interface ObserveOptions {
  ctx: ServerContext;
  ecosystems: readonly Ecosystem[];
  /** The counters of every worker of this server (one process: its own). */
  counters: ServerCounters;
  startedAt: Date;
}

function queryOf(request: FastifyRequest): URLSearchParams {
  const url = request.raw.url ?? '';
  const at = url.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : url.slice(at + 1));
}

export async function observeRoutes(app: FastifyInstance, opts: ObserveOptions): Promise<void> {
  const { ctx, counters, startedAt } = opts;
  const ecosystems = new Map(opts.ecosystems.map((e) => [e.id, e]));
  const indexes = ctx.config.indexes;

  app.get('/+status', async (request, reply) => {
    const query = parseStatusQuery(queryOf(request));
    const totals = await counters.totals();
    const doc = await buildStatus(
      {
        indexes,
        storageBackend: ctx.config.storage.backend,
        storageRedirect: ctx.config.storage.redirect !== undefined,
        ecosystems,
        summaries: ctx.summaries,
        requests: totals.requests,
        rateLimit: { enabled: ctx.config.rateLimit.enabled, counters: totals.rateLimit },
        workers: ctx.config.workers.count,
        startedAt,
      },
      query,
    );
    return reply.header('cache-control', 'no-store').type('application/json').send(doc);
  });

  app.get('/+stats', async (request, reply) => {
    const query = parseStatsQuery(queryOf(request));
    const doc = buildStats({ indexes, ecosystems, counters: (await counters.totals()).usage, startedAt }, query);
    return reply.header('cache-control', 'no-store').type('application/json').send(doc);
  });
}
