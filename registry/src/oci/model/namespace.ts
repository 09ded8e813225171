/**
 * The registry a request to a mirror is for: containerd adds `?ns=<registry host>` to every
 * request it sends to a host of a `hosts.toml` that is not the registry itself (`docker.io` for
 * `docker.io/library/alpine`, `10.0.0.5:5000` for `10.0.0.5:5000/team/app`). No `ns`: a request
 * to this registry's own names, as before. One `ns` that is a registry host: that registry, in
 * the spelling `[[mirror]]` compares (config/mirrors.ts). Anything else (empty, not a host,
 * several that differ) is a registry this endpoint does not mirror: the caller answers as for
 * an unmapped one, so the client goes to the registry itself.
 */
import { registryHost } from '../../config/mirrors.js';

export type Namespace = { kind: 'none' } | { kind: 'registry'; host: string } | { kind: 'invalid'; raw: string };

/** What the client sent, cut to this length, is what a refusal quotes. */
const QUOTED = 100;

export function namespaceOf(query: URLSearchParams, aliases: Readonly<Record<string, string>>): Namespace {
  const given = query.getAll('ns');
  if (given.length === 0) return { kind: 'none' };
  const hosts = new Set(given.map((raw) => registryHost(raw, aliases)));
  const [host] = hosts;
  if (hosts.size === 1 && host !== null && host !== undefined) return { kind: 'registry', host };
  return { kind: 'invalid', raw: given.join(',').slice(0, QUOTED) };
}
