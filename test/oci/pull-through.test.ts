/**
 * velodex's cached OCI index in front of a real distribution registry with token auth, through
 * a fault proxy that counts (and breaks) the upstream requests. crane pulls through the cache as
 * a user would; the assertions are on what arrives, on the upstream request counts and on the
 * index's counters.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { oci } from '../support/config.js';
import { allBlobs, buildImage, buildIndex, layoutMismatches, readLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { startVelodex } from '../support/velodex.js';
import { blobPaths, CACHE, cacheStats, countOf, crane, pullThroughSuite, seed, since } from './pull-through-support.js';

const s = pullThroughSuite('pull-through', {
  // A second cached index over the same upstream, one upstream fetch at a time.
  extraIndexes: (upstream) => [
    oci.cached('narrow', upstream, { route: 'narrow', upstreamConcurrency: 1, credentials: { username: 'mirror', password: 'mirror-password' }, upstreamHosts: ['localhost'] }),
    // Tags confirmed for five minutes, as the default keeps them.
    oci.cached('confirmed', upstream, { route: 'confirmed', ttlSecs: 300, credentials: { username: 'mirror', password: 'mirror-password' }, upstreamHosts: ['localhost'] }),
  ],
});

const out = (r: { stdout: string }) => r.stdout.trim();
const pullScope = (repo: string) => `repository:${repo}:pull`;

interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
}

async function get(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

const codeOf = (a: Answer): string => (JSON.parse(a.body.toString('utf8')) as { errors: Array<{ code: string }> }).errors[0]!.code;

describe('pull-through cache (distribution registry upstream, token auth)', () => {
  it('N concurrent cold pulls of one image: one upstream fetch per blob and manifest, one token per scope', async () => {
    const image = buildImage({ seed: 'pt-cold', layers: 3, bigFileSize: 512 * 1024 });
    await seed(s, 'team/app', 'v1', image);
    const from = s.proxy.requests.length;
    const pulls = Array.from({ length: 4 }, (_, i) => crane(s, ['pull', '--format', 'oci', `${s.host}/${CACHE}/team/app:v1`, join(s.work, `cold-${i}`)]));
    await Promise.all(pulls);

    for (let i = 0; i < 4; i++) expect(layoutMismatches(readLayout(join(s.work, `cold-${i}`)), allBlobs(image))).toEqual([]);
    const seen = since(s, from);
    for (const path of blobPaths('team/app', image).slice(1)) expect(countOf(seen, 'GET', path), path).toBe(1);
    expect(countOf(seen, 'GET', '/v2/team/app/manifests/v1')).toBe(1);
    // velodex's own token: one for the scope, whatever the number of requests.
    expect(s.tokens.fetches.filter((f) => f.user === 'mirror' && f.scopes.includes(pullScope('team/app')))).toHaveLength(1);
  });

  it('a repeat pull fetches no blob and revalidates the tag once', async () => {
    const image = buildImage({ seed: 'pt-repeat', layers: 2, bigFileSize: 64 * 1024 });
    await seed(s, 'team/repeat', 'v1', image);
    const ref = `${s.host}/${CACHE}/team/repeat:v1`;
    await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'repeat-1')]);
    const before = await cacheStats(s);
    const from = s.proxy.requests.length;

    await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'repeat-2')]);

    expect(layoutMismatches(readLayout(join(s.work, 'repeat-2')), allBlobs(image))).toEqual([]);
    const seen = since(s, from);
    expect(seen.filter((r) => r.includes('/blobs/'))).toEqual([]);
    expect(seen).toEqual(['HEAD /v2/team/repeat/manifests/v1']);
    const after = await cacheStats(s);
    expect(after.refreshes - before.refreshes).toBe(1);
    expect(after.changed - before.changed).toBe(0);
    const metrics = await (await fetch(`${s.server.url}/metrics`)).text();
    expect(metrics).toContain(`velodex_index_refreshes_total{index="${CACHE}",ecosystem="oci",role="cached"} ${after.refreshes}`);
    expect(s.tokens.fetches.filter((f) => f.scopes.includes(pullScope('team/repeat')) && f.user === 'mirror')).toHaveLength(1);
  });

  it('a tag moved upstream is fetched again and counted as changed; a digest pull never asks the upstream', async () => {
    const first = buildImage({ seed: 'pt-move-1', layers: 1, bigFileSize: 1024 });
    const second = buildImage({ seed: 'pt-move-2', layers: 1, bigFileSize: 1024 });
    await seed(s, 'team/move', 'latest', first);
    const ref = `${s.host}/${CACHE}/team/move:latest`;
    expect(out(await crane(s, ['digest', ref]))).toBe(first.manifest.descriptor.digest);
    await seed(s, 'team/move', 'latest', second);
    const before = await cacheStats(s);

    expect(out(await crane(s, ['digest', ref]))).toBe(second.manifest.descriptor.digest);
    const after = await cacheStats(s);
    expect(after.refreshes - before.refreshes).toBe(1);
    expect(after.changed - before.changed).toBe(1);

    const from = s.proxy.requests.length;
    const bytes = (await crane(s, ['manifest', `${s.host}/${CACHE}/team/move@${first.manifest.descriptor.digest}`])).stdout;
    expect(Buffer.from(bytes).equals(first.manifest.bytes)).toBe(true);
    expect(since(s, from)).toEqual([]);
  });

  it('serves a multi-platform index byte for byte and each platform through it', async () => {
    const index = buildIndex('pt-multi');
    await seed(s, 'team/multi', '1.0', index);
    const ref = `${s.host}/${CACHE}/team/multi:1.0`;
    expect(out(await crane(s, ['digest', ref]))).toBe(index.index.descriptor.digest);
    expect(Buffer.from((await crane(s, ['manifest', ref])).stdout).equals(index.index.bytes)).toBe(true);
    for (const image of index.images) {
      const platform = `${image.platform.os}/${image.platform.architecture}`;
      expect(Buffer.from((await crane(s, ['config', '--platform', platform, ref])).stdout).equals(image.config.bytes)).toBe(true);
    }
    const manifest = await get(`${s.server.url}/v2/${CACHE}/team/multi/manifests/1.0`, { headers: { accept: 'application/vnd.oci.image.index.v1+json' } });
    expect(manifest.headers.get('content-type')).toBe('application/vnd.oci.image.index.v1+json');
    expect(manifest.headers.get('docker-content-digest')).toBe(index.index.descriptor.digest);
  });

  it('lists tags from the upstream under the requested name, with the Link on velodex\'s path', async () => {
    const image = buildImage({ seed: 'pt-tags', layers: 1, bigFileSize: 1024 });
    for (const tag of ['a', 'b', 'c']) await seed(s, 'team/tags', tag, image);
    expect(out(await crane(s, ['ls', `${s.host}/${CACHE}/team/tags`])).split('\n').sort()).toEqual(['a', 'b', 'c']);
    const page = await get(`${s.server.url}/v2/${CACHE}/team/tags/tags/list?n=1`);
    expect(page.status).toBe(200);
    expect(JSON.parse(page.body.toString('utf8'))).toEqual({ name: `${CACHE}/team/tags`, tags: ['a'] });
    expect(page.headers.get('link')).toMatch(new RegExp(`^</v2/${CACHE}/team/tags/tags/list\\?(n=1&last=a|last=a&n=1)>; rel="next"$`));
  });

  it('a manifest or blob unknown upstream is MANIFEST_UNKNOWN / BLOB_UNKNOWN', async () => {
    const m = await get(`${s.server.url}/v2/${CACHE}/team/nothing/manifests/v1`);
    expect(m.status).toBe(404);
    expect(codeOf(m)).toBe('MANIFEST_UNKNOWN');
    const b = await get(`${s.server.url}/v2/${CACHE}/team/nothing/blobs/sha256:${'0'.repeat(64)}`);
    expect(b.status).toBe(404);
    expect(codeOf(b)).toBe('BLOB_UNKNOWN');
  });

  it('a blob corrupted in transit breaks the transfer, is stored nowhere and counted rejected', async () => {
    const image = buildImage({ seed: 'pt-corrupt', layers: 1, bigFileSize: 256 * 1024 });
    await seed(s, 'team/corrupt', 'v1', image);
    const layer = image.layers[0]!;
    const path = `/v2/team/corrupt/blobs/${layer.descriptor.digest}`;
    const before = await cacheStats(s);
    s.proxy.on(path, { kind: 'corrupt' }, 1);

    const bad = await run(tool('curl'), ['-sS', '-o', '/dev/null', `${s.server.url}/v2/${CACHE}/team/corrupt/blobs/${layer.descriptor.digest}`], { allowFailure: true });
    expect(bad.code).not.toBe(0);
    expect((await cacheStats(s)).rejected - before.rejected).toBe(1);

    const from = s.proxy.requests.length;
    const good = await get(`${s.server.url}/v2/${CACHE}/team/corrupt/blobs/${layer.descriptor.digest}`);
    expect(good.status).toBe(200);
    expect(good.body.equals(layer.bytes)).toBe(true);
    expect(countOf(since(s, from), 'GET', path)).toBe(1);
  });

  it('a manifest whose bytes disagree with the digest is 400 MANIFEST_INVALID and not stored', async () => {
    const image = buildImage({ seed: 'pt-bad-manifest', layers: 1, bigFileSize: 1024 });
    await seed(s, 'team/badmanifest', 'v1', image);
    const before = await cacheStats(s);
    // A flipped byte in the middle of the JSON: still text, but another digest.
    s.proxy.on('/v2/team/badmanifest/manifests/v1', { kind: 'corrupt', at: 30 }, 1);
    const bad = await get(`${s.server.url}/v2/${CACHE}/team/badmanifest/manifests/v1`);
    expect(bad.status).toBe(400);
    expect(codeOf(bad)).toBe('MANIFEST_INVALID');
    expect((await cacheStats(s)).rejected - before.rejected).toBe(1);
    // Nothing stored: by digest it is pulled (and verified) again.
    const from = s.proxy.requests.length;
    expect(out(await crane(s, ['digest', `${s.host}/${CACHE}/team/badmanifest:v1`]))).toBe(image.manifest.descriptor.digest);
    expect(countOf(since(s, from), 'GET', '/v2/team/badmanifest/manifests/v1')).toBe(1);
  });

  it('an upstream that dies mid-blob breaks the client\'s transfer and leaves nothing stored', async () => {
    const image = buildImage({ seed: 'pt-drop', layers: 1, bigFileSize: 512 * 1024 });
    await seed(s, 'team/drop', 'v1', image);
    const layer = image.layers[0]!;
    const path = `/v2/team/drop/blobs/${layer.descriptor.digest}`;
    s.proxy.on(path, { kind: 'drop', afterBytes: 100_000 }, 1);
    const url = `${s.server.url}/v2/${CACHE}/team/drop/blobs/${layer.descriptor.digest}`;
    const bad = await run(tool('curl'), ['-sS', '-o', '/dev/null', url], { allowFailure: true });
    expect(bad.code).not.toBe(0);

    const from = s.proxy.requests.length;
    const again = await get(url);
    expect(again.status, again.body.subarray(0, 300).toString()).toBe(200);
    expect(again.body.equals(layer.bytes)).toBe(true);
    expect(since(s, from).filter((r) => r.endsWith(path))).toEqual([`GET ${path}`]);
  });

  it('HEAD and Range on a miss answer from the upstream and store nothing', async () => {
    const image = buildImage({ seed: 'pt-range', layers: 1, bigFileSize: 64 * 1024 });
    await seed(s, 'team/range', 'v1', image);
    const layer = image.layers[0]!;
    const path = `/v2/team/range/blobs/${layer.descriptor.digest}`;
    const url = `${s.server.url}/v2/${CACHE}/team/range/blobs/${layer.descriptor.digest}`;

    const head = await get(url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(layer.bytes.length));
    expect(head.headers.get('docker-content-digest')).toBe(layer.descriptor.digest);
    const part = await get(url, { headers: { range: 'bytes=0-9' } });
    expect(part.status).toBe(206);
    expect(part.body.equals(layer.bytes.subarray(0, 10))).toBe(true);
    expect(part.headers.get('content-range')).toBe(`bytes 0-9/${layer.bytes.length}`);

    const from = s.proxy.requests.length;
    expect((await get(url, { method: 'HEAD' })).status).toBe(200);
    // Still not stored: asked upstream again.
    expect(countOf(since(s, from), 'HEAD', path)).toBe(1);
  });

  it('serves the stored tag while the upstream fails (stale_served); with nothing stored, 502 UNKNOWN (upstream_errors)', async () => {
    const image = buildImage({ seed: 'pt-stale', layers: 1, bigFileSize: 1024 });
    await seed(s, 'team/stale', 'v1', image);
    const ref = `${s.host}/${CACHE}/team/stale:v1`;
    expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
    const before = await cacheStats(s);

    s.proxy.on(/^\/v2\/team\/(stale|never)\//, { kind: 'status', status: 503 });
    try {
      expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
      const mid = await cacheStats(s);
      expect(mid.stale_served - before.stale_served).toBeGreaterThanOrEqual(1);
      const status = (await (await fetch(`${s.server.url}/+status`)).json()) as { indexes: Array<{ name: string; upstream?: { offline: boolean } }> };
      expect(status.indexes.find((ix) => ix.name === 'cache')?.upstream?.offline).toBe(true);

      const none = await get(`${s.server.url}/v2/${CACHE}/team/never/manifests/v1`);
      expect(none.status).toBe(502);
      expect(codeOf(none)).toBe('UNKNOWN');
      expect((await cacheStats(s)).upstream_errors - mid.upstream_errors).toBe(1);
    } finally {
      s.proxy.clear();
    }
  });

  it('the layer browser of a cached index fetches the layer through the same single fetch', async () => {
    const image = buildImage({ seed: 'pt-contents', layers: 1, bigFileSize: 1024 });
    await seed(s, 'team/contents', 'v1', image);
    const layer = image.layers[0]!;
    const from = s.proxy.requests.length;
    const listing = await get(`${s.server.url}/v2/${CACHE}/team/contents/blobs/${layer.descriptor.digest}/contents`);
    expect(listing.status).toBe(200);
    const paths = (JSON.parse(listing.body.toString('utf8')) as { members: Array<{ path: string }> }).members.map((m) => m.path);
    expect(paths).toContain('etc/velodex/layer-0.txt');
    const blob = await get(`${s.server.url}/v2/${CACHE}/team/contents/blobs/${layer.descriptor.digest}`);
    expect(blob.status).toBe(200);
    expect(blob.body.equals(layer.bytes)).toBe(true);
    expect(countOf(since(s, from), 'GET', `/v2/team/contents/blobs/${layer.descriptor.digest}`)).toBe(1);
  });

  describe('the token handshake', () => {
    it('reuses a token while it lives and fetches a new one once it expired (expires_in), and reads access_token', async () => {
      const image = buildImage({ seed: 'pt-expiry', layers: 1, bigFileSize: 1024 });
      await seed(s, 'team/expiry', 'v1', image);
      await seed(s, 'team/expiry-short', 'v1', image);
      const fetchesFor = (repo: string) => () => s.tokens.fetches.filter((f) => f.user === 'mirror' && f.scopes.includes(pullScope(repo))).length;
      try {
        // A token that lives for minutes serves both pulls: one fetch, however slow the machine.
        s.tokens.set({ expiresInSecs: 300, field: 'access_token' });
        const ref = `${s.host}/${CACHE}/team/expiry:v1`;
        expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
        expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
        expect(fetchesFor('team/expiry')()).toBe(1);
        // Kept until 5 s before expiry: a 6 s token lives for 1 s, and is past it 1.5 s after the pull that fetched it.
        s.tokens.set({ expiresInSecs: 6, field: 'access_token' });
        const short = `${s.host}/${CACHE}/team/expiry-short:v1`;
        const mine = fetchesFor('team/expiry-short');
        expect(out(await crane(s, ['digest', short]))).toBe(image.manifest.descriptor.digest);
        expect(mine()).toBe(1);
        await new Promise((r) => setTimeout(r, 1500));
        expect(out(await crane(s, ['digest', short]))).toBe(image.manifest.descriptor.digest);
        expect(mine()).toBe(2);
      } finally {
        s.tokens.set({ expiresInSecs: 300, field: 'token' });
      }
    });

    it('retries once with a fresh token after a 401, for the scope the challenge names', async () => {
      const image = buildImage({ seed: 'pt-retry', layers: 1, bigFileSize: 1024 });
      await seed(s, 'team/retry', 'v1', image);
      const ref = `${s.host}/${CACHE}/team/retry:v1`;
      expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
      const before = s.tokens.fetches.length;
      const challenge = (scope: string, error: string) => ({
        'www-authenticate': `Bearer realm="${s.tokens.realm}",service="${s.tokens.service}",scope="${scope}",error="${error}"`,
      });
      s.proxy.on('/v2/team/retry/manifests/v1', { kind: 'status', status: 401, headers: challenge(pullScope('team/retry'), 'invalid_token') }, 1);
      expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
      expect(s.tokens.fetches.slice(before).map((f) => f.scopes)).toEqual([[pullScope('team/retry')]]);

      const wider = 'repository:team/retry:pull,push';
      s.proxy.on('/v2/team/retry/manifests/v1', { kind: 'status', status: 401, headers: challenge(wider, 'insufficient_scope') }, 1);
      expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
      expect(s.tokens.fetches.slice(before).map((f) => f.scopes)).toEqual([[pullScope('team/retry')], [wider]]);

      // Only once: a second 401 is the answer (here: the stored tag is served stale).
      s.proxy.on('/v2/team/retry/manifests/v1', { kind: 'status', status: 401, headers: challenge(pullScope('team/retry'), 'invalid_token') }, 2);
      const stale = (await cacheStats(s)).stale_served;
      expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
      expect((await cacheStats(s)).stale_served - stale).toBe(1);
      s.proxy.clear();
    });
  });

  it('upstream_concurrency caps the fetches of a cached index: a second one waits for the slot', async () => {
    const a = buildImage({ seed: 'pt-narrow-a', layers: 1, bigFileSize: 64 * 1024 });
    const b = buildImage({ seed: 'pt-narrow-b', layers: 1, bigFileSize: 1024 });
    await seed(s, 'team/narrow-a', 'v1', a);
    await seed(s, 'team/narrow-b', 'v1', b);
    // The scheme and a token first, so the stalled fetch below is the only one in flight.
    expect((await get(`${s.server.url}/v2/narrow/team/narrow-a/manifests/v1`)).status).toBe(200);
    expect((await get(`${s.server.url}/v2/narrow/team/narrow-b/manifests/v1`)).status).toBe(200);
    const layer = a.layers[0]!;
    s.proxy.on(`/v2/team/narrow-a/blobs/${layer.descriptor.digest}`, { kind: 'stall', afterBytes: 1000 }, 1);
    const stalled = s.proxy.stalled(s.proxy.stalledCount() + 1);
    const slow = get(`${s.server.url}/v2/narrow/team/narrow-a/blobs/${layer.descriptor.digest}`);
    await stalled;
    const other = `/v2/team/narrow-b/blobs/${b.config.descriptor.digest}`;
    const waiting = get(`${s.server.url}/v2/narrow/team/narrow-b/blobs/${b.config.descriptor.digest}`);
    await new Promise((r) => setTimeout(r, 500));
    expect(s.proxy.count(other)).toBe(0);
    const metrics = await (await fetch(`${s.server.url}/metrics`)).text();
    expect(metrics).toMatch(/velodex_upstream_inflight_fetches\{index="narrow"[^}]*\} 1\b/);
    s.proxy.release();
    const [first, second] = await Promise.all([slow, waiting]);
    expect(first.body.equals(layer.bytes)).toBe(true);
    expect(second.body.equals(b.config.bytes)).toBe(true);
    expect(s.proxy.count(other)).toBe(1);
  });

  it('a blob another index already stored costs a second cached index one HEAD, not a download', async () => {
    const image = buildImage({ seed: 'pt-adopt', layers: 1, bigFileSize: 128 * 1024 });
    await seed(s, 'team/adopt', 'v1', image);
    const layer = image.layers[0]!;
    const path = `/v2/team/adopt/blobs/${layer.descriptor.digest}`;
    expect((await get(`${s.server.url}/v2/${CACHE}/team/adopt/blobs/${layer.descriptor.digest}`)).body.equals(layer.bytes)).toBe(true);
    // The client's stream ends as the digest verifies; the blob is published right after.
    await until('the blob to be stored', async () => {
      const before = s.proxy.requests.length;
      await get(`${s.server.url}/v2/${CACHE}/team/adopt/blobs/${layer.descriptor.digest}`, { method: 'HEAD' });
      return s.proxy.requests.length === before ? true : undefined;
    });
    const from = s.proxy.requests.length;
    const second = await get(`${s.server.url}/v2/narrow/team/adopt/blobs/${layer.descriptor.digest}`);
    expect(second.status).toBe(200);
    expect(second.body.equals(layer.bytes)).toBe(true);
    expect(since(s, from).filter((r) => r.endsWith(path))).toEqual([`HEAD ${path}`]);
    // Stored bytes under a name the upstream lacks them: unknown, and still not this index's.
    const config = image.config.descriptor.digest;
    expect((await get(`${s.server.url}/v2/${CACHE}/team/adopt/blobs/${config}`)).status).toBe(200);
    await until('the config blob to be stored', async () => {
      const before = s.proxy.requests.length;
      await get(`${s.server.url}/v2/${CACHE}/team/adopt/blobs/${config}`, { method: 'HEAD' });
      return s.proxy.requests.length === before ? true : undefined;
    });
    expect((await get(`${s.server.url}/v2/narrow/team/elsewhere/blobs/${config}`)).status).toBe(404);
    expect((await get(`${s.server.url}/v2/narrow/team/adopt/blobs/${config}`)).status).toBe(200);
  });

  // Last: it restarts the suite's server.
  it('a tag the upstream confirmed is served by a restarted process (or another replica) without asking the upstream again', async () => {
    const image = buildImage({ seed: 'pt-confirmed', layers: 2, bigFileSize: 64 * 1024 });
    await seed(s, 'team/confirmed', 'v1', image);
    const ref = `${s.host}/confirmed/team/confirmed:v1`;
    await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'confirmed-1')]);
    // The confirmation is stored with the tag, not kept in the process that asked.
    const { dataDir, port } = s.server;
    const config = readFileSync(join(dataDir, 'velodex.toml'), 'utf8');
    await s.server.stop();
    s.server = await startVelodex({ config, dataDir, port });
    const from = s.proxy.requests.length;

    await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'confirmed-2')]);

    expect(layoutMismatches(readLayout(join(s.work, 'confirmed-2')), allBlobs(image))).toEqual([]);
    // No tag lookup upstream. (A blob may be fetched again: the first server may have been stopped
    // before it published the last one, which the client had whole as its digest verified.)
    expect(since(s, from).filter((r) => r.includes('/manifests/'))).toEqual([]);
  });
});
