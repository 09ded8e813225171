/**
 * The Python ecosystem, composed: the model's stores (records, overrides), the read layer's
 * source of every Python index, the project source the handlers read through, and the route
 * table on top (`handlers/routes.ts`). Nothing under `python/` imports this file.
 */
import type { IndexConfig } from '../config/types.js';
import type { Ecosystem, ServerContext } from '../ecosystem/ecosystem.js';
import { keptReporter } from '../events/kept.js';
import { answerPythonError } from './handlers/answers.js';
import { dispatch, pythonRoutes } from './handlers/routes.js';
import { ProjectSource } from './handlers/project-source.js';
import { ProjectOverrides } from './model/overrides.js';
import { ProjectRecords } from './model/records.js';
import { buildSources } from './read/build.js';
import { writeStatusCheck } from './read/write-status.js';
import { pythonDiscovery } from './discovery.js';
import { pythonSearch } from './search.js';
import { pythonStatus } from './status.js';

export function createPythonEcosystem(ctx: ServerContext): Ecosystem {
  const records = new ProjectRecords(ctx.stores.meta);
  const overrides = new ProjectOverrides(ctx.stores.meta);
  // One project source per index (hosted records, cached upstream, virtual merge).
  // A cached index's fill (a page, a file) is told to the search index of every process, when search is on.
  const { cachedFill } = ctx;
  const cachedChange = cachedFill && ((ix: { name: string }, normalized: string) => cachedFill(ix.name, normalized));
  // A project page kept after its upstream deleted it: its mark in `/+status` and the webhook event.
  const kept = keptReporter(ctx.summaries, ctx.events, ctx.log);
  const cachedKept = (ix: IndexConfig, normalized: string, since: number | null) => kept(ix, { name: normalized, project: normalized }, since);
  const sources = buildSources(ctx, records, overrides, (ix) => ctx.counters.index(ix.route), cachedChange, cachedKept);
  const routeOf = new Map(ctx.config.indexes.map((ix) => [ix.name, ix.route]));
  const source = new ProjectSource(records, sources.lookup, undefined, (name) => ctx.counters.index(routeOf.get(name) ?? name));
  const routes = pythonRoutes(ctx, source, { overrides, cachedLayer: sources.cachedLayer, checkStatus: writeStatusCheck(sources.lookup) });
  return {
    id: 'python',
    clientUrl: (index, base) => new URL(`/${index.route}/simple/`, base).href,
    discovery: pythonDiscovery,
    ...pythonStatus(sources.lookup, records),
    search: pythonSearch(sources.lookup, records, ctx.stores.blobs),
    async close() {
      sources.close();
    },
    handleIndexRequest: (req) => dispatch(routes, req),
    answerError: answerPythonError,
  };
}
