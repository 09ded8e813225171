/**
 * `GET /+search` (every index) and `GET /{route}/+search` (one index; a virtual index searches its
 * members): the JSON answer of docs/search.md. Policy and access are decided here, at query time,
 * every time: an entry shows only when its index's policy serves the name (and, through a virtual
 * route, the virtual's policy too) and the caller may read the index that holds it (the same read
 * decision as the Simple pages and `_catalog`). A private index searched by its own route without
 * the credential answers 401 like its pages; in `/+search` it is silently left out.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ReadGate } from '../../access/read-gate.js';
import type { IndexConfig } from '../../config/types.js';
import { searchPath } from '../../discovery/document.js';
import { HttpError } from '../../http/errors.js';
import { membersOf } from '../../roles/write-target.js';
import type { SearchEntry } from '../../search/entry.js';
import type { SearchKeeper } from '../../search/keeper.js';
import { parseSearchQuery, SearchQueryError, type SearchQuery } from '../../search/query.js';
import type { Hit } from '../../search/search-index.js';

export interface SearchRouteOptions {
  indexes: readonly IndexConfig[];
  byName: ReadonlyMap<string, IndexConfig>;
  /** Absent when `[search] enabled = false`: the routes answer 404 saying so. */
  keeper?: SearchKeeper;
  readGate: ReadGate;
}

export async function searchRoutes(app: FastifyInstance, opts: SearchRouteOptions): Promise<void> {
  const { keeper, byName, readGate } = opts;
  const ecosystems = new Set(opts.indexes.map((ix) => ix.ecosystem));

  const parse = (request: FastifyRequest): SearchQuery => {
    if (!keeper) throw new HttpError(404, 'search is turned off on this server ([search] enabled = false in its config)');
    const raw = request.raw.url ?? '';
    const at = raw.indexOf('?');
    try {
      const query = parseSearchQuery(new URLSearchParams(at < 0 ? '' : raw.slice(at + 1)));
      if (query.ecosystem !== undefined && !ecosystems.has(query.ecosystem)) {
        throw new SearchQueryError('ecosystem', `ecosystem must be one of ${[...ecosystems].sort().join(', ')}; this server has no index of ${JSON.stringify(query.ecosystem.slice(0, 40))}`);
      }
      return query;
    } catch (err) {
      if (err instanceof SearchQueryError) throw new HttpError(400, err.message, {}, { error: err.message, parameter: err.parameter });
      throw err;
    }
  };

  const answer = (request: FastifyRequest, reply: FastifyReply, query: SearchQuery, scope: IndexConfig | null, holders: IndexConfig[]) => {
    const k = keeper!;
    const order = new Map(holders.map((ix, i) => [ix.name, i]));
    const readable = new Set(holders.filter((ix) => readGate.reads(ix, request)).map((ix) => ix.name));
    const keep = (entry: SearchEntry): boolean => {
      const holder = byName.get(entry.index);
      if (!holder || !readable.has(entry.index)) return false;
      if (query.ecosystem !== undefined && entry.ecosystem !== query.ecosystem) return false;
      const source = k.sourceOf(entry.index);
      if (!source?.serves(holder, entry.key)) return false;
      if (scope && scope.role === 'virtual') {
        if (!source.serves(scope, entry.key)) return false;
        // A virtual index serves a name from its first member that has it: the others' are shadowed.
        const at = order.get(entry.index)!;
        for (const earlier of holders.slice(0, at)) if (readable.has(earlier.name) && k.index.get(earlier.name, entry.key)) return false;
      }
      return true;
    };
    const result = k.search(query, keep);
    const lastPage = Math.max(1, Math.ceil(result.total / query.perPage));
    reply.header('cache-control', 'no-store');
    return reply.type('application/json').send({
      query: query.text,
      ...(scope ? { index: scope.name, route: scope.route } : {}),
      complete: k.complete,
      total: result.total,
      truncated: result.truncated,
      page: query.page,
      per_page: query.perPage,
      pages: lastPage,
      results: result.hits.map((hit) => resultOf(hit, scope, k)),
    });
  };

  const resultOf = (hit: Hit, scope: IndexConfig | null, k: SearchKeeper) => {
    const e = hit.entry;
    const holder = byName.get(e.index)!;
    const shown = scope ?? holder;
    const browse = new URLSearchParams(k.sourceOf(e.index)!.browse(holder, e));
    return {
      ecosystem: e.ecosystem,
      index: shown.name,
      route: shown.route,
      ...(shown !== holder ? { from: holder.name } : {}),
      name: e.name,
      ...(e.version !== undefined ? { version: e.version } : {}),
      ...(e.yanked ? { yanked: true } : {}),
      ...(e.tags ? { tags: e.tags } : {}),
      ...(e.title !== undefined ? { title: e.title } : {}),
      ...(e.summary !== undefined ? { summary: e.summary } : {}),
      ...(e.source !== undefined ? { source: e.source } : {}),
      ...(e.keywords ? { keywords: e.keywords } : {}),
      ...(e.requiresPython !== undefined ? { requires_python: e.requiresPython } : {}),
      match: hit.kind,
      score: Math.round(hit.score * 1000) / 1000,
      browse: `/browse?${browse.toString()}`,
    };
  };

  app.get('/+search', (request, reply) => {
    const query = parse(request);
    let holders: IndexConfig[] = opts.indexes.filter((ix) => ix.role !== 'virtual');
    if (query.index !== undefined) {
      const only = byName.get(query.index) ?? opts.indexes.find((ix) => ix.route === query.index);
      if (!only) throw new HttpError(400, `index ${JSON.stringify(query.index.slice(0, 60))} is not served here; /+api lists the indexes`, {}, { error: 'unknown index', parameter: 'index' });
      holders = membersOf(only, byName);
    }
    return answer(request, reply, query, null, holders);
  });
  for (const index of opts.indexes) {
    app.get(searchPath(index), (request, reply) => {
      readGate.require(index, request);
      const query = parse(request);
      return answer(request, reply, query, index, membersOf(index, byName));
    });
  }
}
