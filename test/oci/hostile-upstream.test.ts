/**
 * A cached OCI index in front of hostile upstreams (servers of the test's own, test/support/
 * hostile-server.ts): where the index's upstream credentials may go, and how much of an
 * upstream's answer velodex reads. crane and skopeo pull through velodex as users would.
 *
 * - A blob redirect's target (a CDN) that answers 401 with a Bearer realm is never asked: the
 *   realm is not the upstream registry's own, so the credentials never reach it, and the upstream
 *   keeps being asked without a token afterwards.
 * - An https registry naming a plain-http realm is refused (credentials are never downgraded).
 * - A realm on another host than the registry's, at a loopback address (standing for an internal
 *   service), is never asked, unless the index names that host in `upstream_hosts`.
 * - A token realm and a tag list that answer without end are cut after a bound.
 */
import { mkdirSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oci, toml, type CachedOptions } from '../support/config.js';
import { testCertificates } from '../support/certificates.js';
import { endlessBody, startHostile, type HostileServer } from '../support/hostile-server.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const USER = 'mirror';
const PASSWORD = 'mirror-secret-password';
const BASIC = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
const GOOD_TOKEN = 'token-the-registry-issued';

interface RegistryHooks {
  /** Whether a request may have what it asks; otherwise 401 with `challenge`. */
  authorized?: (req: IncomingMessage) => boolean;
  challenge?: string | (() => string);
  /** Answers a blob GET instead of the registry (true when it did). */
  blob?: (req: IncomingMessage, res: ServerResponse, digest: string) => boolean;
  tags?: (req: IncomingMessage, res: ServerResponse) => void;
  token?: (req: IncomingMessage, res: ServerResponse) => void;
}

/** A minimal registry serving `images` (repository -> image, tag `v1`) with the test's hooks. */
function registry(images: Record<string, Image>, hooks: RegistryHooks = {}) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '').split('?')[0]!;
    if (path === '/token' && hooks.token) return hooks.token(req, res);
    if (!path.startsWith('/v2/')) return void res.writeHead(404).end();
    if (hooks.authorized && !hooks.authorized(req)) {
      const challenge = typeof hooks.challenge === 'function' ? hooks.challenge() : hooks.challenge;
      res.writeHead(401, { 'www-authenticate': challenge ?? 'Basic realm="x"', 'content-type': 'application/json' });
      return void res.end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
    }
    if (path === '/v2/' || path === '/v2') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    const m = /^\/v2\/(.+)\/(manifests|blobs|tags)\/(.+)$/.exec(path);
    const image = m ? images[m[1]!] : undefined;
    if (!m || !image) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"NAME_UNKNOWN","message":"no"}]}');
    const [, , kind, ref] = m;
    if (kind === 'tags') {
      if (hooks.tags) return hooks.tags(req, res);
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: m[1], tags: ['v1'] }));
    }
    if (kind === 'manifests' && (ref === 'v1' || ref === image.manifest.descriptor.digest)) {
      const body = image.manifest.bytes;
      res.writeHead(200, { 'content-type': image.manifest.descriptor.mediaType, 'docker-content-digest': image.manifest.descriptor.digest, 'content-length': body.length });
      return void res.end(req.method === 'HEAD' ? undefined : body);
    }
    const blob = allBlobs(image).find((b) => b.descriptor.digest === ref);
    if (kind === 'blobs' && blob) {
      if (hooks.blob?.(req, res, ref!)) return;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'docker-content-digest': ref, 'content-length': blob.bytes.length });
      return void res.end(req.method === 'HEAD' ? undefined : blob.bytes);
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no"}]}');
  };
}

/** A token realm that hands `GOOD_TOKEN` to the mirror's credentials. */
function realm(req: IncomingMessage, res: ServerResponse): void {
  if (req.headers.authorization !== BASIC) return void res.writeHead(401).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: GOOD_TOKEN, expires_in: 300 }));
}
const bearerOk = (req: IncomingMessage) => req.headers.authorization === `Bearer ${GOOD_TOKEN}`;

