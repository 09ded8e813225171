/**
 * The composition root: builds the fastify application from the config, the stores and the list
 * of ecosystems (ecosystems.ts). It makes the shared services, hands them to each ecosystem's
 * factory (`ServerContext`), and mounts every surface: logging with credentials scrubbed
 * (observe/log.ts), request ids, raw (unbuffered) request bodies (an ecosystem parses its own
 * forms), the connection guard, the limiter, `/metrics`, each ecosystem's own tree, discovery,
 * `/+status` and `/+stats`, the UI, and the index namespace last (error-handler.ts answers failures).
 */
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { loadSigningKey } from '../access/signing-key.js';
import { IdentityResolver } from '../access/identities/resolver.js';
import { TokenExchange } from '../access/publishing/exchange.js';
import { BurntTokens } from '../access/publishing/burnt-tokens.js';
import { PublishTokens } from '../access/publishing/publish-tokens.js';
import { ServiceAccountTokens } from '../access/service-accounts/verifier.js';
import { logIdentityRejected } from '../observe/security-log.js';
import { publishingRoutes } from './publishing/routes.js';
import { AdminGate } from '../access/admin-auth.js';
import { ReadGate } from '../access/read-gate.js';
import { ArchiveWalks } from '../archive/walks.js';
import type { Config, IndexConfig } from '../config/types.js';
import { originOf } from '../discovery/origin.js';
import type { Ecosystem, EcosystemModule, EcosystemTree, ServerContext } from '../ecosystem/ecosystem.js';
import { EventBus } from '../events/bus.js';
import { errorBody } from '../http/errors.js';
import { requestPath } from '../http/path.js';
import type { GarbageCollector } from '../lifecycle/collector.js';
import { CollectionTotals } from '../lifecycle/totals.js';
import { ClientAddress } from '../limits/client-address.js';
import { installRateLimit } from '../limits/rate-limit-plugin.js';
import { MetaStoreExclusive } from '../lifecycle/exclusive.js';
import { RetentionCounters, RetentionRunner } from '../lifecycle/retention.js';
import { RateLimiter, type RateLimitCounters } from '../limits/rate-limiter.js';
import { UpstreamSlotsByIndex } from '../limits/upstream-slots.js';
import { UsageCounters } from '../observe/counters.js';
import { loggerOptions, type LineSink } from '../observe/log.js';
import { Metrics } from '../observe/metrics.js';
import { countRequests } from '../observe/requests.js';
import { IndexSummaries } from '../observe/summary.js';
import type { Stores } from '../storage/index.js';
import { SoloLink, type WorkerLink } from '../workers/link.js';
import { guardConnections, serverTimeouts } from './connection-guard.js';
import { registerDiscovery } from './discovery/routes.js';
import { answerError } from './error-handler.js';
import { garbageCollector, gcRoute, holdsMarkers, usageLedger } from './lifecycle/gc.js';
import { cacheBudgets, type Budgets } from './lifecycle/budgets.js';
import type { UsageLedger } from '../lifecycle/usage/ledger.js';
import { indexNamespace } from './namespace/index-namespace.js';
import { classifyRequest } from './namespace/request-class.js';
import { metricsRoute, observeRequests } from './observe/metrics-route.js';
import { observeRoutes } from './observe/routes.js';
import { ServerCounters } from './observe/server-counters.js';
import { uiRoutes } from './ui/routes.js';
import { retentionRoute } from './lifecycle/retention-route.js';
import { SearchChanges } from '../search/changes.js';
import { SearchKeeper } from '../search/keeper.js';
import { searchRoutes } from './search/routes.js';
import { ConnectionDrain } from './drain.js';

export interface BuiltApp {
  app: FastifyInstance;
  ecosystems: Ecosystem[];
  /** Not sending until `start()`; the server starts it after listening and closes it last. */
  events: EventBus;
  /** The limiter's allowed/denied counts per class, for the metrics. */
  rateLimits: RateLimitCounters;
  /** Runs the retention rules of every index (the admin endpoint, the schedule, `velodex retention`). */
  retention: RetentionRunner;
  /** The garbage collector (`POST /+admin/gc`; the server runs it on the `[gc]` schedule) and what it reclaimed. */
  gc: GarbageCollector;
  gcTotals: CollectionTotals;
  /** What each index holds, kept by this process's writes; the server starts and stops its flushing. */
  usage: UsageLedger;
  /** Cached indexes with a budget: when their content was last downloaded, and what evicts past the budget. */
  budgets: Budgets;
  /** This process's usage counters (`/+stats`), which eviction adds to. */
  counters: UsageCounters;
  /** The derived search index (search/), built in the background from start; absent when `[search] enabled = false`. */
  search?: SearchKeeper;
  /** Ends kept-alive connections gently before the app closes (the server's stop settles it). */
  drain: ConnectionDrain;
}

export interface BuildOptions {
  /** The archive walk cap and listings cache; tests pass one with a short wait window to watch it. */
  archiveWalks?: ArchiveWalks;
  /** Where log lines go after scrubbing (stdout by default); tests read them here. */
  logSink?: LineSink;
  /** The other workers of this server, if any (`workers/`): counters are read across them. */
  link?: WorkerLink;
  /** Serve HTTPS with this certificate chain and key (`[tls]`, read and checked by `tls/pair.ts`). */
  tls?: { cert: Buffer; key: Buffer };
}

