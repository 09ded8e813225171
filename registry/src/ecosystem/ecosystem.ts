/**
 * The one interface through which an ecosystem (Python, OCI, ...) plugs into the neutral server.
 * The core owns the process, storage, logging, path safety and route resolution; an ecosystem
 * owns the meaning of the paths under its indexes' routes, and may mount its own top-level tree
 * (the OCI API lives under `/v2/`).
 */
import type { UsageLedger } from '../lifecycle/usage/ledger.js';
import type { RecentUse } from '../lifecycle/budget/recent-use.js';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ArchiveWalks } from '../archive/walks.js';
import type { EcosystemFacts } from '../config/ecosystem-facts.js';
import type { Config, IndexConfig, RateClassName } from '../config/types.js';
import type { Origin } from '../discovery/origin.js';
import type { EcosystemDiscovery } from '../discovery/types.js';
import type { EventSink } from '../events/types.js';
import type { RetentionSource } from '../lifecycle/retention.js';
import type { UpstreamSlotsByIndex } from '../limits/upstream-slots.js';
import type { UsageCounters } from '../observe/counters.js';
import type { HoldsMarker, MarkServices } from '../lifecycle/marks.js';
import type { IndexDescription } from '../observe/describe.js';
import type { IndexSummaries, ScannedSummary } from '../observe/summary.js';
import type { SharedFetches } from '../roles/flight-peers.js';
import type { SearchSource } from '../search/source.js';
import type { Stores } from '../storage/index.js';
import type { ErrorHandler } from './error-handler.js';

/**
 * The shared services of one server, as the composition root (app/app.ts) hands them to each
 * ecosystem's factory. It stays one object at the seam on purpose: an ecosystem is a composition
 * root of its own (python/index.ts, oci/index.ts), and a service added for one ecosystem must not
 * change every factory's signature. Past the factory it is not passed around whole: each part of
 * an ecosystem takes the services it uses (`Pick<ServerContext, 'stores' | 'log'>`, or the
 * services themselves), so its constructor says what it depends on. The neutral core and app/
 * never take it.
 */
export interface ServerContext {
  config: Config;
  stores: Stores;
  /**
   * This process's local scratch folder, in the data dir and never in the store: for validation
   * that needs random access to bytes that are not being stored (a nested archive's copy). Bytes
   * on their way into the store are staged by the store (`BlobStore.stage`), not here.
   */
  scratchDir: string;
  log: FastifyBaseLogger;
  indexByName: ReadonlyMap<string, IndexConfig>;
  /** The usage counters of `/+stats`, per index route; shared by every ecosystem. */
  counters: UsageCounters;
  /** Webhook events: ecosystems emit after a write commits and before answering it. */
  events: EventSink;
  /** The cap on concurrent archive walks and the listings cache, shared by every route that browses archives. */
  archiveWalks: ArchiveWalks;
  /** Every cached index's upstream fetch cap (`upstream_concurrency`). */
  upstreamSlots: UpstreamSlotsByIndex;
  /** The client's address (trusted proxies resolved), for the security log. */
  clientAddress: (request: FastifyRequest) => string;
  /**
   * The origin the client reached the server at, for absolute URLs: `Host`, or a trusted proxy's
   * `X-Forwarded-Host`/`-Proto` (`discovery/origin.ts`). Null when the request names no valid host.
   */
  originOf: OriginOf;
  /** The per-index summaries of `/+status` (serial, project counts, recent uploads): writers record their commits. */
  summaries: IndexSummaries;
  /**
   * A cached index's fill changed what it holds of `name` (a page, file or manifest stored, a tag
   * moved): appended to the search's change log (search/changes.ts) for the search index of every
   * process, after the fill and never waited for. Absent when search is off: a fill then writes no
   * more than it did before search (with it on, one small document's read and write per fill, or
   * fewer: appends that wait while one is written go together).
   */
  cachedFill?: (indexName: string, name: string) => void;
  /** With several worker processes: how they share upstream fetches. Absent in a process that serves alone. */
  fetches?: SharedFetches;
  /** What each index holds (lifecycle/usage/): quotas read it. */
  usage: Pick<UsageLedger, 'usage'>;
  /** When a cached index's content was last downloaded (lifecycle/budget/): a download of a file or blob tells it. */
  recentUse: Pick<RecentUse, 'downloaded'>;
  /** The key every replica signs its own tokens with (access/signing-key.ts), read or created once at start-up. */
  signingKey: Uint8Array;
}

