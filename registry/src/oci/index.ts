/** The OCI ecosystem: the distribution-spec `/v2/` API. */
import type { Ecosystem, ServerContext } from '../http/ecosystem.js';

export function createOciEcosystem(_ctx: ServerContext): Ecosystem {
  return { id: 'oci' };
}