export async function buildApp(config: Config, stores: Stores, modules: readonly EcosystemModule[], options: BuildOptions = {}): Promise<BuiltApp> {
  const { http: nodeOptions, ...timeouts } = serverTimeouts(config.connections);
  const app = Fastify({
    logger: loggerOptions(config, options.logSink),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[A-Za-z0-9._-]{1,128}$/.test(given) ? given : randomUUID();
    },
    // Paths are checked segment by segment in parseSafePath; the router must not rewrite them.
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: 2048 },
    bodyLimit: 1024 * 1024,
    // While closing, a request that arrives on a kept-alive connection is served (see `drain`).
    return503OnClosing: false,
    ...timeouts,
    // Over TLS fastify makes the Node server from the `https` options alone: the head bound goes there too.
    ...(options.tls ? { https: { ...nodeOptions, cert: options.tls.cert, key: options.tls.key } } : { http: nodeOptions }),
  });
  const moduleOf = new Map(modules.map((m) => [m.id, m]));
  const trees = new Map(modules.flatMap((m) => (m.tree ? [[m.tree.segment, m.tree] as const] : [])));
  const addresses = new ClientAddress(config.trustedProxies);
  const clientAddress = (request: FastifyRequest): string => addresses.ofConnection(request.raw.socket, request.headers['x-forwarded-for']);
  // First of the hooks, so a refused connection spends no rate-limit budget.
  guardConnections(app, {
    connections: config.connections,
    addresses,
    clientAddress,
    tooManyBody: (request, message) => treeOf(request.raw, trees)?.tooManyRequests(message) ?? errorBody(429, message),
  });
  // A stop drains kept-alive connections before it closes them (drain.ts): fastify's own close
  // (preClose) begins it too, for a close that did not settle first.
  const drain = new ConnectionDrain(app.server);
  app.addHook('preClose', (done) => {
    drain.begin();
    done();
  });
  const startedAt = new Date();
  const requests = countRequests(app);

  // Bodies stay streams: handlers read `request.raw` themselves, hashing on the way, so no
  // artifact is ever buffered. The Python upload form is parsed there too
  // (python/handlers/upload/).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null));

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // At send, not at arrival: a request already in flight when the drain began ends its connection too.
    if (drain.closing) reply.header('connection', 'close');
  });

  app.setErrorHandler(answerError);

  const indexByName = new Map<string, IndexConfig>(config.indexes.map((ix) => [ix.name, ix]));
  const events = new EventBus(stores.meta, indexByName, app.log, { shared: stores.shared });
  const archiveWalks = options.archiveWalks ?? new ArchiveWalks();
  const counters = new UsageCounters();
  const upstreamSlots = new UpstreamSlotsByIndex();
  const summaries = new IndexSummaries(stores.meta);
  // Search on: every write's names go to the search's change log (search/changes.ts), for every process's index.
  const searchChanges = config.search.enabled ? new SearchChanges(stores.meta, app.log) : undefined;
  summaries.listen((indexName, names) => void searchChanges?.record(indexName, names));
  const limiter = new RateLimiter(config.rateLimit.classes);
  const link: WorkerLink = options.link ?? new SoloLink();
  const serverCounters = new ServerCounters(link, { usage: counters, requests, rateLimits: limiter });
  // Outside the store's layout on purpose: with any backend this is a local folder of this process.
  const scratchDir = join(config.dataDir, 'scratch');
  await mkdir(scratchDir, { recursive: true });
  // Forwarded headers count only from a trusted proxy: `ClientAddress` is the one place that decides.
  const origin = (request: FastifyRequest) => originOf(request.headers, request.protocol === 'https' ? 'https' : 'http', addresses.fromTrustedProxy(request.raw.socket), config.externalUrls);
  const markers = holdsMarkers(config, stores, modules);
  const usage = usageLedger(stores, markers);
  const budgets = cacheBudgets(config, stores, usage, markers);
  // Read (or created) once at start-up: a store that cannot give it stops the start.
  const signingKey = await loadSigningKey(config, stores);
  const ctx: ServerContext = {
    config, stores, scratchDir, log: app.log, indexByName, counters, events, archiveWalks, upstreamSlots, clientAddress, originOf: origin, summaries, usage, recentUse: budgets.recentUse, signingKey,
    ...(link.fetches ? { fetches: link.fetches } : {}),
    ...(searchChanges ? { cachedFill: (indexName: string, name: string) => void searchChanges.record(indexName, [name]) } : {}),
  };
  const ecosystems = modules.map((m) => m.create(ctx));
  const gc = garbageCollector(config, stores, modules, { usage });
  const gcTotals = new CollectionTotals();
  const byId = new Map(ecosystems.map((e) => [e.id, e]));
  const retentionCounters = new RetentionCounters();
  const retention = new RetentionRunner({
    sources: ecosystems.flatMap((e) => (e.retention ? [e.retention] : [])),
    exclusive: new MetaStoreExclusive(stores.meta, { onLost: (name) => app.log.warn({ lease: name }, 'lease taken over by another process while running') }),
    counters: retentionCounters,
    log: app.log,
  });
  // The index namespace: `/{route}/...` for every ecosystem that serves under its route.
  const routed = config.indexes.filter((ix) => byId.get(ix.ecosystem)?.handleIndexRequest);

  // Before any route is mounted, so the hook covers every scope (`/metrics`, `/v2/`) too.
  if (config.rateLimit.enabled) {
    const classifyIndexRequest = (index: IndexConfig, method: string, rest: readonly string[]) => moduleOf.get(index.ecosystem)?.classifyIndexRequest?.(method, rest) ?? 'read';
    installRateLimit(app, {
      limiter,
      clientAddress,
      classify: (request) => classifyRequest(request.method, request.raw, { routed, trees, classifyIndexRequest }),
    });
  }

  if (config.metrics.enabled) {
    const metrics = new Metrics({
      indexes: config.indexes,
      counters,
      upstreamSlots: (ix) => (ix.role === 'cached' ? upstreamSlots.for(ix) : undefined),
      upstreams: (ix) => (ix.role === 'cached' ? byId.get(ix.ecosystem)?.describe?.(ix).upstreams : undefined),
      servesMetadata: (ix) => moduleOf.get(ix.ecosystem)?.metadataSiblings === true,
      rateLimit: () => limiter.snapshot(),
      retention: (ix) => (ix.role === 'hosted' && ix.retention ? retentionCounters.of(ix.name) : undefined),
      collections: () => gcTotals,
      scratch: () => stores.scratch,
      stored: (ix) => (ix.role === 'virtual' ? undefined : usage.usage(ix.name)),
      storedTotal: () => usage.total(),
    }, link);
    observeRequests(app, metrics);
    await app.register(metricsRoute(metrics));
  }

  // Identity tokens (a minted upload token, a ServiceAccount token) are verified once, before
  // any handler checks credentials synchronously (access/identities/).
  const publishTokens = new PublishTokens(signingKey, new BurntTokens(stores.meta));
  const exchange = new TokenExchange(config.indexes, config.trustedPublishing, publishTokens);
  // ServiceAccount tokens last: they take any other issuer's JWT that claims a ServiceAccount.
  const identities = new IdentityResolver([...(exchange.configured ? [publishTokens] : []), ...(config.kubernetes ? [new ServiceAccountTokens(config.kubernetes)] : [])]);
  if (identities.active) {
    app.addHook('onRequest', async (request) => {
      const rejection = await identities.resolve(request.headers.authorization);
      if (rejection) logIdentityRejected(request.log, { path: (request.raw.url ?? '').split('?')[0]!, method: request.method, client: clientAddress(request), ...rejection });
    });
  }
  await app.register(publishingRoutes, { exchange, tokens: publishTokens, clientAddress });

  for (const eco of ecosystems) await eco.register?.(app);

  app.get('/healthz', async () => ({ status: 'ok' }));
  await app.register(async (scope) => registerDiscovery(scope, config, ecosystems, origin));

  const admin = new AdminGate(config.admin.token, clientAddress);
  const readGate = new ReadGate(indexByName, clientAddress);
  await app.register(observeRoutes, { config, summaries, ecosystems, counters: serverCounters, startedAt, admin, usage, readGate, scratch: stores.scratch, peerCache: stores.peers?.membership ?? null });
  await app.register(uiRoutes, { config, ecosystems, admin });
  await app.register(retentionRoute, { runner: retention, admin });
  await app.register(gcRoute, { gc, totals: gcTotals, admin });

  // The server starts it (server.ts) and it builds in the background: serving never waits for it
  // (results say `complete: false` meanwhile). Not started, it answers from an empty index.
  const search = searchChanges
    ? new SearchKeeper({
        sources: config.indexes.flatMap((index) => {
          const source = index.role === 'virtual' ? undefined : byId.get(index.ecosystem)?.search;
          return source ? [{ index, source }] : [];
        }),
        changes: searchChanges,
        refreshSecs: config.search.refreshSecs,
        log: app.log,
      })
    : undefined;
  await app.register(searchRoutes, { indexes: config.indexes, byName: indexByName, readGate, ...(search ? { keeper: search } : {}) });

  // Its catch-all `/*` loses to every static route (`/+api`, `/metrics`, `/{route}/+api`, ...).
  await app.register(indexNamespace, { routed, ecosystemOf: (index: IndexConfig) => byId.get(index.ecosystem), answerError, readGate });

  return { app, ecosystems, events, rateLimits: limiter, retention, gc, gcTotals, usage, budgets, counters, drain, ...(search ? { search } : {}) };
}

/** The ecosystem tree (`/v2/`) a request is under, if any. */
function treeOf(raw: FastifyRequest['raw'], trees: ReadonlyMap<string, EcosystemTree>): EcosystemTree | undefined {
  try {
    return trees.get(requestPath(raw).segments[0] ?? '');
  } catch {
    // An unsafe path is under no tree.
    return undefined;
  }
}
