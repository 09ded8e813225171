/**
 * The limiter's counters, in process so the test can read them: while `[rate_limit]` is disabled
 * nothing is ever refused however small the configured windows, and the counters stay at zero;
 * enabled, every request of a class is counted as allowed or denied.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadEmbeddedDefault } from '../../registry/src/config/load.js';
import type { RateLimitConfig } from '../../registry/src/config/types.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { buildApp, type BuiltApp } from '../../registry/src/app/app.js';
import { openStores } from '../../registry/src/storage/index.js';
import { tempDir } from '../support/velodex.js';

let built: BuiltApp | undefined;

/** velodex's app over a fresh store with the embedded default's indexes, listening on a free port. */
async function start(rateLimit: RateLimitConfig): Promise<string> {
  const dir = tempDir();
  const config = loadEmbeddedDefault({ ecosystems, overrides: { dataDir: join(dir, 'data') }, env: { VELODEX_UPLOAD_TOKEN: 'token' } });
  const stores = await openStores({ ...config.storage, path: join(dir, 'store') }, { scratchDir: join(dir, 'scratch') });
  built = await buildApp({ ...config, rateLimit, logLevel: 'silent' }, stores, ecosystems);
  await built.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = built.app.server.address();
  return `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
}

afterEach(async () => {
  await built?.app.close();
  await Promise.all(built?.ecosystems.map((e) => e.close?.()) ?? []);
  built = undefined;
});

const ONE_PER_MINUTE = { requests: 1, windowSecs: 60 };
const TINY = { read: ONE_PER_MINUTE, download: ONE_PER_MINUTE, write: ONE_PER_MINUTE, admin: ONE_PER_MINUTE };
const PATHS = ['/root/hosted/simple/', '/root/hosted/files/' + '0'.repeat(64) + '/x.whl', '/v2/', '/metrics', '/nowhere'];

describe('rate limit counters', () => {
  it('stay at zero, and nothing is refused, while the limiter is disabled', async () => {
    const url = await start({ enabled: false, classes: TINY });
    for (let i = 0; i < 5; i++) {
      for (const path of PATHS) expect((await fetch(`${url}${path}`)).status).not.toBe(429);
      expect((await fetch(`${url}/root/hosted/`, { method: 'POST' })).status).not.toBe(429);
    }
    const zero = { read: 0, download: 0, write: 0, admin: 0 };
    expect(built?.rateLimits.snapshot()).toEqual({ allowed: zero, denied: zero });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    for (const cls of Object.keys(zero)) {
      expect(metrics).toContain(`velodex_rate_limit_allowed_total{class="${cls}"} 0`);
      expect(metrics).toContain(`velodex_rate_limit_denied_total{class="${cls}"} 0`);
    }
  });

  it('count each request of a class as allowed or denied while enabled', async () => {
    const url = await start({ enabled: true, classes: TINY });
    for (let i = 0; i < 3; i++) {
      for (const path of PATHS) await fetch(`${url}${path}`);
      await fetch(`${url}/root/hosted/`, { method: 'POST' });
      await fetch(`${url}/healthz`);
    }
    // read: simple page, /v2/ and the unknown path, three times each; one is allowed.
    expect(built?.rateLimits.snapshot()).toEqual({
      allowed: { read: 1, download: 1, write: 1, admin: 1 },
      denied: { read: 8, download: 2, write: 2, admin: 2 },
    });
  });
});
