/**
 * `external_urls`: the addresses clients outside reach this registry at, through something that
 * terminates TLS in front of it (an Ingress, a Gateway, a load balancer). A request whose host is
 * one of them is given that URL's scheme, so discovery and the client texts say `https://` without
 * trusting the forwarding proxy's headers. An origin only: a path would be a route prefix velodex
 * does not serve under.
 */
import { ConfigError } from './errors.js';
import type { ExternalOrigin } from './types.js';

export function resolveExternalUrls(values: readonly string[] | undefined): ExternalOrigin[] {
  return (values ?? []).map((value, i) => {
    const where = `external_urls[${i}]`;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ConfigError(where, `"${value}" is not a URL`, 'give the scheme and host clients use, like "https://registry.example.com"');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConfigError(where, `${url.protocol} is not http or https`, 'use https://<host> (or http://)');
    if (url.username || url.password) throw new ConfigError(where, 'must not carry credentials', 'give only the scheme and host');
    if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
      throw new ConfigError(where, 'must be an origin: scheme, host and port only', `use "${url.origin}"; routes are served at the root`);
    }
    return { scheme: url.protocol === 'https:' ? 'https' : 'http', host: url.host };
  });
}
