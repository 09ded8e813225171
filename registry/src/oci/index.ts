/**
 * The OCI ecosystem, composed: the distribution-spec `/v2/` API for the OCI indexes. The read
 * layer's state (the holds, the members of every index with their hosted and cached repositories,
 * the upload sessions, the bytes and sizes kept in memory), the handlers' services on top
 * (`handlers/deps.ts`), the route tree they answer (`handlers/routes.ts`), and the hooks of the
 * other surfaces (discovery, status). The one place that takes `ServerContext` whole; nothing
 * under `oci/` imports this file.
 */
import type { Ecosystem, ServerContext } from '../ecosystem/ecosystem.js';
import { BlobBytes } from './read/blob-bytes.js';
import { blobSizes } from './read/blob-sizes.js';
import { IndexHolds } from './read/index-holds.js';
import { MemoryUploadSessions } from './read/uploads/memory-sessions.js';
import { SharedUploadSessions } from './read/uploads/shared-sessions.js';
import type { UploadSessions } from './read/uploads/upload-sessions.js';
import { Members } from './read/virtual/members.js';
import type { OciDeps } from './handlers/deps.js';
import { registerOciRoutes } from './handlers/routes.js';
import { TokenSigner } from './handlers/token/tokens.js';
import { ociDiscovery } from './discovery.js';
import { ociFacts } from './facts.js';
import { ociSearch } from './search.js';
import { ociStatus } from './status.js';
import { keptReporter } from '../events/kept.js';
import { OciRetention } from './lifecycle/retention.js';

export function createOciEcosystem(ctx: ServerContext): Ecosystem {
  const { stores } = ctx;
  // Sessions live where the blobs do: in the shared store when other processes share it.
  const shared = stores.sharedStages;
  const sessions: UploadSessions = shared ? new SharedUploadSessions(shared) : new MemoryUploadSessions(stores.blobs);
  const holds = new IndexHolds(stores.holds, ctx.indexByName);
  // A tag kept after its upstream deleted it: its mark in `/+status` and the webhook event.
  const kept = keptReporter(ctx.summaries, ctx.events, ctx.log);
  const { cachedFill } = ctx;
  const members = new Members({
    meta: stores.meta,
    blobs: stores.blobs,
    holds,
    indexByName: ctx.indexByName,
    counters: ctx.counters,
    upstreamSlots: ctx.upstreamSlots,
    ...(ctx.fetches ? { fetches: ctx.fetches } : {}),
    // A pull through a cached index is told to every process's search index, when search is on.
    ...(cachedFill ? { onCachedChange: (ix, repo) => cachedFill(ix.name, repo) } : {}),
    onCachedKept: (ix, repo, tag, hex, since) =>
      kept(ix, { name: `${repo}:${tag}`, project: repo, version: tag, file: { filename: `sha256:${hex}`, sha256: hex } }, since),
  });
  const deps: Omit<OciDeps, 'tokens'> = {
    ociIndexes: ctx.config.indexes.filter((ix) => ix.ecosystem === 'oci'),
    indexByName: ctx.indexByName,
    mirrors: { byRegistry: new Map(ctx.config.mirrors.filter((m) => m.index.ecosystem === ociFacts.id).map((m) => [m.registry, m.index])), aliases: ociFacts.mirror?.aliases ?? {} },
    members,
    blobs: stores.blobs,
    redirect: stores.redirect,
    blobBytes: new BlobBytes(stores.blobs),
    blobSizes: blobSizes(),
    sessions,
    holds,
    counters: ctx.counters,
    summaries: ctx.summaries,
    events: ctx.events,
    archiveWalks: ctx.archiveWalks,
    clientAddress: ctx.clientAddress,
    originOf: ctx.originOf,
    usage: ctx.usage,
    recentUse: ctx.recentUse,
  };
  const retention = new OciRetention(deps.ociIndexes, deps, deps.blobBytes, ctx.log);
  return {
    id: 'oci',
    retention,
    // An image reference, as docker, crane and skopeo take it: no scheme.
    clientUrl: (index, base) => `${base.host}/${index.route}/<image>`,
    discovery: ociDiscovery,
    ...ociStatus(stores.meta, members),
    search: ociSearch((index) => members.hosted(index), deps.blobBytes, stores.blobs),
    async register(app) {
      const tokens = new TokenSigner(ctx.signingKey);
      await registerOciRoutes(app, { ...deps, tokens });
    },
    close: async () => {
      members.close();
      await sessions.close();
    },
  };
}
