/**
 * The hosts a cached Python index fetches from, per upstream: the upstream's own, its `hosts` (`upstream_hosts`),
 * and, for PyPI itself, the host PyPI keeps its files on (its pages link there, so a cache of
 * PyPI works without configuring it). Any other host a page links to, or a redirect leads to, is
 * refused: a file's `.metadata` sibling without a hash and its `.asc` signature have nothing to
 * be verified against, so what they fetch must come from a host the configuration names.
 */
import { Egress } from '../../../roles/egress.js';
import type { UpstreamConfig } from '../../../config/types.js';

/** PyPI's pages link to its files host. */
const KNOWN_FILES_HOSTS: Record<string, string> = {
  'pypi.org': 'files.pythonhosted.org',
  'test.pypi.org': 'test-files.pythonhosted.org',
};

/** One upstream's rule: each upstream of an index has its own (`hosts` of its entry). */
export function pythonEgress(upstream: UpstreamConfig, base: string): Egress {
  const known = KNOWN_FILES_HOSTS[new URL(base).hostname.toLowerCase()];
  return new Egress({ upstream: base, trustedHosts: [...upstream.hosts, ...(known ? [known] : [])], otherHosts: 'refuse' });
}
