/**
 * `GET /+stats`: the usage counters (observe/counters.ts), at three depths (stats-query.ts). The
 * request path only adds to preallocated records; everything here (totals, per-project sets,
 * sorting) happens when a reader asks. Counters are process memory and reset on restart, as the
 * spec says.
 */
import type { IndexConfig } from '../../config/types.js';
import type { Ecosystem } from '../../ecosystem/ecosystem.js';
import { HttpError } from '../../http/errors.js';
import { USAGE_COUNTERS, zeroes, type CounterValues, type UsageCounters } from '../../observe/counters.js';
import { MAX_FILES_PER_PROJECT, MAX_PROJECTS } from '../../observe/project-counters.js';
import type { StatsQuery } from './stats-query.js';
import type { UsageLedger } from '../../lifecycle/usage/ledger.js';

export interface StatsSources {
  indexes: readonly IndexConfig[];
  ecosystems: ReadonlyMap<string, Ecosystem>;
  counters: UsageCounters;
  startedAt: Date;
  /** What each index holds now (lifecycle/usage/): a figure, not a counter, so it survives restarts. */
  usage: Pick<UsageLedger, 'usage'>;
}

function sum(into: CounterValues, add: CounterValues): void {
  for (const k of USAGE_COUNTERS) into[k] += add[k];
}

function byName<T>(entries: Iterable<[string, T]>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** `stored` (bytes and objects the index holds) for an index that holds any of its own. */
function storedOf(src: StatsSources, ix: IndexConfig): { stored?: { bytes: number; objects: number } } {
  return ix.role === 'virtual' ? {} : { stored: src.usage.usage(ix.name) };
}

export function buildStats(src: StatsSources, query: StatsQuery): Record<string, unknown> {
  const since = src.startedAt.toISOString();
  if (query.depth === 'server') {
    const totals = zeroes();
    const indexes: Record<string, unknown> = {};
    for (const ix of src.indexes) {
      const values = src.counters.index(ix.route).snapshot();
      sum(totals, values);
      indexes[ix.route] = { name: ix.name, ecosystem: ix.ecosystem, role: ix.role, counters: values, ...storedOf(src, ix) };
    }
    return { since, totals, indexes };
  }

  const ix = src.indexes.find((i) => i.route === query.route);
  if (!ix) throw new HttpError(404, `no index has the route "${query.route}"; GET /+stats lists every route`);
  const counters = src.counters.index(ix.route);
  const head = { since, index: ix.route, name: ix.name, ecosystem: ix.ecosystem };

  if (query.depth === 'index') {
    const projects = byName([...counters.projects.entries()].map(([name, e]): [string, CounterValues] => [name, { ...e.values }]));
    return {
      ...head,
      totals: counters.snapshot(),
      ...storedOf(src, ix),
      projects,
      // Projects evicted to stay under the cap (observe/project-counters.ts): projects + evicted = totals.
      evicted: { ...counters.projects.evicted },
      limits: { projects: MAX_PROJECTS, files_per_project: MAX_FILES_PER_PROJECT },
    };
  }

  const key = src.ecosystems.get(ix.ecosystem)?.projectKey?.(query.project) ?? query.project;
  const entry = key === null ? undefined : counters.projects.get(key);
  if (!entry) {
    throw new HttpError(
      404,
      `no usage of project "${query.project}" on index ${ix.route} since ${since} (counters start at zero on restart, and only the ${MAX_PROJECTS} most recently used projects are kept)`,
    );
  }
  return {
    ...head,
    project: key,
    totals: { ...entry.values },
    files: byName([...entry.files.entries()].map(([f, v]) => [f, { ...v }])),
    evicted_files: { ...entry.evictedFiles },
  };
}