const work = tempDir('velodex-hostile-oci-');
const servers: HostileServer[] = [];
let velodex: Velodex;
const images = {
  redirected: buildImage({ seed: 'hostile-redirected', layers: 1, bigFileSize: 2048 }),
  plain: buildImage({ seed: 'hostile-plain', layers: 1, bigFileSize: 2048 }),
  tls: buildImage({ seed: 'hostile-tls', layers: 1, bigFileSize: 2048 }),
  elsewhere: buildImage({ seed: 'hostile-elsewhere', layers: 1, bigFileSize: 2048 }),
};
/** Bytes the endless answers wrote before velodex stopped reading. */
const endless = { token: Promise.resolve(-1), tags: Promise.resolve(-1) };
let cdn: HostileServer;
let cdnRealm: HostileServer;
let plainRealm: HostileServer;
let internalRealm: HostileServer;
let redirecting: HostileServer;

async function hostile(...args: Parameters<typeof startHostile>): Promise<HostileServer> {
  const s = await startHostile(...args);
  servers.push(s);
  return s;
}

beforeAll(async () => {
  const certs = testCertificates(work);
  cdnRealm = await hostile(realm);
  // The CDN the registry's blob GETs redirect to; it asks for a token of a realm of its choosing.
  cdn = await hostile((_req, res) => {
    res.writeHead(401, { 'www-authenticate': `Bearer realm="${cdnRealm.url}/token",service="cdn"` }).end();
  });
  redirecting = await hostile(
    registry(
      { 'team/app': images.redirected, 'team/plain': images.plain },
      {
        blob: (req, res, digest) => {
          if (!(req.url ?? '').startsWith('/v2/team/app/')) return false;
          res.writeHead(307, { location: `${cdn.url}/blobs/${digest}` }).end();
          return true;
        },
      },
    ),
  );
  plainRealm = await hostile(realm);
  const downgrading = await hostile(registry({ 'team/tls': images.tls }, { authorized: bearerOk, challenge: `Bearer realm="${plainRealm.url}/token",service="tls"` }), { tls: certs });
  // The same registry with a realm of its own on https: the control that https works at all.
  const secure: HostileServer = await hostile(
    registry({ 'team/tls': images.tls }, { authorized: bearerOk, challenge: () => `Bearer realm="${secure.url}/token",service="tls"`, token: realm }),
    { tls: certs },
  );
  internalRealm = await hostile(realm, { host: '127.0.0.2' });
  const elsewhere = await hostile(registry({ 'team/elsewhere': images.elsewhere }, { authorized: bearerOk, challenge: `Bearer realm="${internalRealm.url}/token",service="x"` }));
  const endlessRealm = await hostile((_req, res) => {
    endless.token = endlessBody(res, 200, 'application/json', '{"token":"');
  });
  const endlessTokens = await hostile(registry({ 'team/plain': images.plain }, { authorized: (req) => req.headers.authorization?.startsWith('Bearer ') === true, challenge: `Bearer realm="${endlessRealm.url}/token",service="x"` }));
  const endlessTags = await hostile(
    registry(
      { 'team/plain': images.plain },
      {
        tags: (_req, res) => {
          endless.tags = endlessBody(res, 200, 'application/json', '{"name":"team/plain","tags":["');
        },
      },
    ),
  );
  const cached = (name: string, upstream: string, o: CachedOptions = {}) =>
    oci.cached(name, upstream, { route: name, credentials: { username: USER, password: PASSWORD }, ...o });
  velodex = await startVelodex({
    env: { NODE_EXTRA_CA_CERTS: certs.caFile },
    config: toml(
      cached('redirected', redirecting.url),
      cached('downgrade', downgrading.url),
      cached('secure', secure.url),
      cached('elsewhere', elsewhere.url),
      cached('elsewhere-allowed', elsewhere.url, { upstreamHosts: ['127.0.0.2'] }),
      cached('endless-token', endlessTokens.url),
      cached('endless-tags', endlessTags.url),
    ),
  });
}, 120_000);

afterAll(async () => {
  await velodex?.stop();
  await Promise.all(servers.map((s) => s.close()));
});

const host = () => `127.0.0.1:${velodex.port}`;
function crane(args: string[]) {
  return run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, allowFailure: true, timeoutMs: 120_000 });
}
function pull(ref: string, name: string) {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  return crane(['pull', '--format', 'oci', ref, dir]);
}

