/**
 * Builds the project source of every Python index once, at start-up: hosted indexes read their
 * records, cached ones their upstream, virtual ones their members (looked up by name on use).
 * Also provides the mutations' view of cached files (`CachedLayer`).
 */
import type { IndexConfig } from '../../config/types.js';
import type { ServerContext } from '../../ecosystem/ecosystem.js';
import type { CounterSink } from '../../observe/counters.js';
import { CachedSource } from './cached/source.js';
import type { ProjectOverrides } from '../model/overrides.js';
import { pythonHolder, type ProjectRecords } from '../model/records.js';
import { VirtualSource, type Member } from './virtual/source.js';
import { HostedSource } from './hosted/source.js';
import type { CachedLayer, IndexSource, SourceLookup } from './source/types.js';

export interface Sources {
  lookup: SourceLookup;
  cachedLayer: CachedLayer;
  close(): void;
}

/** What the sources use of the server's services. */
export type SourceServices = Pick<ServerContext, 'indexByName' | 'stores' | 'upstreamSlots' | 'scratchDir' | 'log' | 'fetches'>;

export function buildSources(
  ctx: SourceServices,
  records: ProjectRecords,
  overrides: ProjectOverrides,
  countersFor: (index: IndexConfig) => CounterSink,
  /** Told when what a cached index holds of a project changed (a page, a file stored). */
  onCachedChange?: (index: IndexConfig, normalized: string) => void,
  /** Told when a cached index keeps a project's page its upstream deleted (since when), or no longer (null). */
  onCachedKept?: (index: IndexConfig, normalized: string, since: number | null) => void,
): Sources {
  const byName = new Map<string, IndexSource>();
  const cached: CachedSource[] = [];
  // In config order (the map is built from it).
  const python = [...ctx.indexByName.values()].filter((ix) => ix.ecosystem === 'python');
  for (const index of python) {
    if (index.role === 'hosted') {
      byName.set(index.name, new HostedSource(index.name, records, ctx.stores.blobs));
    } else if (index.role === 'cached') {
      const source = new CachedSource({
        index,
        slots: ctx.upstreamSlots.for(index),
        meta: ctx.stores.meta,
        blobs: ctx.stores.blobs,
        holder: ctx.stores.holds.as(pythonHolder(index.name)),
        scratchDir: ctx.scratchDir,
        counters: countersFor(index),
        overrides,
        ...(ctx.fetches ? { fetches: ctx.fetches } : {}),
        ...(onCachedChange ? { onProjectChanged: (normalized: string) => onCachedChange(index, normalized) } : {}),
        ...(onCachedKept ? { onProjectKept: (normalized: string, since: number | null) => onCachedKept(index, normalized, since) } : {}),
        onFlight: (o) => {
          if (o.kind === 'rejected') ctx.log.warn({ event: 'rejected', index: index.route, key: o.key, reason: o.error.message }, 'upstream bytes failed digest verification; not cached');
          else if (o.kind === 'upstream_error' || o.kind === 'store_error') ctx.log.warn({ event: o.kind, index: index.route, key: o.key, reason: o.error.message }, 'upstream file fetch failed');
        },
      });
      cached.push(source);
      byName.set(index.name, source);
    } else {
      const members = (): Member[] =>
        index.members.flatMap((name) => {
          const member = ctx.indexByName.get(name);
          const source = byName.get(name);
          return member && source && member.ecosystem === 'python' ? [{ index: member, source }] : [];
        });
      byName.set(index.name, new VirtualSource(index, members, overrides));
    }
  }
  return {
    lookup: (name) => byName.get(name),
    cachedLayer: {
      async files(index, normalized) {
        const source = byName.get(index.name);
        if (source instanceof CachedSource || source instanceof VirtualSource) return (await source.upstreamProject(normalized))?.files ?? null;
        return null;
      },
    },
    close: () => cached.forEach((c) => c.close()),
  };
}
