/**
 * The parameters of `GET /+stats`: `index=<route>` and `project=<name>`, each at most once, the
 * project only with an index. A route is taken with or without its slashes. Anything else is a
 * 400 with the reason (never a 500).
 */
import { HttpError } from '../../http/errors.js';

export type StatsQuery = { depth: 'server' } | { depth: 'index'; route: string } | { depth: 'project'; route: string; project: string };

const MAX_PARAM = 512;

function one(query: URLSearchParams, key: string): string | undefined {
  const values = query.getAll(key);
  if (values.length > 1) throw new HttpError(400, `${key} may be given once, not ${values.length} times`);
  const value = values[0];
  if (value === undefined) return undefined;
  if (value.length > MAX_PARAM) throw new HttpError(400, `${key} is longer than ${MAX_PARAM} characters`);
  if (value.trim() === '') throw new HttpError(400, `${key} is empty`);
  return value.trim();
}

export function parseStatsQuery(query: URLSearchParams): StatsQuery {
  for (const key of query.keys()) {
    if (key !== 'index' && key !== 'project') throw new HttpError(400, `unknown parameter "${key}"; /+stats takes index=<route> and project=<name>`);
  }
  const index = one(query, 'index');
  const project = one(query, 'project');
  if (index === undefined) {
    if (project !== undefined) throw new HttpError(400, 'project needs index=<route> too: project names are per index');
    return { depth: 'server' };
  }
  const route = index.replace(/^\/+|\/+$/g, '');
  if (route === '') throw new HttpError(400, 'index must name an index route');
  return project === undefined ? { depth: 'index', route } : { depth: 'project', route, project };
}
