/**
 * Builds discovery documents from the configuration and the request's origin only: no storage,
 * no upstream. Nothing here reads a `Secret`; upstream URLs go through `displayUrl`.
 */
import { acceptsScope } from '../access/tokens.js';
import { displayUrl } from '../config/sanitize.js';
import type { Config, IndexConfig } from '../config/types.js';
import { membersOf, writeTarget } from '../roles/write-target.js';
import type { Origin } from './origin.js';
import type { DiscoveryDocument, EcosystemDiscovery, IndexEntry, IndexView, Links, MirroredRegistry } from './types.js';

export function linksFor(origin: Origin | null): Links {
  return { origin, url: (path) => (origin ? `${origin.href}${path}` : path) };
}

export function indexApiPath(index: IndexConfig): string {
  return `/${index.route}/+api`;
}

/** `/+search`, or one index's `/{route}/+search` (app/search/routes.ts). */
export function searchPath(index?: IndexConfig): string {
  return index ? `/${index.route}/+search` : '/+search';
}

export class DiscoveryBuilder {
  readonly #byName: ReadonlyMap<string, IndexConfig>;

  constructor(
    /** Without `mirrors` (the UI's dashboard), the document has no `node_mirror`; `search` absent: on (its default). */
    private readonly config: Pick<Config, 'indexes' | 'metrics'> & Partial<Pick<Config, 'mirrors'>> & { search?: Pick<Config['search'], 'enabled'> },
    /** Ecosystem id to its discovery part. */
    private readonly ecosystems: ReadonlyMap<string, EcosystemDiscovery>,
  ) {
    this.#byName = new Map(config.indexes.map((ix) => [ix.name, ix]));
  }

  get #searches(): boolean {
    return this.config.search?.enabled !== false;
  }

  /** The indexes that have a document: those whose ecosystem takes part in discovery. */
  get indexes(): IndexConfig[] {
    return this.config.indexes.filter((ix) => this.ecosystems.has(ix.ecosystem));
  }

  /** `GET /+api`, or `GET /{route}/+api` when `only` is given. */
  document(origin: Origin | null, only?: IndexConfig): DiscoveryDocument {
    const links = linksFor(origin);
    const indexes = only ? [only] : this.indexes;
    const urls: Record<string, string> = {
      api: links.url('/+api'),
      status: links.url('/+status'),
      stats: links.url('/+stats'),
      // `[metrics] enabled = false` removes the route.
      ...(this.config.metrics.enabled ? { metrics: links.url('/metrics') } : {}),
      ...(this.#searches ? { search: links.url(searchPath()) } : {}),
    };
    const served = new Set<string>(this.indexes.map((ix) => ix.ecosystem));
    for (const [id, eco] of this.ecosystems) if (served.has(id)) Object.assign(urls, eco.serverUrls?.(links));
    return {
      urls,
      index_apis: Object.fromEntries(indexes.map((ix) => [ix.name, links.url(indexApiPath(ix))])),
      indexes: indexes.map((ix) => this.#entry(ix, links)),
      ...(only || !this.config.mirrors?.length ? {} : { node_mirror: { registries: this.#mirrors(links, this.config.mirrors) } }),
    };
  }

  /** Each `[[mirror]]` registry: its index, and the texts its ecosystem gives a node for it. */
  #mirrors(links: Links, mirrors: Config['mirrors']): Record<string, MirroredRegistry> {
    const registries: Record<string, MirroredRegistry> = {};
    for (const { registry, index } of mirrors) {
      const texts = links.origin && this.ecosystems.get(index.ecosystem)?.mirror?.(registry, this.#view(index), links.origin);
      registries[registry] = { index: index.name, api: links.url(indexApiPath(index)), ...(texts ? { client_configuration: texts } : {}) };
    }
    return registries;
  }

  #view(index: IndexConfig): IndexView {
    const target = writeTarget(index, this.#byName);
    return { index, members: membersOf(index, this.#byName), writable: target && acceptsScope(target, 'upload') ? target : null };
  }

  #entry(index: IndexConfig, links: Links): IndexEntry {
    const view = this.#view(index);
    const part = this.ecosystems.get(index.ecosystem)?.index(view, links);
    return {
      name: index.name,
      route: index.route,
      ecosystem: index.ecosystem,
      role: index.role,
      ...(index.private ? { private: true } : {}),
      ...(index.role === 'virtual' ? { members: [...index.members], ...(index.uploadTarget ? { upload_target: index.uploadTarget } : {}) } : {}),
      // `upstream`: the first asked (what images and projects are named by); `upstreams`: all, in order.
      ...(index.role === 'cached' ? { upstream: displayUrl(index.upstreams[0].url), upstreams: index.upstreams.map((u) => displayUrl(u.url)) } : {}),
      urls: { api: links.url(indexApiPath(index)), ...(this.#searches ? { search: links.url(searchPath(index)) } : {}), ...part?.urls },
      capabilities: { ...part?.capabilities },
      // Texts to paste need a host; without an origin they would not work, so there are none.
      ...(links.origin && part?.client_configuration ? { client_configuration: part.client_configuration } : {}),
    };
  }
}
