/**
 * `upstreams = [...]` in the config (config/upstreams.ts): read in order with each upstream's own
 * credentials, hosts, `failover_on_404` and timeout; `cached = "<url>"` is the one-element case;
 * what would be ambiguous is refused with a message that says what to do.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import type { CachedIndex } from '../../registry/src/config/types.js';
import { REPO } from '../support/paths.js';

const load = (text: string, env: NodeJS.ProcessEnv = {}) => parseConfigText(text, 'test.toml', { env, ecosystems });
const cachedOf = (text: string, env?: NodeJS.ProcessEnv) => load(text, env).indexes[0] as CachedIndex;
const head = '[[index]]\nname = "mirror"\nroute = "root/mirror"\n';

describe('upstreams in the config', () => {
  it('reads several upstreams in order, each with its own credentials, hosts, failover_on_404 and timeout', () => {
    const ix = cachedOf(
      `${head}upstreams = [\n  { url = "https://mirror.corp.example/simple/", username = "ci", password_env = "CORP_PW", hosts = ["Files.Corp.Example"], failover_on_404 = true, timeout = "5s" },\n  { url = "https://pypi.org/simple/" },\n]\n`,
      { CORP_PW: 'corp-secret' },
    );
    expect(ix.role).toBe('cached');
    expect(ix.upstreams.map((u) => [u.url, u.username?.reveal(), u.password?.reveal(), u.hosts, u.failoverOn404, u.timeoutSecs])).toEqual([
      ['https://mirror.corp.example/simple/', 'ci', 'corp-secret', ['files.corp.example'], true, 5],
      ['https://pypi.org/simple/', undefined, undefined, [], false, undefined],
    ]);
    // The secret's source is known; its value never prints.
    expect(String(ix.upstreams[0].password)).not.toContain('corp-secret');
  });

  it('takes cached = "<url>" with its credentials and hosts as the one-element list', () => {
    const ix = cachedOf(`${head}cached = "https://pypi.org/simple/"\nupstream_username = "u"\nupstream_password = "p"\nupstream_hosts = ["files.example"]\n`);
    expect(ix.upstreams).toHaveLength(1);
    expect([ix.upstreams[0].url, ix.upstreams[0].username?.reveal(), ix.upstreams[0].password?.reveal(), ix.upstreams[0].hosts, ix.upstreams[0].failoverOn404]).toEqual([
      'https://pypi.org/simple/',
      'u',
      'p',
      ['files.example'],
      false,
    ]);
  });

  it.each([
    ['both cached and upstreams', `cached = "https://a.example/"\nupstreams = [{ url = "https://b.example/" }]\n`, /index "mirror" \(index\[0\]\)\.upstreams: is given together with cached = "<url>".*keep one: cached = "<url>" for a single upstream, or upstreams = \[/s],
    ['index-level credentials beside upstreams', `upstreams = [{ url = "https://b.example/" }]\nupstream_password = "x"\n`, /\.upstream_password: applies to cached = "<url>" only; with upstreams = \[\.\.\.\] each upstream has its own.*move it into the upstream it belongs to, as password/s],
    ['upstream_hosts beside upstreams', `upstreams = [{ url = "https://b.example/" }]\nupstream_hosts = ["c.example"]\n`, /\.upstream_hosts: applies to cached = "<url>" only.*as hosts/s],
    ['an empty list', `upstreams = []\n`, /\.upstreams: is empty/],
    ['one upstream twice', `upstreams = [{ url = "https://a.example/simple/" }, { url = "https://a.example/simple" }]\n`, /upstreams\[1\]\.url: https:\/\/a\.example\/.* is also upstreams\[0\]/],
    ['failover_on_404 on the last', `upstreams = [{ url = "https://a.example/" }, { url = "https://b.example/", failover_on_404 = true }]\n`, /upstreams\[1\]\.failover_on_404: is set on the last upstream, which has none after it to ask/],
    ['a timeout of zero', `upstreams = [{ url = "https://a.example/", timeout = "0s" }]\n`, /upstreams\[0\]\.timeout: must be a duration from 1s to 5m/],
    ['a timeout over the ceiling', `upstreams = [{ url = "https://a.example/", timeout = "5m1s" }]\n`, /upstreams\[0\]\.timeout: must be a duration from 1s to 5m/],
    ['a timeout of a day in seconds', `upstreams = [{ url = "https://a.example/", timeout = 86400 }]\n`, /upstreams\[0\]\.timeout: must be a duration from 1s to 5m/],
    ['an unknown key in an upstream', `upstreams = [{ url = "https://a.example/", user = "x" }]\n`, /upstreams\.0: unknown key "user"/],
    ['a password given two ways', `upstreams = [{ url = "https://a.example/", password = "x", password_env = "Y" }]\n`, /upstreams\[0\]\.password: is given more than one way/],
    ['upstreams on a hosted index', `hosted = true\nupstreams = [{ url = "https://a.example/" }]\n`, /has several roles \(hosted, cached\)/],
  ])('refuses %s', (_name, body, message) => {
    expect(() => load(`${head}${body}`)).toThrow(message);
  });
});

describe('the docs\' examples of upstreams', () => {
  it.each(['cluster-mirror.md', 'caching.md', 'configuration.md'])('loads every TOML example with upstreams in docs/%s', (file) => {
    const doc = readFileSync(join(REPO, 'docs', file), 'utf8');
    const examples = [...doc.matchAll(/```toml\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((t) => t.includes('upstreams = ['));
    expect(examples.length).toBeGreaterThan(0);
    for (const text of examples) {
      const config = parseConfigText(text, file, { env: { HUB_USER: 'u', HUB_TOKEN: 't' }, ecosystems, readSecretFile: () => 'secret' });
      for (const ix of config.indexes) expect(ix.role === 'cached' && ix.upstreams.length).toBeGreaterThan(1);
    }
  });
});
