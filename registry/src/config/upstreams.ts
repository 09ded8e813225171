/**
 * The upstreams of a cached index, in the order a miss asks them. Two spellings, one result:
 *
 * - `cached = "<url>"` with `upstream_username`, `upstream_password`, `upstream_hosts`: one upstream;
 * - `upstreams = [{ url, username, password, hosts, failover_on_404 }, ...]`: several, each with its
 *   own credentials and hosts.
 *
 * Both at once, or an index-level credential beside `upstreams`, is refused with the fix: which of
 * two credentials was meant cannot be guessed.
 */
import { parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import { resolveSecret, secretSpellings, type SecretSources } from './resolve-secret.js';
import { displayUrl } from './sanitize.js';
import type { IndexFileConfig } from './schema.js';
import type { UpstreamConfig } from './types.js';

/** What belongs to each upstream once there are several. */
const PER_UPSTREAM: ReadonlyArray<[keyof IndexFileConfig, string]> = [
  ...secretSpellings('upstream_username').map((k): [keyof IndexFileConfig, string] => [k, k.replace('upstream_', '')]),
  ...secretSpellings('upstream_password').map((k): [keyof IndexFileConfig, string] => [k, k.replace('upstream_', '')]),
  ['upstream_hosts', 'hosts'],
];

/** The upstreams of a cached index (`cached` or `upstreams` is set: that made it cached). */
export function resolveUpstreams(ix: IndexFileConfig, where: string, secrets: SecretSources): [UpstreamConfig, ...UpstreamConfig[]] {
  if (ix.upstreams === undefined) {
    return [
      {
        url: ix.cached!,
        ...optionalSecrets(ix, 'upstream_username', 'upstream_password', where, secrets),
        hosts: ix.upstream_hosts ?? [],
        failoverOn404: false,
      },
    ];
  }
  if (ix.cached !== undefined) {
    throw new ConfigError(
      `${where}.upstreams`,
      'is given together with cached = "<url>"',
      'keep one: cached = "<url>" for a single upstream, or upstreams = [{ url = "..." }, ...] for several (asked in that order)',
    );
  }
  for (const [key, inEntry] of PER_UPSTREAM) {
    if (ix[key] !== undefined) {
      throw new ConfigError(`${where}.${key}`, 'applies to cached = "<url>" only; with upstreams = [...] each upstream has its own', `move it into the upstream it belongs to, as ${inEntry}`);
    }
  }
  if (ix.upstreams.length === 0) throw new ConfigError(`${where}.upstreams`, 'is empty', 'list at least one upstream: upstreams = [{ url = "..." }]');
  const seen = new Map<string, number>();
  const list = ix.upstreams.map((u, i): UpstreamConfig => {
    const at = `${where}.upstreams[${i}]`;
    const key = normalUrl(u.url);
    const twin = seen.get(key);
    if (twin !== undefined) throw new ConfigError(`${at}.url`, `${displayUrl(u.url)} is also upstreams[${twin}]`, 'list every upstream once');
    seen.set(key, i);
    if (u.failover_on_404 === true && i === ix.upstreams!.length - 1) {
      throw new ConfigError(`${at}.failover_on_404`, 'is set on the last upstream, which has none after it to ask', 'remove it, or add the upstream a 404 should fall over to after this one');
    }
    return {
      url: u.url,
      ...optionalSecrets(u, 'username', 'password', at, secrets),
      hosts: u.hosts ?? [],
      failoverOn404: u.failover_on_404 ?? false,
      ...(u.timeout !== undefined ? { timeoutSecs: timeoutOf(u.timeout, `${at}.timeout`) } : {}),
    };
  });
  return list as [UpstreamConfig, ...UpstreamConfig[]];
}

function optionalSecrets(holder: object, userKey: string, passKey: string, where: string, secrets: SecretSources): Pick<UpstreamConfig, 'username' | 'password'> {
  const username = resolveSecret(holder as Record<string, unknown>, userKey, where, secrets);
  const password = resolveSecret(holder as Record<string, unknown>, passKey, where, secrets);
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) };
}

/**
 * The longest an upstream may hold a request before its answer starts: whoever writes the index
 * (a tenant, through a PackageIndex) must not be able to park a client, and a flight every other
 * client of that file waits on, for hours.
 */
export const MAX_UPSTREAM_TIMEOUT_SECS = 300;

function timeoutOf(value: number | string, where: string): number {
  const secs = parseDuration(value);
  if (secs === null || secs === 0 || secs > MAX_UPSTREAM_TIMEOUT_SECS) {
    throw new ConfigError(where, `must be a duration from 1s to ${MAX_UPSTREAM_TIMEOUT_SECS / 60}m`, 'use seconds or a duration like "5s", "1m"');
  }
  return secs;
}

/** Two spellings of one upstream (a trailing slash, user info) are the same upstream. */
function normalUrl(url: string): string {
  const u = new URL(url);
  u.username = '';
  u.password = '';
  return u.href.replace(/\/+$/, '');
}
