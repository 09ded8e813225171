/**
 * `[[mirror]]`: which cached index stands in for an upstream registry named by its host, so one
 * endpoint can be the mirror of several registries (a client names the registry it wants on each
 * request: containerd's `ns` query parameter). The map is explicit: a registry no entry names is
 * not served, whatever the indexes' upstreams are.
 *
 * A registry is written as image references name it: `host[:port]`, no scheme, no path; lower
 * case is the one spelling compared. An ecosystem may fold aliases of one registry into the name
 * its clients send (`EcosystemFacts.mirror`): the same fold applies to what a request names.
 */
import type { EcosystemFacts } from './ecosystem-facts.js';
import { ConfigError } from './errors.js';
import type { FileConfig } from './schema.js';
import type { CachedIndex, IndexConfig } from './types.js';

/** One `[[mirror]]` entry, resolved: the registry's canonical host and the index that serves it. */
export interface RegistryMirror {
  registry: string;
  index: CachedIndex;
}

// `_` too: container networks and /etc/hosts use such names (as discovery/origin.ts allows).
const NAME = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;
const IPV4 = /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])$/;
const IPV6 = /^\[[0-9a-f:.]{2,45}\]$/;
/** Longer than any host name (253) plus a port: anything past it is not a registry host. */
const MAX_HOST_LENGTH = 260;

/**
 * `raw` as a registry host in its one spelling (lower case, a port kept only when it is not
 * empty, aliases folded), or null when it is not one: a DNS name, an IPv4 address or a bracketed
 * IPv6 address, with an optional port 1-65535. A name whose last label is a number must be an
 * IPv4 address (as in URLs).
 */
export function registryHost(raw: string, aliases: Readonly<Record<string, string>> = {}): string | null {
  if (raw.length === 0 || raw.length > MAX_HOST_LENGTH) return null;
  const lower = raw.toLowerCase();
  const m = /^(\[[^\]]*\]|[^:[\]]+)(?::([0-9]{1,5}))?$/.exec(lower);
  if (!m) return null;
  const [, host = '', port] = m;
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return null;
  const lastLabel = host.slice(host.lastIndexOf('.') + 1);
  const valid = host.startsWith('[') ? IPV6.test(host) && validIpv6(host.slice(1, -1)) : /^[0-9]+$/.test(lastLabel) ? IPV4.test(host) : NAME.test(host) && host.length <= 253;
  if (!valid) return null;
  const canonical = port === undefined ? host : `${host}:${Number(port)}`;
  return aliases[canonical] ?? canonical;
}

/** The URL parser's judgement of an IPv6 literal (config imports nothing that knows better). */
function validIpv6(address: string): boolean {
  try {
    return new URL(`http://[${address}]`).hostname.length > 2;
  } catch {
    return false;
  }
}

const REGISTRY_FIX = 'write the host as image references name it, without scheme or path: "docker.io", "ghcr.io", "registry.k8s.io", "10.0.0.5:5000"';

/**
 * The `[[mirror]]` entries: each a registry host and an index that exists, is cached, and whose
 * ecosystem serves registries by host; no registry twice (after folding aliases), no index for
 * two registries (one cache would mix two registries' names).
 */
export function resolveMirrors(entries: FileConfig['mirror'], indexes: readonly IndexConfig[], ecosystems: readonly EcosystemFacts[]): RegistryMirror[] {
  const byName = new Map(indexes.map((ix) => [ix.name, ix]));
  const takers = ecosystems.filter((e) => e.mirror).map((e) => e.id);
  const byRegistry = new Map<string, number>();
  const byIndex = new Map<string, string>();
  return (entries ?? []).map((entry, i) => {
    const where = `mirror[${i}]`;
    const index = byName.get(entry.index);
    if (!index) throw new ConfigError(`${where}.index`, `"${entry.index}" is not a configured index`, `name a cached ${takers.join(' or ')} index`);
    const facts = ecosystems.find((e) => e.id === index.ecosystem);
    if (!facts?.mirror) throw new ConfigError(`${where}.index`, `"${index.name}" is a ${index.ecosystem} index; only ${takers.join(' or ')} indexes serve registries by host`, `name a cached ${takers.join(' or ')} index`);
    if (index.role !== 'cached') throw new ConfigError(`${where}.index`, `"${index.name}" is a ${index.role} index, not a cached one`, `name a cached ${index.ecosystem} index whose upstream is the registry (or a mirror of it)`);
    const registry = registryHost(entry.registry, facts.mirror.aliases);
    if (registry === null) throw new ConfigError(`${where}.registry`, `"${entry.registry}" is not a registry host`, REGISTRY_FIX);
    const twice = byRegistry.get(registry);
    if (twice !== undefined) {
      const spelled = entry.registry.toLowerCase() === registry ? '' : ` ("${entry.registry}" is the same registry)`;
      throw new ConfigError(`${where}.registry`, `"${registry}" is also the registry of mirror[${twice}]${spelled}`, 'map every registry once');
    }
    const other = byIndex.get(index.name);
    if (other !== undefined) {
      throw new ConfigError(`${where}.index`, `"${index.name}" already serves registry "${other}"; one cache would mix two registries' repositories`, 'give every registry its own cached index');
    }
    byRegistry.set(registry, i);
    byIndex.set(index.name, registry);
    return { registry, index };
  });
}
