/** What the rest of the server knows of the OCI ecosystem before it runs (config, routes). */
import type { EcosystemFacts } from '../config/ecosystem-facts.js';

export const ociFacts: EcosystemFacts = {
  id: 'oci',
  roles: ['hosted', 'cached', 'virtual'],
  // A route is the start of repository names: distribution-spec name components.
  routeSegment: { pattern: /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/, rule: 'lowercase letters, digits and . _ - between them' },
  embeddedDefault: { name: 'oci', route: 'root/oci' },
  // Tags and untagged manifests: lifecycle/retention.ts runs its hosted indexes' rules.
  retention: true,
  // containerd names Docker Hub `docker.io` (its `ns`), whichever host its API answers on.
  mirror: { aliases: { 'registry-1.docker.io': 'docker.io', 'index.docker.io': 'docker.io' } },
};
