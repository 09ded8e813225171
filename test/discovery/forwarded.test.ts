/**
 * `X-Forwarded-Host` and `X-Forwarded-Proto` change the origin of a response only when they come
 * from a trusted proxy, on every surface that writes absolute URLs: the discovery documents, the
 * token realm of OCI's 401 challenges (the version check's, and an `invalid_token` one), and the
 * legacy JSON documents' file URLs. The server trusts 127.0.0.1; the same requests from 127.0.0.2
 * (another loopback address, so another peer) are a client nobody vouches for. A host named in
 * `external_urls` (TLS ended in front of the registry) gets that URL's scheme from any peer.
 */
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectRecords } from '../../registry/src/python/model/records.js';
import { externalUrls, hosted, oci, toml, trustedProxies } from '../support/config.js';
import { rawRequest } from '../support/raw-http.js';
import { serverStores } from '../support/store-probe.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const CONFIG = toml(trustedProxies(['127.0.0.1']), externalUrls(['https://Registry.Example.com']), hosted('hosted', { token: 'forwarded-test-token' }), oci.hosted('oci', { token: 'forwarded-test-token' }));

const TRUSTED = '127.0.0.1';
const UNTRUSTED = '127.0.0.2';
const FORWARDED = { 'x-forwarded-host': 'pkgs.example.com', 'x-forwarded-proto': 'https' };

let server: Velodex;
let own: string;

beforeAll(async () => {
  const dataDir = tempDir();
  // A project for the legacy JSON documents, seeded through the store's interface before the server starts.
  const { blobs, meta } = await serverStores(dataDir);
  const bytes = Buffer.from('bytes of a wheel');
  const info = await blobs.put(Readable.from([bytes]));
  const filename = 'demo_pkg-1.0-py3-none-any.whl';
  await new ProjectRecords(meta).update('hosted', 'demo-pkg', () => ({
    name: 'demo-pkg',
    files: { [filename]: { filename, version: '1.0', kind: 'wheel', sha256: info.digest, size: bytes.length, uploadTime: '2024-01-01T00:00:00Z' } },
  }));
  server = await startVelodex({ dataDir, config: CONFIG });
  own = `http://${new URL(server.url).host}`;
});

afterAll(async () => {
  await server?.stop();
});

function get(path: string, from: string, headers: Record<string, string> = {}) {
  return rawRequest(server.url, path, 'GET', headers, { localAddress: from, timeoutMs: 20_000 });
}

describe('forwarded headers', () => {
  it('change the discovery documents only from a trusted proxy', async () => {
    const trusted = JSON.parse((await get('/root/hosted/+api', TRUSTED, FORWARDED)).body) as { urls: { api: string }; indexes: { urls: { simple: string } }[] };
    expect(trusted.urls.api).toBe('https://pkgs.example.com/+api');
    expect(trusted.indexes[0]?.urls.simple).toBe('https://pkgs.example.com/root/hosted/simple/');

    const untrusted = JSON.parse((await get('/root/hosted/+api', UNTRUSTED, FORWARDED)).body) as typeof trusted;
    expect(untrusted.urls.api).toBe(`${own}/+api`);
    expect(untrusted.indexes[0]?.urls.simple).toBe(`${own}/root/hosted/simple/`);
    expect(JSON.stringify(untrusted)).not.toContain('pkgs.example.com');
  });

  it('give a host of external_urls its https from any peer, with or without its default port; a forwarded scheme from a trusted proxy still wins', async () => {
    for (const host of ['registry.example.com', 'REGISTRY.example.com:443']) {
      const doc = JSON.parse((await get('/root/hosted/+api', UNTRUSTED, { host })).body) as { urls: { api: string }; indexes: { urls: { simple: string } }[] };
      expect(doc.urls.api).toBe('https://registry.example.com/+api');
      expect(doc.indexes[0]?.urls.simple).toBe('https://registry.example.com/root/hosted/simple/');
    }
    // The token realm a docker client is sent to is on the external address too.
    const challenge = (await get('/v2/', UNTRUSTED, { host: 'registry.example.com' })).headers['www-authenticate'];
    expect(challenge).toContain('realm="https://registry.example.com/v2/token"');
    // Another port is another origin: not declared, so the connection's own scheme.
    const other = JSON.parse((await get('/root/hosted/+api', UNTRUSTED, { host: 'registry.example.com:8443' })).body) as { urls: { api: string } };
    expect(other.urls.api).toBe('http://registry.example.com:8443/+api');
    const forwarded = JSON.parse((await get('/root/hosted/+api', TRUSTED, { 'x-forwarded-host': 'registry.example.com', 'x-forwarded-proto': 'http' })).body) as { urls: { api: string } };
    expect(forwarded.urls.api).toBe('http://registry.example.com/+api');
  });

  it('move the realm of the version check\'s challenge only from a trusted proxy', async () => {
    const trusted = await get('/v2/', TRUSTED, FORWARDED);
    expect(trusted.status).toBe(401);
    expect(trusted.headers['www-authenticate']).toBe('Bearer realm="https://pkgs.example.com/v2/token",service="velodex"');

    const untrusted = await get('/v2/', UNTRUSTED, FORWARDED);
    expect(untrusted.status).toBe(401);
    expect(untrusted.headers['www-authenticate']).toBe(`Bearer realm="${own}/v2/token",service="velodex"`);
  });

  it('move the realm of an invalid_token challenge only from a trusted proxy', async () => {
    const bad = { ...FORWARDED, authorization: 'Bearer not-a-token' };
    expect((await get('/v2/root/oci/app/tags/list', TRUSTED, bad)).headers['www-authenticate']).toBe(
      'Bearer realm="https://pkgs.example.com/v2/token",service="velodex",error="invalid_token"',
    );
    expect((await get('/v2/root/oci/app/tags/list', UNTRUSTED, bad)).headers['www-authenticate']).toBe(`Bearer realm="${own}/v2/token",service="velodex",error="invalid_token"`);
  });

  it('change the legacy JSON file URLs only from a trusted proxy', async () => {
    const urls = async (from: string) => {
      const res = await get('/root/hosted/demo-pkg/json', from, FORWARDED);
      expect(res.status, res.body).toBe(200);
      return (JSON.parse(res.body) as { urls: { url: string }[] }).urls.map((u) => u.url);
    };
    expect(await urls(TRUSTED)).toEqual([expect.stringMatching(/^https:\/\/pkgs\.example\.com\/root\/hosted\/files\/[0-9a-f]{64}\/demo_pkg-1\.0-py3-none-any\.whl$/)]);
    expect(await urls(UNTRUSTED)).toEqual([expect.stringMatching(new RegExp(`^${own.replace(/\./g, '\\.')}/root/hosted/files/[0-9a-f]{64}/demo_pkg-1\\.0-py3-none-any\\.whl$`))]);
  });

  it('leave the Host header in force either way', async () => {
    const doc = JSON.parse((await get('/+api', UNTRUSTED, { host: 'pkgs.internal:4433', ...FORWARDED })).body) as { urls: { api: string } };
    expect(doc.urls.api).toBe('http://pkgs.internal:4433/+api');
  });
});
