/**
 * `GET /v2/_catalog`: every repository of the OCI indexes as `<route>/<repo>`, sorted, paged with
 * `n`/`last` and `Link`. More repositories than one server page (1000, what crane asks for), so
 * `crane catalog` has to follow the links.
 */
import { describe, expect, it } from 'vitest';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { basicAuth } from '../support/velodex.js';
import { digestOf, imageManifest, Registry, sha256 } from './api-support.js';
import { clientSuite } from './client-setup.js';

const c = clientSuite('catalog');
const REPOS = 1010;
const names = Array.from({ length: REPOS }, (_, i) => `root/oci/cat/r${String(i).padStart(4, '0')}`);

/** Pushes one small manifest (and its config, as blobs are per repository) to each repository, a few at a time. */
async function pushAll(reg: Registry): Promise<string> {
  const config = '{"os":"linux"}';
  const body = imageManifest(sha256(config), config.length, []);
  for (let i = 0; i < names.length; i += 16) {
    const batch = names.slice(i, i + 16).map(async (name) => {
      await reg.pushBlob(name, config);
      const res = await reg.pushManifest(name, 'v1', body);
      expect(res.status, name).toBe(201);
    });
    await Promise.all(batch);
  }
  return body;
}

async function page(path: string): Promise<{ repositories: string[]; link: string | null }> {
  const res = await fetch(`${c.server.url}${path}`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await res.json()) as { repositories: string[] };
  return { repositories: body.repositories, link: res.headers.get('link') };
}

describe('catalog', () => {
  let reg: Registry;
  let manifest: string;

  it('lists nothing before a push', async () => {
    reg = new Registry(c.server.url, basicAuth(c.token));
    expect(await page('/v2/_catalog')).toEqual({ repositories: [], link: null });
  });

  it('crane catalog lists every repository across pages', async () => {
    manifest = await pushAll(reg);
    const listed = (await run(tool('crane'), ['catalog', '--insecure', c.host], { env: c.env, timeoutMs: 120_000 })).stdout.trim().split('\n');
    expect(listed).toEqual(names);
  });

  it('pages with n and last, linking to the next page while truncated', async () => {
    const seen: string[] = [];
    const links: string[] = [];
    let path: string | null = '/v2/_catalog?n=400';
    while (path) {
      const { repositories, link } = await page(path);
      expect(repositories.length).toBeLessThanOrEqual(400);
      seen.push(...repositories);
      if (link) links.push(link);
      path = link ? (/^<([^>]+)>; rel="next"$/.exec(link)?.[1] ?? null) : null;
    }
    expect(seen).toEqual(names);
    expect(links).toEqual([
      `</v2/_catalog?n=400&last=${encodeURIComponent(names[399] ?? '')}>; rel="next"`,
      `</v2/_catalog?n=400&last=${encodeURIComponent(names[799] ?? '')}>; rel="next"`,
    ]);
    expect(await page(`/v2/_catalog?n=2&last=${names[5]}`)).toEqual({
      repositories: [names[6], names[7]],
      link: `</v2/_catalog?n=2&last=${encodeURIComponent(names[7] ?? '')}>; rel="next"`,
    });
    // Without n, a page holds at most the server's 1000.
    const first = await page('/v2/_catalog');
    expect(first.repositories).toEqual(names.slice(0, 1000));
    expect(first.link).toBe(`</v2/_catalog?n=1000&last=${encodeURIComponent(names[999] ?? '')}>; rel="next"`);
    expect(await page(`/v2/_catalog?last=${names.at(-1)}`)).toEqual({ repositories: [], link: null });
  });

  it('drops a repository whose last manifest is deleted', async () => {
    const name = names[3] ?? '';
    expect((await reg.fetch(`/v2/${name}/manifests/${digestOf(manifest)}`, { method: 'DELETE' })).status).toBe(202);
    const { repositories } = await page(`/v2/_catalog?n=3&last=${names[1]}`);
    expect(repositories).toEqual([names[2], names[4], names[5]]);
  });
});
