/** The OCI ecosystem: the distribution-spec `/v2/` API for the OCI indexes. */
import type { Ecosystem, ServerContext } from '../http/ecosystem.js';
import type { OciDeps } from './context.js';
import { ociDiscovery } from './discovery.js';
import { IndexHolds } from './index-holds.js';
import { ManifestBytes } from './manifest-bytes.js';
import { Members } from './members.js';
import { registerOciRoutes } from './routes.js';
import { ociStatus } from './status.js';
import { MemoryUploadSessions } from './memory-sessions.js';
import { SharedUploadSessions } from './shared-sessions.js';
import type { UploadSessions } from './upload-sessions.js';

export function createOciEcosystem(ctx: ServerContext): Ecosystem {
  // Sessions live where the blobs do: in the shared store when other processes share it.
  const shared = ctx.stores.sharedStages;
  const sessions: UploadSessions = shared ? new SharedUploadSessions(shared) : new MemoryUploadSessions(ctx.stores.blobs);
  const holds = new IndexHolds(ctx.stores.holds, ctx.indexByName);
  const members = new Members(ctx, holds);
  const deps: OciDeps = {
    ctx,
    members,
    manifestBytes: new ManifestBytes(ctx.stores.blobs),
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
      await registerOciRoutes(app, deps);
    },
    close: async () => {
      members.close();
      await sessions.close();
    },
  };
}
