/**
 * `GET /metrics` after real traffic: twine uploads, pip installs (pages, PEP 658 metadata,
 * downloads, bytes), crane pushes and pulls (manifests, blobs). Prometheus's own `promtool check
 * metrics` accepts the exposition, every spec metric is there with the labels `index`,
 * `ecosystem`, `role`, and the values are the traffic's.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { CLEAN_ENV, freshPipVenv } from '../python/fixtures/clients.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { cached, hosted, metrics, oci, toml } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'metrics-upload-token-5e2a';
let server: Velodex;
let demo: BuiltProject;

beforeAll(async () => {
  demo = await buildProject('metricsdemo', '1.0');
  server = await startVelodex({
    config: toml(
      hosted('hosted', { route: 'team/py', token: TOKEN }),
      cached('mirror', 'http://127.0.0.1:9/simple/', { route: 'team/mirror', upstreamConcurrency: 4 }),
      oci.hosted('images', { route: 'team/images', token: TOKEN }),
    ),
  });
});

afterAll(async () => {
  await server?.stop();
});

async function scrape(): Promise<string> {
  const res = await fetch(`${server.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** The URL of the uploaded wheel's PEP 658 metadata sibling, from the JSON project page. */
async function metadataUrl(): Promise<string> {
  const page = await fetch(`${server.url}/team/py/simple/metricsdemo/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
  const { files } = (await page.json()) as { files: { url: string }[] };
  return `${new URL(files[0]!.url, page.url).href}.metadata`;
}

/** The value of one sample, by metric name and exact label set (in the exposition's order). */
function sample(text: string, name: string, labels: string): number {
  const key = labels === '' ? name : `${name}{${labels}}`;
  const line = text.split('\n').find((l) => l.startsWith(`${key} `));
  if (!line) throw new Error(`no sample ${key} in:\n${text.split('\n').filter((l) => l.startsWith(name)).join('\n')}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

const PY = 'index="team/py",ecosystem="python",role="hosted"';
const IMAGES = 'index="team/images",ecosystem="oci",role="hosted"';
const MIRROR = 'index="team/mirror",ecosystem="python",role="cached"';

describe('/metrics', () => {
  it('counts real pip and crane traffic per index, and promtool accepts the exposition', async () => {
    await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/team/py/`, '-u', '__token__', '-p', TOKEN, demo.wheel], {
      env: CLEAN_ENV,
    });
    const venv = await freshPipVenv();
    await run(join(venv, 'bin', 'pip'), ['install', '--index-url', `${server.url}/team/py/simple/`, 'metricsdemo'], { env: CLEAN_ENV });

    const home = tempDir('velodex-metrics-crane-');
    const env = { HOME: home, DOCKER_CONFIG: join(home, 'docker') };
    const host = `127.0.0.1:${server.port}`;
    await run(tool('crane'), ['auth', 'login', host, '-u', '__token__', '--password-stdin', '--insecure'], { env, input: TOKEN });
    const image = buildImage({ seed: 'metrics' });
    const layout = writeLayout(join(home, 'layout'), [{ tag: 'v1', item: image }]);
    await run(tool('crane'), ['push', layout, `${host}/team/images/app:v1`, '--insecure'], { env });
    await run(tool('crane'), ['pull', '--format', 'oci', `${host}/team/images/app:v1`, join(home, 'pulled'), '--insecure'], { env });

    const text = await scrape();
    const check = await run(tool('promtool'), ['check', 'metrics'], { input: text, allowFailure: true });
    expect(check.code, check.stdout + check.stderr).toBe(0);

    // twine: one file uploaded; crane: one manifest pushed (the unit that makes an image pullable).
    expect(sample(text, 'velodex_index_uploads_total', PY)).toBe(1);
    expect(sample(text, 'velodex_index_uploads_total', IMAGES)).toBe(1);
    // pip: the project page, the PEP 658 metadata sibling, then the wheel, once each.
    expect(sample(text, 'velodex_index_pages_total', PY)).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'velodex_index_metadata_total', PY)).toBe(1);
    expect(sample(text, 'velodex_index_downloads_total', PY)).toBe(1);
    // Bytes served: the wheel and its metadata sibling (read after the scrape, which it counts too).
    const metadata = await (await fetch(await metadataUrl())).arrayBuffer();
    expect(sample(text, 'velodex_index_download_bytes_total', PY)).toBe(statSync(demo.wheel).size + metadata.byteLength);
    // crane pull: the manifest and every blob (config and layers) of the image.
    expect(sample(text, 'velodex_index_pages_total', IMAGES)).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'velodex_index_downloads_total', IMAGES)).toBe(1 + image.layers.length);
    expect(sample(text, 'velodex_index_download_bytes_total', IMAGES)).toBe(image.config.bytes.length + image.layers.reduce((n, l) => n + l.bytes.length, 0));
    // Metadata siblings are a Python fact; the OCI index has no such series.
    expect(text).not.toMatch(/velodex_index_metadata_total\{index="team\/images"/);
    expect(sample(text, 'velodex_requests_total', '')).toBeGreaterThan(0);
  });

  it('has the caching metrics for the cached index only, and its upstream cap', async () => {
    // The upstream is down and nothing is cached: one upstream error.
    expect((await fetch(`${server.url}/team/mirror/simple/anything/`)).status).toBe(502);
    const text = await scrape();
    expect(sample(text, 'velodex_index_upstream_errors_total', MIRROR)).toBe(1);
    for (const name of ['refreshes', 'pages_changed', 'stale_served', 'upstream_errors']) {
      expect(text).not.toContain(`velodex_index_${name}_total{${PY}}`);
    }
    expect(sample(text, 'velodex_upstream_inflight_fetches', MIRROR)).toBe(0);
    expect(sample(text, 'velodex_upstream_rate_limit_denied_total', MIRROR)).toBe(0);
    // Per upstream (its URL as every surface shows it): backing off after the failure, no 429, no pull-limit figures yet.
    const upstream = `${MIRROR},upstream="${displayUrl('http://127.0.0.1:9/simple/')}"`;
    expect(sample(text, 'velodex_upstream_online', upstream)).toBe(0);
    expect(sample(text, 'velodex_upstream_rate_limited_total', upstream)).toBe(0);
    expect(text).not.toContain('velodex_upstream_ratelimit_remaining{');
    expect(text).not.toContain(`velodex_index_uploads_total{${MIRROR}}`);
    // Node's process metrics come along under the prefix, and the request histogram.
    expect(text).toMatch(/^velodex_process_cpu_seconds_total /m);
    expect(text).toMatch(/^velodex_http_request_duration_seconds_bucket\{le="0\.005",method="GET",status="2xx"\} \d+/m);
  });
});

describe('[metrics] enabled = false', () => {
  it('serves no /metrics', async () => {
    const off = await startVelodex({ config: toml(metrics({ enabled: false }), hosted('h', { route: 'h' })) });
    try {
      expect((await fetch(`${off.url}/metrics`)).status).toBe(404);
    } finally {
      await off.stop();
    }
  });
});
