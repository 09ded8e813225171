/** The OCI ecosystem: the distribution-spec `/v2/` API for the OCI indexes. */
import type { Ecosystem, ServerContext } from '../ecosystem/ecosystem.js';
import type { OciDeps } from './handlers/deps.js';
import { ociDiscovery } from './discovery.js';
import { blobSizes } from './read/blob-sizes.js';
import { IndexHolds } from './read/index-holds.js';
import { BlobBytes } from './read/blob-bytes.js';
import { Members } from './read/virtual/members.js';
import { registerOciRoutes } from './handlers/routes.js';
import { ociStatus } from './status.js';
import { MemoryUploadSessions } from './read/uploads/memory-sessions.js';
import { SharedUploadSessions } from './read/uploads/shared-sessions.js';
import { loadSigningKey } from './handlers/token/signing-key.js';
import { TokenSigner } from './handlers/token/tokens.js';
import type { UploadSessions } from './read/uploads/upload-sessions.js';

export function createOciEcosystem(ctx: ServerContext): Ecosystem {
  // Sessions live where the blobs do: in the shared store when other processes share it.
  const shared = ctx.stores.sharedStages;
  const sessions: UploadSessions = shared ? new SharedUploadSessions(shared) : new MemoryUploadSessions(ctx.stores.blobs);
  const holds = new IndexHolds(ctx.stores.holds, ctx.indexByName);
  const { stores } = ctx;
  const members = new Members({
    meta: stores.meta,
    blobs: stores.blobs,
    holds,
    indexByName: ctx.indexByName,
    counters: ctx.counters,
    upstreamSlots: ctx.upstreamSlots,
    ...(ctx.fetches ? { fetches: ctx.fetches } : {}),
  });
  const deps: Omit<OciDeps, 'tokens'> = {
    ctx,
    members,
    blobBytes: new BlobBytes(ctx.stores.blobs),
    blobSizes: blobSizes(),
    sessions,
    ociIndexes: ctx.config.indexes.filter((ix) => ix.ecosystem === 'oci'),
    holds,
  };
  return {
    id: 'oci',
    // An image reference, as docker, crane and skopeo take it: no scheme.
    clientUrl: (index, base) => `${base.host}/${index.route}/<image>`,
    discovery: ociDiscovery,
    ...ociStatus(ctx, members),
    async register(app) {
      // Read (or created) once at start-up: a store that cannot give it stops the start.
      const tokens = new TokenSigner(await loadSigningKey(ctx.config, ctx.stores));
      await registerOciRoutes(app, { ...deps, tokens });
    },
    close: async () => {
      members.close();
      await sessions.close();
    },
  };
}
