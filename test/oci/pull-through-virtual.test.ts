/**
 * A virtual OCI index over a hosted index and a cached one (distribution registry upstream with
 * token auth, fault proxy between), the cached member listed first to show that hosted members
 * are asked first anyway: a repository the hosted member holds shadows the upstream's entirely
 * (tags, digests, no upstream lookup at all), other names fall through to the cache, writes land
 * in the upload target, and a cached member whose upstream is down still serves what it stored.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { oci } from '../support/config.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, writeLayout } from '../support/oci-image.js';
import { cacheStats, crane, pullThroughSuite, seed, since } from './pull-through-support.js';

const TEAM_TOKEN = 'team-upload-token';

const s = pullThroughSuite('pull-through-virtual', {
  extraIndexes: () => [
    oci.hosted('team', { route: 'team', token: TEAM_TOKEN }),
    oci.virtual('all', ['cache', 'team'], { route: 'all', uploadTarget: 'team' }),
  ],
});

const out = (r: { stdout: string }) => r.stdout.trim();

async function status(url: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(url);
  const body = await res.text();
  return res.ok ? { status: res.status } : { status: res.status, code: (JSON.parse(body) as { errors: Array<{ code: string }> }).errors[0]?.code };
}

describe('a virtual OCI index over a hosted and a cached member', () => {
  it('falls through to the cached member for names no hosted member holds', async () => {
    const image = buildImage({ seed: 'ptv-base', layers: 2, bigFileSize: 64 * 1024 });
    await seed(s, 'lib/base', '1', image);
    const ref = `${s.host}/all/lib/base:1`;
    expect(out(await crane(s, ['digest', ref]))).toBe(image.manifest.descriptor.digest);
    await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'base')]);
    expect(layoutMismatches(readLayout(join(s.work, 'base')), allBlobs(image))).toEqual([]);
    expect(out(await crane(s, ['ls', `${s.host}/all/lib/base`]))).toBe('1');
  });

  it('a repository the hosted member holds shadows the upstream\'s entirely, and writes land in the upload target', async () => {
    const upstreamImage = buildImage({ seed: 'ptv-upstream-app', layers: 1, bigFileSize: 1024 });
    const teamImage = buildImage({ seed: 'ptv-team-app', layers: 1, bigFileSize: 1024 });
    await seed(s, 'acme/app', '1', upstreamImage);
    await seed(s, 'acme/app', 'only-upstream', upstreamImage);
    await crane(s, ['auth', 'login', s.host, '-u', '__token__', '--password-stdin'], TEAM_TOKEN);
    const layout = writeLayout(join(s.work, 'team-app'), [{ tag: '1', item: teamImage }]);
    await crane(s, ['push', layout, `${s.host}/all/acme/app:1`]);

    // The write went to the hosted member.
    expect(out(await crane(s, ['digest', `${s.host}/team/acme/app:1`]))).toBe(teamImage.manifest.descriptor.digest);

    const from = s.proxy.requests.length;
    expect(out(await crane(s, ['digest', `${s.host}/all/acme/app:1`]))).toBe(teamImage.manifest.descriptor.digest);
    expect(await status(`${s.server.url}/v2/all/acme/app/manifests/only-upstream`)).toEqual({ status: 404, code: 'MANIFEST_UNKNOWN' });
    expect(await status(`${s.server.url}/v2/all/acme/app/manifests/${upstreamImage.manifest.descriptor.digest}`)).toEqual({ status: 404, code: 'MANIFEST_UNKNOWN' });
    expect(await status(`${s.server.url}/v2/all/acme/app/blobs/${upstreamImage.config.descriptor.digest}`)).toEqual({ status: 404, code: 'BLOB_UNKNOWN' });
    expect(out(await crane(s, ['ls', `${s.host}/all/acme/app`]))).toBe('1');
    // Never asked upstream: a private name does not leak to (or get answered by) the upstream.
    expect(since(s, from).filter((r) => r.includes('/acme/app/'))).toEqual([]);

    // The cached index on its own still serves the upstream's image.
    expect(out(await crane(s, ['digest', `${s.host}/cache/acme/app:1`]))).toBe(upstreamImage.manifest.descriptor.digest);
  });

  it('a cached member whose upstream is down still serves what it stored', async () => {
    const image = buildImage({ seed: 'ptv-offline', layers: 2, bigFileSize: 32 * 1024 });
    await seed(s, 'lib/offline', '1', image);
    const ref = `${s.host}/all/lib/offline:1`;
    await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'offline-1')]);
    const before = await cacheStats(s);

    s.proxy.on(() => true, { kind: 'status', status: 503 });
    try {
      await crane(s, ['pull', '--format', 'oci', ref, join(s.work, 'offline-2')]);
      expect(layoutMismatches(readLayout(join(s.work, 'offline-2')), allBlobs(image))).toEqual([]);
      expect((await cacheStats(s)).stale_served - before.stale_served).toBeGreaterThanOrEqual(1);
      // What it never stored: 502, the upstream failure, not a silent 404.
      expect(await status(`${s.server.url}/v2/all/lib/never/manifests/1`)).toEqual({ status: 502, code: 'UNKNOWN' });
    } finally {
      s.proxy.clear();
    }
  });
});
