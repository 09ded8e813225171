/**
 * The discovery documents of `GET /+api` and `GET /{route}/+api`, in a shape that names no
 * ecosystem: the neutral part (name, route, role, members, the `+api` URLs) is built here, and
 * each ecosystem supplies its own URLs, capabilities and client configuration texts through
 * `EcosystemDiscovery`.
 */
import type { HostedIndex, IndexConfig } from '../config/types.js';
import type { Origin } from './origin.js';

/** Where things are, for one request: absolute URLs when the request named an origin, else paths. */
export interface Links {
  origin: Origin | null;
  /** `path` (starting with `/`) as an absolute URL on the origin, or as is without one. */
  url(path: string): string;
}

/** A text a person pastes: a config file (with the path it usually lives at) or shell lines. */
export interface ClientText {
  description: string;
  /** Where the file goes; absent for shell commands. */
  path?: string;
  text: string;
}

/** What the neutral code knows about an index, handed to its ecosystem. */
export interface IndexView {
  index: IndexConfig;
  /** The members in order (the index itself unless virtual). */
  members: IndexConfig[];
  /** The hosted index that takes writes to this route with a configured upload token, or null (read-only). */
  writable: HostedIndex | null;
}

/** An ecosystem's part of one index entry. */
export interface IndexDiscovery {
  urls: Record<string, string>;
  capabilities: Record<string, boolean>;
  /** Only when `links.origin` is known; upload texts only for writable indexes. */
  client_configuration?: Record<string, ClientText>;
}

export interface EcosystemDiscovery {
  /** Server-wide URLs this ecosystem adds (e.g. a registry root), when it serves any index. */
  serverUrls?(links: Links): Record<string, string>;
  index(view: IndexView, links: Links): IndexDiscovery;
  /**
   * The texts that make a node pull `registry` (a `[[mirror]]` host) through this endpoint, served
   * by the index of `view`; only called with an origin. Absent: the ecosystem's indexes are never
   * mirrors (config refuses them).
   */
  mirror?(registry: string, view: IndexView, origin: Origin): Record<string, ClientText>;
}

/** One registry of `node_mirror`: the index that serves it, and what a node is configured with. */
export interface MirroredRegistry {
  index: string;
  /** The index's own document. */
  api: string;
  /** Only when the request named an origin. */
  client_configuration?: Record<string, ClientText>;
}

export interface IndexEntry extends IndexDiscovery {
  name: string;
  route: string;
  ecosystem: string;
  role: string;
  /** Reads need a token of the index (docs/access.md#private-indexes); absent on an open index. */
  private?: true;
  members?: string[];
  upload_target?: string;
  /** The upstream as `displayUrl` shows it: scheme and host, and a fingerprint of the rest. */
  upstream?: string;
}

export interface DiscoveryDocument {
  urls: Record<string, string>;
  /** Index name to the URL of its own document. */
  index_apis: Record<string, string>;
  indexes: IndexEntry[];
  /** `[[mirror]]` (`GET /+api` only, when configured): the registries this endpoint mirrors, by host. */
  node_mirror?: { registries: Record<string, MirroredRegistry> };
}