describe('a cached OCI index sends its upstream credentials only where the registry itself sends its clients', () => {
  it('a 401 from the host a blob redirect leads to is not answered: its realm never sees the credentials, now or later', async () => {
    const res = await pull(`${host()}/redirected/team/app:v1`, 'redirected');
    expect(res.code).not.toBe(0);
    expect(cdn.requests.length).toBeGreaterThan(0);
    expect(cdnRealm.requests).toEqual([]);
    // Later pulls of the same upstream go out as before: no realm learnt from the CDN, no token.
    const before = redirecting.requests.length;
    const ok = await pull(`${host()}/redirected/team/plain:v1`, 'plain');
    expect(ok.stderr).toBe('');
    expect(layoutMismatches(readLayout(join(work, 'plain')), allBlobs(images.plain))).toEqual([]);
    const later = redirecting.requests.slice(before);
    expect(later.length).toBeGreaterThan(0);
    expect(later.filter((r) => r.authorization !== undefined)).toEqual([]);
    expect(cdnRealm.requests).toEqual([]);
    // The CDN got no credentials either.
    expect(cdn.requests.filter((r) => r.authorization !== undefined)).toEqual([]);
  });

  it('a plain-http realm of an https registry is never asked; an https realm of its own is', async () => {
    const res = await run(tool('skopeo'), ['inspect', '--raw', '--tls-verify=false', `docker://${host()}/downgrade/team/tls:v1`], { allowFailure: true, timeoutMs: 120_000 });
    expect(res.code).not.toBe(0);
    expect(plainRealm.requests).toEqual([]);
    const status = await (await fetch(`${velodex.url}/v2/downgrade/team/tls/manifests/v1`)).json() as { errors: { code: string; message: string }[] };
    expect(status.errors[0]!.code).toBe('UNKNOWN');
    expect(status.errors[0]!.message).toContain('plain http');
    expect(plainRealm.requests).toEqual([]);

    const secure = await run(tool('skopeo'), ['inspect', '--raw', '--tls-verify=false', `docker://${host()}/secure/team/tls:v1`], { timeoutMs: 120_000 });
    expect(JSON.parse(secure.stdout)).toEqual(JSON.parse(images.tls.manifest.bytes.toString('utf8')));
  });

  it('a realm on a loopback address of another host is never asked, unless upstream_hosts names it', async () => {
    const res = await pull(`${host()}/elsewhere/team/elsewhere:v1`, 'elsewhere');
    expect(res.code).not.toBe(0);
    expect(internalRealm.requests).toEqual([]);
    const answer = await (await fetch(`${velodex.url}/v2/elsewhere/team/elsewhere/manifests/v1`)).json() as { errors: { message: string }[] };
    expect(answer.errors[0]!.message).toContain('upstream_hosts');
    expect(internalRealm.requests).toEqual([]);

    const allowed = await pull(`${host()}/elsewhere-allowed/team/elsewhere:v1`, 'elsewhere-allowed');
    expect(allowed.stderr).toBe('');
    expect(layoutMismatches(readLayout(join(work, 'elsewhere-allowed')), allBlobs(images.elsewhere))).toEqual([]);
    expect(internalRealm.requests.length).toBeGreaterThan(0);
  });
});

describe('a cached OCI index reads a bounded amount of any upstream answer', () => {
  it('a token realm that answers without end is cut after a small bound', async () => {
    const res = await pull(`${host()}/endless-token/team/plain:v1`, 'endless-token');
    expect(res.code).not.toBe(0);
    const written = await endless.token;
    // 64 KiB are read; the rest is what socket buffers took in before the connection was cut.
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(32 * 1024 * 1024);
  });

  it('a tag list that answers without end is cut after 16 MiB', async () => {
    const res = await crane(['ls', `${host()}/endless-tags/team/plain`]);
    expect(res.code).not.toBe(0);
    const written = await endless.tags;
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(64 * 1024 * 1024);
    // velodex is still there and serves the rest of the upstream.
    expect((await pull(`${host()}/endless-tags/team/plain:v1`, 'after-tags')).stderr).toBe('');
  });
});
