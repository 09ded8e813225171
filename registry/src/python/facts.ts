/** What the rest of the server knows of the Python ecosystem before it runs (config, routes). */
import type { EcosystemFacts } from '../config/ecosystem-facts.js';

export const pythonFacts: EcosystemFacts = {
  id: 'python',
  roles: ['hosted', 'cached', 'virtual'],
  routeSegment: { pattern: /^[A-Za-z0-9][A-Za-z0-9._~-]*$/, rule: 'letters, digits and . _ ~ - (not starting with a dot)' },
  embeddedDefault: { name: 'hosted', route: 'root/hosted' },
};