export type OriginOf = (request: FastifyRequest) => Origin | null;

export interface IndexRequest {
  index: IndexConfig;
  /** Decoded, safe path segments after the route. */
  rest: string[];
  trailingSlash: boolean;
  query: URLSearchParams;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface Ecosystem {
  /** Matches `IndexConfig.ecosystem`. */
  readonly id: string;
  /** Where a person points a client at `index` on the server at `base` (start-up lines, discovery). */
  clientUrl?(index: IndexConfig, base: URL): string;
  /** Answers a request under `/{route}/` of one of this ecosystem's indexes. */
  handleIndexRequest?(req: IndexRequest): Promise<void>;
  /**
   * Answers the failures of `handleIndexRequest`: the handler factory (error-handler.ts) with the
   * ecosystem's table of the neutral kinds. Absent: the server's own handler answers them.
   */
  answerError?: ErrorHandler;
  /** What `/+api` and `/{route}/+api` say about this ecosystem's indexes (URLs, capabilities, client texts). */
  discovery?: EcosystemDiscovery;
  /** Registers routes outside the index namespace. */
  register?(app: FastifyInstance): void | Promise<void>;
  /** What `/+status` shows of one of this ecosystem's indexes beyond the neutral fields. */
  describe?(index: IndexConfig): IndexDescription;
  /** Recounts projects and recent uploads from the index's metadata (the repair path of `/+status?details=admin`). */
  scanIndex?(index: IndexConfig): Promise<ScannedSummary>;
  /** The name `/+stats` counts a project under (e.g. PEP 503 normalised), or null for a name no project can have. */
  projectKey?(name: string): string | null;
  /** What the search index (search/) holds of this ecosystem's hosted and cached indexes. */
  search?: SearchSource;
  /** Applies (or plans) the retention rules of this ecosystem's indexes (lifecycle/retention.ts runs it). */
  retention?: RetentionSource;
  /** Stops background work on shutdown. */
  close?(): Promise<void>;
}

export type EcosystemFactory = (ctx: ServerContext) => Ecosystem;

/** An ecosystem as the composition root registers it: its static facts and how to start it. */
export interface EcosystemModule extends EcosystemFacts {
  create: EcosystemFactory;
  /** Serves core-metadata siblings (the `metadata` usage counter and its metric). */
  metadataSiblings?: boolean;
  /**
   * The limiter's class of a request under one of this ecosystem's index routes, from its method
   * and the path segments after the route alone (nothing read, nothing resolved).
   */
  classifyIndexRequest?(method: string, rest: readonly string[]): RateClassName;
  /** A top-level tree the ecosystem mounts itself (OCI: `/v2/`). */
  tree?: EcosystemTree;
  /**
   * The garbage collector's mark (lifecycle/marks.ts): which holder names are this ecosystem's
   * and which digests its documents reference. On the module, not the running `Ecosystem`, so
   * `velodex gc` marks without starting a server. An ecosystem that holds blobs and has none
   * keeps them all: a holder no marker owns is never released.
   */
  holdsMarker?(services: MarkServices): HoldsMarker;
}

export interface EcosystemTree {
  /** Its first path segment (`v2`). */
  segment: string;
  /** The limiter's class of a request in the tree, from its method and the segments after `segment`. */
  classify(method: string, rest: readonly string[]): RateClassName;
  /** A 429 body in the tree's own error shape. */
  tooManyRequests(message: string): string;
}
