/**
 * Property-based tests of the config loader, the parser that takes a person's file: whatever the
 * text or structure, loading either gives a config that keeps the loader's promises or fails
 * with a ConfigError (never a TypeError or a half-built config), and no message ever quotes a
 * secret.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../registry/src/config/errors.js';
import { buildConfig, parseConfigText } from '../../registry/src/config/load.js';
import type { Config } from '../../registry/src/config/types.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';

const ENV = { VELODEX_TEST_SECRET: 'env-secret-5d1c0e', VELODEX_TEST_BLANK: '  ' };
/** Every secret the generated configs may carry; none may appear in an error message. */
const SECRETS = ['inline-secret-8e2f4a', 'url-pass-b7c1d9', 'query-secret-3a6e', ENV.VELODEX_TEST_SECRET];

/** Loads, and returns the config or the ConfigError; anything else thrown fails the property. */
function load(attempt: () => Config): Config | ConfigError {
  try {
    return attempt();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

function expectKeptPromises(result: Config | ConfigError): void {
  if (result instanceof ConfigError) {
    for (const secret of SECRETS) expect(result.message).not.toContain(secret);
    return;
  }
  const routes = new Set<string>();
  for (const ix of result.indexes) {
    for (const segment of ix.routeSegments) expect(['', '.', '..']).not.toContain(segment);
    expect(routes.has(ix.route)).toBe(false);
    routes.add(ix.route);
    if (ix.role === 'cached') expect(ix.upstreams[0].url).toBeTypeOf('string');
    if (ix.role === 'virtual') expect(ix.members.length).toBeGreaterThan(0);
    for (const secret of [ix.role === 'hosted' ? ix.uploadToken : undefined, ...ix.webhooks.map((w) => w.secret)]) {
      if (secret) expect(secret.reveal().trim()).not.toBe('');
    }
    for (const hook of ix.webhooks) expect(new URL(hook.url).password).toBe('');
  }
}

const segment = fc.oneof(
  { arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,8}$/), weight: 6 },
  { arbitrary: fc.constantFrom('.', '..', '', 'v2', '+api', 'UPPER', 'a b', '%2e%2e', 'x\\y', 'ü'), weight: 1 },
  { arbitrary: fc.stringMatching(/^[a-z0-9._-]{1,12}$/), weight: 1 },
);
const route = fc.array(segment, { minLength: 1, maxLength: 3 }).map((s) => s.join('/'));
const secretSpelling = fc.oneof(
  fc.constant({}),
  fc.constantFrom('', ' ', '\t\n', SECRETS[0]).map((v) => ({ upload_token: v })),
  fc.constantFrom('VELODEX_TEST_SECRET', 'VELODEX_TEST_BLANK', 'VELODEX_TEST_UNSET').map((v) => ({ upload_token_env: v })),
  fc.constant({ upload_token_file: '/nonexistent/velodex-token' }),
  fc.constant({ upload_token: SECRETS[0], upload_token_env: 'VELODEX_TEST_SECRET' }),
);
const url = fc.oneof(
  fc.constantFrom(
    `https://user:${SECRETS[1]}@pypi.example/simple/?key=${SECRETS[2]}`,
    'http://127.0.0.1:9/hook',
    'ftp://127.0.0.1/x',
    'not a url',
    'http://[::1]:9/h',
    `http://u:${SECRETS[1]}@h.example/h#frag`,
  ),
  fc.webUrl({ withQueryParameters: true, withFragments: true }),
);
const webhooks = fc.array(fc.record({ url, secret: fc.constantFrom('', ' ', SECRETS[0]) }, { requiredKeys: ['url'] }), { maxLength: 2 });
/** Keys of each role, so most generated indexes get past the role checks to the deeper ones. */
const role = fc.oneof(
  fc
    .tuple(fc.record({ hosted: fc.constant(true), volatile: fc.boolean(), webhook: webhooks }, { requiredKeys: ['hosted'] }), secretSpelling)
    .map(([hosted, secret]) => ({ ...hosted, ...secret })),
  fc.record({ cached: url, upstream_concurrency: fc.integer({ min: -1, max: 64 }), cache_ttl_secs: fc.integer({ min: -1, max: 1000 }) }, { requiredKeys: ['cached'] }),
  fc.record(
    { members: fc.array(fc.constantFrom('a', 'b', 'c', 'ghost'), { maxLength: 3 }), upload_target: fc.constantFrom('a', 'b', 'ghost') },
    { requiredKeys: ['members'] },
  ),
  // Wrong on purpose: no role, two roles, a key of another role.
  fc.constantFrom({}, { hosted: true, cached: 'https://x.example/simple/' }, { hosted: true, upstream_concurrency: 2 }),
);
const index = fc.record(
  {
    // Mostly each index's own valid name (set below), sometimes a clash or a bad one.
    name: fc.oneof({ arbitrary: fc.constant(undefined), weight: 8 }, { arbitrary: fc.constantFrom('a', 'Bad Name', ''), weight: 1 }),
    route,
    ecosystem: fc.oneof({ arbitrary: fc.constantFrom('python', 'oci'), weight: 8 }, { arbitrary: fc.constant('npm'), weight: 1 }),
    role,
  },
  { requiredKeys: ['name', 'route', 'role'] },
);
const indexes = fc
  .array(index, { maxLength: 4 })
  .map((list) => list.map(({ name, role: r, ...rest }, i) => ({ name: name ?? 'abcd'[i], ...rest, ...r })));
const backend = fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, { arbitrary: fc.constantFrom('fs', 's3', 'gcs'), weight: 1 });

describe('config loading, for any input', () => {
  it('any structure gives a sound config or a ConfigError that quotes no secret', () => {
    fc.assert(
      fc.property(indexes, backend, (list, store) => {
        const raw = { index: list, ...(store ? { storage: { backend: store } } : {}) };
        expectKeptPromises(load(() => buildConfig(raw, 'property', { ecosystems, env: ENV })));
      }),
      { numRuns: 1000 },
    );
  });

  it('any JSON value in place of the file gives a config or a ConfigError', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (raw) => {
        expectKeptPromises(load(() => buildConfig(raw, 'property', { ecosystems, env: ENV })));
      }),
      { numRuns: 300 },
    );
  });

  it('any text gives a config or a ConfigError', () => {
    const tomlish = fc.array(
      fc.oneof(
        fc.constantFrom('[[index]]', '[index.policy]', '[storage]', '[rate_limit]', 'name = "a"', 'route = "r/a"', 'hosted = true', 'port = 99999', 'x = ', '"', '[', '=', '\\u0000'),
        fc.string({ maxLength: 20 }),
      ),
      { maxLength: 12 },
    );
    fc.assert(
      fc.property(tomlish, (lines) => {
        expectKeptPromises(load(() => parseConfigText(lines.join('\n'), 'property.toml', { ecosystems, env: ENV })));
      }),
      { numRuns: 300 },
    );
  });
});
