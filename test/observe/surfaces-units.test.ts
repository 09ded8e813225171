/**
 * The pure parts of what public surfaces show and who sees the admin ones: `displayUrl` (scheme
 * and host, a fingerprint of the rest: property-based, no path, query or user info ever shows),
 * the upstream and token-realm errors that quote a URL, the admin token check and rate-limit
 * class, and the repair scans of `details=admin` (one per index at a time, one index at a time).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { displayUrl, urlFingerprint, urlWithoutCredentials } from '../../registry/src/config/sanitize.js';
import { Secret } from '../../registry/src/config/secret.js';
import { checkAdmin } from '../../registry/src/access/admin-auth.js';
import { classifyRequest } from '../../registry/src/app/namespace/request-class.js';
import { basicAuth } from '../support/velodex.js';
import { SummaryScans } from '../../registry/src/app/observe/summary-scans.js';
import { IndexSummaries, type ScannedSummary } from '../../registry/src/observe/summary.js';
import { TokenError } from '../../registry/src/roles/bearer-tokens.js';
import { UpstreamError } from '../../registry/src/roles/upstream-error.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/temp-dirs.js';
import { until } from '../support/until.js';

const SLACK = 'https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/zXq7Secret9Token2Path';
const fp = (href: string) => createHash('sha256').update(href).digest('hex').slice(0, 8);

describe('displayUrl', () => {
  it('shows a Slack-style webhook as scheme and host, and a fingerprint of the whole URL', () => {
    expect(displayUrl(SLACK)).toBe(`https://hooks.slack.com/...#${fp(SLACK)}`);
    expect(urlFingerprint(SLACK)).toBe(fp(SLACK));
    expect(displayUrl(SLACK)).not.toContain('zXq7Secret9Token2Path');
    expect(displayUrl(SLACK)).not.toContain('services');
  });

  it('keeps the port, hides user info, query and fragment, and leaves a bare origin as it is', () => {
    expect(displayUrl('http://127.0.0.1:8080/simple/')).toBe(`http://127.0.0.1:8080/...#${fp('http://127.0.0.1:8080/simple/')}`);
    expect(displayUrl('https://pypi.example/')).toBe('https://pypi.example/');
    expect(displayUrl('https://pypi.example')).toBe('https://pypi.example/');
    for (const hidden of ['https://u:p@pypi.example/', 'https://pypi.example/?token=x', 'https://pypi.example/#frag']) {
      const shown = displayUrl(hidden);
      expect(shown).toMatch(/^https:\/\/pypi\.example\/\.\.\.#[0-9a-f]{8}$/);
      expect(shown).toBe(`https://pypi.example/...#${fp(new URL(hidden).href)}`);
    }
    expect(displayUrl('not a url')).toBe('(invalid URL)');
  });

  it('tells two targets on one host apart, and one target written two ways is one', () => {
    expect(displayUrl(`${SLACK}x`)).not.toBe(displayUrl(SLACK));
    expect(displayUrl('HTTPS://Hooks.Slack.com/services/T0AAAAAAA/B0BBBBBBB/zXq7Secret9Token2Path')).toBe(displayUrl(SLACK));
  });

  it('never shows a path segment, query value or password of any URL', () => {
    // Secrets start with a letter past "f", so a fingerprint (hex) can never spell one.
    const secret = fc.stringMatching(/^[g-z][A-Za-z0-9_-]{5,30}$/);
    const host = fc.constantFrom('hooks.slack.com', 'discord.com', 'outlook.office.com', '127.0.0.1:9', 'pypi.fury.io', '[::1]:8443');
    fc.assert(
      fc.property(fc.constantFrom('http', 'https'), host, fc.array(secret, { minLength: 1, maxLength: 4 }), secret, secret, (scheme, h, segments, query, pass) => {
        for (const url of [`${scheme}://${h}/${segments.join('/')}`, `${scheme}://${h}/?k=${query}`, `${scheme}://user:${pass}@${h}/`]) {
          const shown = displayUrl(url);
          expect(shown.startsWith(`${scheme}://${new URL(url).host}/`)).toBe(true);
          for (const s of [...segments, query, pass]) expect(shown).not.toContain(s);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('urlWithoutCredentials keeps the path of a link, without user info, query or fragment', () => {
    expect(urlWithoutCredentials('https://u:p@files.example/a/b.whl.provenance?sig=x#f')).toBe('https://files.example/a/b.whl.provenance');
    expect(urlWithoutCredentials('::')).toBeNull();
  });
});

describe('errors that quote an upstream URL', () => {
  it('show it, and keep it in their fields, as displayUrl shows it', () => {
    const upstream = new UpstreamError('connect', 'https://pypi.fury.io/zTokenInPath42/simple/alpha/', 'connection failed (ECONNREFUSED)');
    expect(upstream.message).toBe(`upstream ${displayUrl('https://pypi.fury.io/zTokenInPath42/simple/alpha/')}: connection failed (ECONNREFUSED)`);
    const token = new TokenError('https://auth.example/zRealmSecret77/token?service=x', 'answered 401');
    // A logged error carries its fields (pino copies them): none may hold the raw URL.
    for (const err of [upstream, token]) expect(JSON.stringify({ ...err, message: err.message })).not.toMatch(/zTokenInPath42|zRealmSecret77/);
  });
});

describe('the admin token check', () => {
  const token = new Secret('admin-token-7Hq2', 'inline');

  it('lets everything through while no token is configured', () => {
    expect(checkAdmin(undefined, undefined)).toBeNull();
    expect(checkAdmin(undefined, 'Bearer anything')).toBeNull();
  });

  it('takes the token as a Bearer credential or as the Basic password with any user name', () => {
    expect(checkAdmin(token, 'Bearer admin-token-7Hq2')).toBeNull();
    expect(checkAdmin(token, 'bearer admin-token-7Hq2')).toBeNull();
    expect(checkAdmin(token, basicAuth('admin-token-7Hq2', 'admin'))).toBeNull();
    expect(checkAdmin(token, basicAuth('admin-token-7Hq2', ''))).toBeNull();
  });

  it('tells a missing credential from a wrong one', () => {
    expect(checkAdmin(token, undefined)).toBe('missing-credentials');
    expect(checkAdmin(token, '')).toBe('missing-credentials');
    expect(checkAdmin(token, 'Token admin-token-7Hq2')).toBe('missing-credentials');
    expect(checkAdmin(token, 'Bearer admin-token-7Hq')).toBe('wrong-credentials');
    expect(checkAdmin(token, 'Bearer admin-token-7Hq2x')).toBe('wrong-credentials');
    // The token as the user name is not the token as the password.
    expect(checkAdmin(token, basicAuth('nope', 'admin-token-7Hq2'))).toBe('wrong-credentials');
  });
});

describe('the rate-limit class of the admin surfaces', () => {
  it('is admin for /+status and for the /admin/ pages alike (a guessed token spends the admin budget)', () => {
    const deps = { routed: [], trees: new Map(), classifyIndexRequest: () => 'read' as const };
    const classOf = (url: string) => classifyRequest('GET', { url } as IncomingMessage, deps)?.class;
    expect(classOf('/+status?details=admin')).toBe('admin');
    expect(classOf('/admin/status')).toBe('admin');
    expect(classOf('/browse')).toBe('read');
  });
});

describe('the repair scans of details=admin', () => {
  const scanned = (n: number): ScannedSummary => ({ projects: { alpha: n }, recent: [] });

  /** A scan that waits until `release` is called, counting how many run at once. */
  function gatedScans() {
    const state = { started: 0, running: 0, most: 0, release: [] as Array<() => void> };
    const scan = (n: number) => async (): Promise<ScannedSummary> => {
      state.started += 1;
      state.running += 1;
      state.most = Math.max(state.most, state.running);
      await new Promise<void>((resolve) => state.release.push(resolve));
      state.running -= 1;
      return scanned(n);
    };
    return { state, scan };
  }

  async function summariesIn(): Promise<IndexSummaries> {
    const store = new FsMetaStore(tempDir('velodex-scans-'));
    await store.init();
    return new IndexSummaries(store);
  }

  /** Waits until `n` scans wait for their release (each runs real store I/O before and after). */
  const waiting = (state: { release: unknown[] }, n: number) => until(`${n} scan(s) waiting`, async () => (state.release.length >= n ? true : undefined), { intervalMs: 5, timeoutMs: 10_000 });

  it('concurrent requests for one index share one scan, and later ones read what it stored', async () => {
    const scans = new SummaryScans(await summariesIn());
    const { state, scan } = gatedScans();
    const burst = Array.from({ length: 20 }, () => scans.ensure('hosted', scan(3)));
    await waiting(state, 1);
    state.release.shift()!();
    const results = await Promise.all(burst);
    expect(results.every((r) => r.scanned && r.doc.projects.alpha === 3)).toBe(true);
    const later = await scans.ensure('hosted', scan(4));
    expect(later).toMatchObject({ scanned: false, doc: { projects: { alpha: 3 } } });
    expect(state.started).toBe(1);
  });

  it('scans of different indexes run one after another, and a failed scan does not stop the next', async () => {
    const scans = new SummaryScans(await summariesIn());
    const { state, scan } = gatedScans();
    const failing = scans.ensure('broken', () => Promise.reject(new Error('store down')));
    const all = ['a', 'b', 'c'].map((name, i) => scans.ensure(name, scan(i + 1)));
    await expect(failing).rejects.toThrow('store down');
    for (let i = 0; i < 3; i++) {
      await waiting(state, 1);
      expect(state.running).toBe(1);
      state.release.shift()!();
    }
    expect((await Promise.all(all)).map((r) => r.doc.projects.alpha)).toEqual([1, 2, 3]);
    expect(state.most).toBe(1);
  });
});
