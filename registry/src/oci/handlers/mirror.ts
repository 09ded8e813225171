/**
 * `/v2/` requests that name an upstream registry (`?ns=`, model/namespace.ts). containerd adds
 * `ns` to every request it sends to a host of a `hosts.toml` that is not the registry itself, so
 * two forms arrive with it:
 * - the one endpoint (`[[mirror]]`): `/v2/library/alpine/...?ns=docker.io`, the repository path
 *   as the registry names it, served by the cached index mapped to that registry;
 * - an index's own route (the per-index `hosts.toml` with `override_path`, discovery-containerd.ts):
 *   `/v2/<route>/library/alpine/...?ns=docker.io`, `ns` being the registry the index caches.
 * A name under the route of an index that serves the registry `ns` names (it is, or has as a
 * member, the registry's mapped index or a cached index whose upstream is that registry) is the
 * second form. Any other name is, for a mapped registry, a repository of that registry; for
 * another registry (or an `ns` that is no host) a 404 NAME_UNKNOWN naming it, so containerd falls
 * back to the registry itself (it tries the next host of its `hosts.toml` on any 4xx). So a
 * registry's pulls are never answered from another registry's cache, even when a node sends every
 * registry to this endpoint (containerd's `_default`). Without any `[[mirror]]` entry, `ns` on a
 * name under an index route is ignored, as it always was.
 *
 * Inside velodex a mirrored repository is named as on its index's route (`<route>/library/alpine`):
 * the name the token realm grants and read checks compare, so a private index's challenge and
 * token work as on its route.
 */
import { registryHost } from '../../config/mirrors.js';
import type { IndexConfig } from '../../config/types.js';
import { membersOf } from '../../roles/write-target.js';
import { OciError } from '../model/errors.js';
import { checkName } from '../model/names.js';
import type { Namespace } from '../model/namespace.js';
import { findName, resolveName } from './access.js';
import type { Mirrors, OciDeps } from './deps.js';
import type { Target } from './exchange.js';

type Resolving = Pick<OciDeps, 'ociIndexes' | 'indexByName' | 'mirrors'>;

/** The index and repository `segments` address, given the registry the request names. */
export function resolveTarget(deps: Resolving, namespace: Namespace, segments: readonly string[]): Target {
  if (namespace.kind === 'none') return resolveName(deps.ociIndexes, segments);
  const routed = findName(deps.ociIndexes, segments);
  if (routed && (deps.mirrors.byRegistry.size === 0 || servesRegistry(routed.index, namespace, deps))) return routed;
  const index = namespace.kind === 'registry' ? deps.mirrors.byRegistry.get(namespace.host) : undefined;
  if (!index) throw namespace.kind === 'invalid' ? notHost(deps.mirrors, namespace.raw) : notMirrored(deps.mirrors, namespace.host);
  const name = [...index.routeSegments, ...segments];
  checkName(name);
  return { index, repo: [...segments], name: name.join('/') };
}

/** Whether `index` (itself or a member) is the registry's mapped index or a cache of that registry. */
function servesRegistry(index: IndexConfig, namespace: Namespace, deps: Resolving): boolean {
  if (namespace.kind !== 'registry') return false;
  const mapped = deps.mirrors.byRegistry.get(namespace.host);
  return membersOf(index, deps.indexByName).some(
    (m) => m === mapped || (m.role === 'cached' && m.upstreams.some((u) => registryHost(new URL(u.url).host, deps.mirrors.aliases) === namespace.host)),
  );
}

/** `/v2/` itself with `ns`: the version check for a mirrored registry, the 404 for another (with `[[mirror]]` entries). */
export function checkMirrored(mirrors: Mirrors, namespace: Namespace): void {
  // Nothing mirrored: `ns` means nothing here, as before `[[mirror]]`.
  if (mirrors.byRegistry.size === 0) return;
  if (namespace.kind === 'invalid') throw notHost(mirrors, namespace.raw);
  if (namespace.kind === 'registry' && !mirrors.byRegistry.has(namespace.host)) throw notMirrored(mirrors, namespace.host);
}

function notMirrored(mirrors: Mirrors, host: string): OciError {
  return new OciError('NAME_UNKNOWN', `registry "${host}" is not mirrored here (this endpoint mirrors ${listed(mirrors)}): pull it from the registry itself`);
}

function notHost(mirrors: Mirrors, raw: string): OciError {
  return new OciError('NAME_UNKNOWN', `"${raw}" (the ns parameter) is not a registry host; this endpoint mirrors ${listed(mirrors)}`);
}

function listed(mirrors: Mirrors): string {
  const hosts = [...mirrors.byRegistry.keys()];
  return hosts.length === 0 ? 'no registry' : hosts.map((h) => `"${h}"`).join(', ');
}
