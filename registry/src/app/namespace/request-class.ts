/**
 * The rate-limit class of a request, from its method and path only (nothing read, nothing
 * resolved beyond the route): the server's own paths here; an ecosystem's tree (`/v2/`) or an
 * index route's rest by what the ecosystem says. Unsafe paths still spend a read: their handler
 * answers 400.
 */
import type { IncomingMessage } from 'node:http';
import type { IndexConfig, RateClassName } from '../../config/types.js';
import type { Classification } from '../../limits/rate-limit-plugin.js';
import type { EcosystemTree } from '../../ecosystem/ecosystem.js';
import { requestPath } from '../../http/path.js';
import { resolveRoute } from '../../http/resolve.js';

const ADMIN_PATHS = new Set(['+status', '+stats', 'metrics']);

export interface Classifiers {
  routed: readonly IndexConfig[];
  trees: ReadonlyMap<string, EcosystemTree>;
  classifyIndexRequest(index: IndexConfig, method: string, rest: readonly string[]): RateClassName;
}

/** null: never limited (the health check). */
export function classifyRequest(method: string, raw: IncomingMessage, { routed, trees, classifyIndexRequest }: Classifiers): Classification | null {
  let segments: string[];
  try {
    segments = requestPath(raw).segments;
  } catch {
    return { class: 'read' };
  }
  const [first] = segments;
  if (segments.length === 1 && first === 'healthz') return null;
  if (segments.length === 1 && ADMIN_PATHS.has(first!)) return { class: 'admin' };
  // The web UI's admin pages (`/admin/status`) and the admin actions (`/+admin/gc`): a guessed
  // admin token spends the admin class.
  if (first === 'admin' || first === '+admin') return { class: 'admin' };
  const tree = trees.get(first ?? '');
  if (tree) return { class: tree.classify(method, segments.slice(1)), body: tree.tooManyRequests };
  const hit = resolveRoute(routed, segments);
  return hit ? { class: classifyIndexRequest(hit.index, method, hit.rest), index: hit.index.route } : { class: 'read' };
}
