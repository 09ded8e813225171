/**
 * `trusted_proxies`: the peers whose forwarded headers velodex believes (`X-Forwarded-For` for the
 * client address, `X-Forwarded-Host` and `-Proto` for the origin). A top-level key, since more
 * than the rate limiter reads it; `[rate_limit] trusted_proxies`, where it was first, is still
 * accepted, but not both at once.
 */
import { isIP } from 'node:net';
import { ConfigError } from './errors.js';
import type { FileConfig } from './schema.js';
import type { AddressRange } from './types.js';

export function resolveTrustedProxies(file: Pick<FileConfig, 'trusted_proxies' | 'rate_limit'>): AddressRange[] {
  const top = file.trusted_proxies;
  const old = file.rate_limit?.trusted_proxies;
  if (top !== undefined && old !== undefined) {
    throw new ConfigError('rate_limit.trusted_proxies', 'is given as well as the top-level trusted_proxies', 'keep only the top-level trusted_proxies');
  }
  if (old !== undefined) return old.map((entry, i) => parseTrustedProxy(entry, `rate_limit.trusted_proxies[${i}]`));
  return (top ?? []).map((entry, i) => parseTrustedProxy(entry, `trusted_proxies[${i}]`));
}

/** `10.0.0.0/8`, `::1`, `fd00::/8`: an IP, with an optional prefix length within its family's width. */
function parseTrustedProxy(entry: string, where: string): AddressRange {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const version = isIP(address);
  const fix = 'write an IPv4 or IPv6 address, or a network as address/prefix (10.0.0.0/8, fd00::/8)';
  if (version === 0) throw new ConfigError(where, `"${entry}" is not an IP address or CIDR network`, fix);
  const width = version === 4 ? 32 : 128;
  const prefixText = slash === -1 ? String(width) : entry.slice(slash + 1);
  const prefix = /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= width)) throw new ConfigError(where, `"${entry}" has a bad prefix length: IPv${version} allows 0 to ${width}`, fix);
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}
