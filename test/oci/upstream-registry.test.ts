/**
 * The cached OCI index's upstream client against small HTTP servers that answer the way
 * registries do: Basic when the upstream asks for Basic (and nothing before it asks), a bearer
 * token never sent to the CDN a blob GET redirects to, and Docker Hub's `library/` names.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../registry/src/config/secret.js';
import type { UpstreamConfig } from '../../registry/src/config/types.js';
import { UpstreamSlots } from '../../registry/src/limits/upstream-slots.js';
import { UpstreamRegistry } from '../../registry/src/oci/read/cached/upstream-registry.js';

interface Seen {
  path: string;
  authorization: string | undefined;
}

function listen(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<{ url: string; seen: Seen[]; server: http.Server }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ path: req.url ?? '', authorization: req.headers.authorization });
    handler(req, res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server })));
}

function index(upstream: string, creds?: { user: string; pass: string }): UpstreamConfig {
  return {
    url: upstream,
    hosts: [],
    failoverOn404: false,
    ...(creds ? { username: new Secret(creds.user, 'inline'), password: new Secret(creds.pass, 'inline') } : {}),
  };
}

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

let basicUpstream: Awaited<ReturnType<typeof listen>>;
let cdn: Awaited<ReturnType<typeof listen>>;
let bearerUpstream: Awaited<ReturnType<typeof listen>>;

beforeAll(async () => {
  basicUpstream = await listen((req, res) => {
    if (req.headers.authorization !== basic('mirror', 'pw')) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="upstream"' }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
  cdn = await listen((_req, res) => res.writeHead(200).end('layer bytes'));
  bearerUpstream = await listen((req, res) => {
    const origin = `http://${req.headers.host}`;
    if (req.url?.startsWith('/token')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: 'tok-1', expires_in: 300 }));
      return;
    }
    if (req.headers.authorization !== 'Bearer tok-1') {
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${origin}/token",service="up"` }).end();
      return;
    }
    res.writeHead(307, { location: `${cdn.url}/signed/blob?sig=abc` }).end();
  });
});

afterAll(async () => {
  for (const s of [basicUpstream, cdn, bearerUpstream]) await new Promise((r) => s.server.close(r));
});

describe('UpstreamRegistry', () => {
  it('answers a Basic challenge with the configured credentials, sending none before it was asked', async () => {
    const up = new UpstreamRegistry(index(basicUpstream.url, { user: 'mirror', pass: 'pw' }), new UpstreamSlots());
    const res = await up.fetch({ repository: 'team/app', path: 'manifests/v1' });
    expect(res.status).toBe(200);
    expect(await text(res.body)).toBe('ok');
    expect(basicUpstream.seen.map((s) => [s.path, s.authorization])).toEqual([
      ['/v2/', undefined],
      ['/v2/team/app/manifests/v1', basic('mirror', 'pw')],
    ]);
    up.close();
  });

  it('follows a blob redirect to another origin without the bearer token', async () => {
    const up = new UpstreamRegistry(index(bearerUpstream.url), new UpstreamSlots());
    const res = await up.fetch({ repository: 'team/app', path: `blobs/sha256:${'a'.repeat(64)}` });
    expect(res.status).toBe(200);
    expect(await text(res.body)).toBe('layer bytes');
    expect(bearerUpstream.seen.at(-1)?.authorization).toBe('Bearer tok-1');
    expect(cdn.seen).toEqual([{ path: '/signed/blob?sig=abc', authorization: undefined }]);
    up.close();
  });

  it("names Docker Hub's official images library/<name>, and no other registry's", () => {
    const slots = new UpstreamSlots();
    for (const hub of ['https://registry-1.docker.io', 'https://index.docker.io/', 'https://docker.io']) {
      const up = new UpstreamRegistry(index(hub), slots);
      expect(up.upstreamName(['alpine'])).toBe('library/alpine');
      expect(up.upstreamName(['bitnami', 'redis'])).toBe('bitnami/redis');
      up.close();
    }
    const ghcr = new UpstreamRegistry(index('https://ghcr.io'), slots);
    expect(ghcr.upstreamName(['alpine'])).toBe('alpine');
    ghcr.close();
  });

  it('takes a configured URL that ends in /v2 as the registry itself', async () => {
    const up = new UpstreamRegistry(index(`${basicUpstream.url}/v2/`, { user: 'mirror', pass: 'pw' }), new UpstreamSlots());
    const res = await up.fetch({ repository: 'team/app', path: 'manifests/v2' });
    expect(res.status).toBe(200);
    res.body.resume();
    expect(basicUpstream.seen.at(-1)?.path).toBe('/v2/team/app/manifests/v2');
    up.close();
  });
});
