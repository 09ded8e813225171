/**
 * The web UI in a real browser: Chromium (Debian's, driven by playwright-core) against a real
 * velodex with a hosted, a cached (pypiserver upstream), a virtual (with a deny-projects policy)
 * and an OCI index, holding projects uploaded with twine, one fetched by pip through the virtual
 * index, and images pushed with crane. Every page loads with its own title; the dashboard lists
 * the indexes (also without JavaScript) with their client configuration and no secret; the status
 * page asks for the admin token (the browser's Basic prompt), shows nothing without it, and with
 * it the recent upload and the upstream as scheme and host only (also without JavaScript, through
 * the admin document it links to); the browser searches as the person types, opens the project
 * (versions, files, hashes, METADATA, archive contents and a text preview) and the repository
 * (tag, manifest, layers, a file in a layer); a denied project never shows; the usage page draws
 * its chart and drills down from an index to a project to its files. Keyboard alone gets from the
 * search box to a project. The dashboard and the status page show what each index stores, as
 * /+status says, how full the quota and the budget are, the store's total, whether it was counted
 * exactly, and the last garbage collection. The dashboard's search box finds projects and images in
 * every index, keyboard alone, and opens their browse pages; a summary's markup is shown as text. With the upstream stopped, the dashboard and status say so. A project
 * whose metadata, member names and contents carry markup and script is shown as text, and nothing
 * of it runs. Screenshots are checked to be more than a blank page (and copied to docs/ui/ with
 * UPDATE_SCREENSHOTS=1).
 */
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { Registry, OCI_MANIFEST } from '../oci/api-support.js';
import { admin, cached, hosted, oci, toml, virtual } from '../support/config.js';
import { allBlobs, buildImage, buildIndex, writeLayout } from '../support/oci-image.js';
import { REPO, tool } from '../support/paths.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = tempDir('velodex-ui-shots-');

let server: Velodex;
let upstream: PypiServer;
let browser: Browser;
const token = `velodex_${randomBytes(16).toString('hex')}`;
/** `[admin] token`: the status page asks for it (the browser's Basic prompt). */
const adminToken = `admin_${randomBytes(16).toString('hex')}`;
let project: BuiltProject;
let xssWheel: string;

/** The indexes a platform team would start with: hosted (with a quota), a cache of an upstream (with a budget), both behind one virtual route whose policy denies `evil-*`, and images. */
function uiConfig(upstreamUrl: string): string {
  return toml(
    admin(adminToken),
    hosted('hosted', { token, quota: '1MiB', tokens: [{ name: 'ci-release', secret: 'ui-named-token-secret-4b2c', scopes: ['upload'], projects: ['team-*'] }] }),
    cached('pypi', `${upstreamUrl}/simple/`, { ttlSecs: 1, maxBytes: '20MiB', evictUnusedAfter: '30d' }),
    virtual('dev', ['hosted', 'pypi'], { uploadTarget: 'hosted', policy: { denyProjects: ['evil-*'] } }),
    oci.hosted('oci', { token }),
  );
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: hack/tools.sh installs Debian's chromium`);
  const [demo, mirrored, evil] = await Promise.all([
    buildProject('ui-demo', '1.0', { classifiers: ['Programming Language :: Python :: 3'] }),
    buildProject('ui-upstream', '2.0'),
    buildProject('evil-pkg', '1.0'),
  ]);
  project = demo;
  const upstreamDir = tempDir('velodex-ui-upstream-');
  copyFileSync(mirrored.wheel, join(upstreamDir, mirrored.wheelFilename));
  upstream = await startPypiserver(upstreamDir);
  server = await startVelodex({ config: uiConfig(upstream.url) });
  const twine = (files: string[]) => run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, ...files], { env: { NO_COLOR: '1' } });
  await twine([project.wheel, project.sdist, evil.wheel]);
  // pip through the virtual route: a download of a hosted wheel and of a mirrored one, counted in /+stats.
  for (const name of ['ui-demo', 'ui-upstream']) {
    await run(tool('pip'), ['download', '--no-cache-dir', '--no-deps', '--only-binary', ':all:', '--index-url', `${server.url}/root/dev/simple/`, '--dest', tempDir('velodex-ui-pip-'), name]);
  }
  xssWheel = (await run(tool('python'), [join(REPO, 'test', 'ui', 'xss-wheel.py'), tempDir('velodex-ui-xss-'), 'ui-xss', '6.6.6'])).stdout.trim();
  await twine([xssWheel]);
  const yank = await fetch(`${server.url}/root/hosted/ui-xss/6.6.6/yank?reason=${encodeURIComponent('<script>window.__xss=1</script> bad <b>build</b>')}`, { method: 'PUT', headers: { authorization: basicAuth(token) } });
  expect(yank.status).toBe(200);

  const work = tempDir('velodex-ui-crane-');
  const image = buildImage({ seed: 'ui-image', layers: 2, bigFileSize: 4096 });
  const env = { HOME: work, DOCKER_CONFIG: join(work, '.docker') };
  await run(tool('crane'), ['auth', 'login', `127.0.0.1:${server.port}`, '-u', '__token__', '--password-stdin'], { env, input: token });
  await run(tool('crane'), ['push', '--insecure', writeLayout(join(work, 'src'), [{ tag: 'v1', item: image }]), `127.0.0.1:${server.port}/root/oci/team/app:v1`], { env });
  expect(allBlobs(image).length).toBe(4);

  browser = await chromium.launch({ executablePath: CHROMIUM, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await upstream?.stop();
});

/**
 * A page that fails the test on any script error, dialog or request the CSP refused. `admin`:
 * the browser answers the admin token prompt (any user name, the token as the password).
 */
async function open(path: string, opts: { javaScript?: boolean; admin?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({
    javaScriptEnabled: opts.javaScript ?? true,
    viewport: { width: 1280, height: 900 },
    ...(opts.admin ? { httpCredentials: { username: 'admin', password: adminToken } } : {}),
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`script error: ${err.message}`));
  page.on('dialog', (d) => {
    problems.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  (page as Page & { problems: string[] }).problems = problems;
  await page.goto(`${server.url}${path}`);
  return page;
}

/** The server's `auth_failed` security log lines so far. */
function authFailures(): Array<{ index?: string; reason?: string }> {
  return server
    .logs()
    .split('\n')
    .filter((l) => l.includes('"event":"auth_failed"'))
    .map((l) => JSON.parse(l) as { index?: string; reason?: string });
}

function problemsOf(page: Page): string[] {
  return (page as Page & { problems: string[] }).problems;
}

interface StatusDoc {
  stored: { bytes: number; objects: number; counted_at: string | null };
  gc: { last_run: null | { result: string; blobs_deleted: number; bytes_deleted: number } };
  indexes: Array<{ name: string; stored: { bytes: number; objects: number } | null }>;
}

async function statusDoc(): Promise<StatusDoc> {
  return (await (await fetch(`${server.url}/+status`)).json()) as StatusDoc;
}

/** A size as the pages write it: binary units, one decimal. */
function size(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

function storedWords(s: { bytes: number; objects: number }): string {
  return `${size(s.bytes)} in ${s.objects} object${s.objects === 1 ? '' : 's'}`;
}

/** Saves a screenshot and checks that it shows more than a blank page. */
async function shoot(page: Page, name: string): Promise<void> {
  const file = join(SHOTS, `${name}.png`);
  const png = PNG.sync.read(await page.screenshot({ path: file, fullPage: true }));
  const colours = new Set<number>();
  for (let i = 0; i < png.data.length; i += 4 * 7) colours.add(png.data.readUInt32BE(i));
  expect(colours.size, `${name}.png looks blank`).toBeGreaterThan(20);
  if (process.env.UPDATE_SCREENSHOTS === '1') {
    mkdirSync(join(REPO, 'docs', 'ui'), { recursive: true });
    copyFileSync(file, join(REPO, 'docs', 'ui', `${name}.png`));
  }
}

describe('the web UI in Chromium', () => {
  it('every page has its own title, the same navigation, and a CSP that allows nothing external', async () => {
    const titles = new Set<string>();
    for (const path of ['/', '/admin/status', '/browse', '/stats']) {
      const res = await fetch(`${server.url}${path}`, { headers: { authorization: basicAuth(adminToken, 'admin') } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
      const page = await open(path, { admin: path === '/admin/status' });
      titles.add(await page.title());
      expect(await page.locator('nav[aria-label=main] a').allTextContents()).toEqual(['Indexes', 'Status', 'Browse packages', 'Usage']);
      await page.context().close();
    }
    expect([...titles].sort()).toEqual(['Browse packages · velodex', 'Indexes · velodex', 'Status · velodex', 'Usage · velodex']);
  });

  it('the bundle is content-hashed, cached for a year and sent compressed', async () => {
    const html = await (await fetch(server.url)).text();
    const script = /<script type="module" src="(\/pkg\/app\.[0-9a-f]{16}\.js)"><\/script>/.exec(html)?.[1];
    expect(script).toBeDefined();
    const res = await fetch(`${server.url}${script}`, { headers: { 'accept-encoding': 'br' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('content-encoding')).toBe('br');
    expect((await fetch(`${server.url}/pkg/app.0000000000000000.js`)).status).toBe(404);
  });

  it('the dashboard lists every index with health, counters and client configuration, and no secret', async () => {
    const page = await open('/');
    await page.getByRole('heading', { name: 'Client configuration' }).waitFor();
    const rows = page.locator('table.indexes tbody tr');
    expect(await rows.locator('td:first-child').allTextContents()).toEqual(['hosted', 'pypi', 'dev', 'oci']);
    await expect.poll(() => rows.filter({ hasText: 'root/pypi' }).textContent()).toContain('healthy');
    // A cached index lists its upstreams (here one) with their state.
    expect(await rows.filter({ hasText: 'root/pypi' }).locator('ul.upstreams li[data-state="online"]').count()).toBe(1);
    expect(await rows.filter({ hasText: 'root/hosted' }).textContent()).toContain('4 uploads');
    expect(await rows.filter({ hasText: 'root/dev' }).textContent()).toContain('2 downloads');
    expect(await rows.filter({ hasText: 'root/dev' }).textContent()).toMatch(/python\s*virtual/);
    const text = (await page.textContent('body'))!;
    expect(text).toContain(`index-url = ${server.url}/root/hosted/simple/`);
    expect(text).toContain(`index-url = ${server.url}/root/dev/simple/`);
    expect(text).toContain('password = <upload-token>');
    expect(text).not.toContain(token);
    await shoot(page, 'dashboard');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('without JavaScript the dashboard still lists the indexes and links to their Simple pages', async () => {
    const page = await open('/', { javaScript: false });
    expect(await page.locator('table.indexes tbody tr').count()).toBe(4);
    await page.getByRole('link', { name: 'simple' }).first().click();
    await page.waitForURL('**/root/hosted/simple/');
    expect(await page.textContent('body')).toContain('ui-demo');
    await page.context().close();
  });

  it('the status page asks for the admin token (the browser prompts), and shows the status once given', async () => {
    // Headless Chromium cannot show the prompt itself; the context answers it as a person would.
    // The server's security log shows that the browser was asked: a 401 first, then the token.
    const asked = () => authFailures().filter((l) => l.index === '/admin/status' && l.reason === 'missing-credentials').length;
    const before = asked();
    const page = await open('/admin/status', { admin: true });
    await page.getByRole('heading', { name: 'Recent uploads' }).waitFor();
    await expect.poll(asked).toBe(before + 1);
    expect(await page.textContent('main')).toContain(project.wheelFilename);
    // A named token by its name and what it may do, never its secret.
    expect(await page.textContent('td.tokens >> nth=0')).toBe('ci-release (upload on team-*)');
    // Who uploaded: the credential, never the Basic user name a client may have made up.
    expect(await page.locator('table.recent tr', { hasText: project.wheelFilename }).locator('td.by').first().textContent()).toBe('upload_token');
    expect(await page.content()).not.toContain('ui-named-token-secret-4b2c');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
    // Without the token, neither the page nor its document shows anything of the status.
    const page401 = await fetch(`${server.url}/admin/status`);
    expect(page401.status).toBe(401);
    expect(page401.headers.get('www-authenticate')).toBe('Basic realm="velodex admin", charset="UTF-8"');
    expect(await page401.text()).toContain('This page needs the admin token.');
    expect((await fetch(`${server.url}/+status?details=admin`)).status).toBe(401);
  });

  it('without JavaScript, the status page with the token links to the admin document, which the browser opens with it', async () => {
    const page = await open('/admin/status', { javaScript: false, admin: true });
    await page.getByRole('link', { name: '/+status?details=admin' }).click();
    await page.waitForURL('**/+status?details=admin');
    expect(await page.textContent('body')).toContain(project.wheelFilename);
    await page.context().close();
  });

  it('the status page shows the version, the serial and the recent uploads', async () => {
    const page = await open('/admin/status', { admin: true });
    await page.getByRole('heading', { name: 'Recent uploads' }).waitFor();
    const text = (await page.textContent('main'))!;
    expect(text).toMatch(/version\s*0\.\d+\.\d+/);
    expect(text).toContain(project.wheelFilename);
    expect(text).toContain('configured (inline)');
    expect(text).not.toContain(token);
    const rows = page.locator('table.indexes tbody tr');
    // The upstream as scheme and host with a fingerprint: a path may carry a token.
    expect(await rows.filter({ hasText: 'root/pypi' }).textContent()).toContain(`upstream reachable (${displayUrl(`${upstream.url}/simple/`)})`);
    expect(text).not.toContain(`${upstream.url}/simple/`);
    expect(await rows.filter({ hasText: 'root/dev' }).textContent()).toContain('python virtual of hosted, pypi');
    await shoot(page, 'status');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('browse: search as you type, then a project with its files, METADATA and archive contents', async () => {
    const page = await open('/browse');
    const search = page.getByRole('searchbox');
    await search.pressSequentially('demo');
    await expect.poll(() => page.locator('#results li').allTextContents()).toEqual(['ui-demo']);
    await page.getByRole('link', { name: 'ui-demo' }).click();
    await page.getByRole('heading', { name: 'ui-demo' }).waitFor();
    const files = page.locator('table.files tbody tr');
    expect(await files.count()).toBe(2);
    const wheelRow = files.filter({ hasText: project.wheelFilename });
    const sha = createHash('sha256').update(readFileSync(project.wheel)).digest('hex');
    expect(await wheelRow.locator('code').getAttribute('title')).toBe(sha);
    expect(await wheelRow.textContent()).toContain('>=3.8');
    await wheelRow.getByRole('button', { name: 'METADATA' }).click();
    await expect.poll(() => page.locator('pre.metadata').textContent()).toContain('Name: ui-demo');
    await wheelRow.getByRole('button', { name: 'Contents' }).click();
    await page.getByRole('link', { name: 'ui_demo/__init__.py' }).click();
    await expect.poll(() => page.locator('pre.member').textContent()).toContain('def hello()');
    await shoot(page, 'browse-project');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('browse: a virtual index lists its hosted and mirrored projects and never one its policy denies', async () => {
    const hosted = await open('/browse?index=hosted');
    await hosted.getByRole('searchbox').pressSequentially('evil');
    // The hosted index has no policy: the project is there.
    await expect.poll(() => hosted.locator('#results li').allTextContents()).toEqual(['evil-pkg']);
    await hosted.context().close();

    const page = await open('/browse?index=dev');
    await expect.poll(() => page.locator('#results li').allTextContents()).toEqual(expect.arrayContaining(['ui-demo', 'ui-upstream']));
    expect(await page.locator('#results').textContent()).not.toContain('evil');
    await page.getByRole('searchbox').pressSequentially('evil');
    await expect.poll(() => page.locator('#results li').count()).toBe(0);
    expect(await page.locator('.count').textContent()).toMatch(/^0 of \d+ projects/);
    await page.getByRole('searchbox').fill('upstream');
    await page.getByRole('searchbox').dispatchEvent('input');
    await page.getByRole('link', { name: 'ui-upstream' }).click();
    await page.getByRole('heading', { name: 'ui-upstream' }).waitFor();
    expect(await page.locator('table.files').textContent()).toContain('ui_upstream-2.0-py3-none-any.whl');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();

    // Straight to the denied project's page: the policy's reason, not the project.
    const denied = await open('/browse?index=dev&project=evil-pkg');
    await expect.poll(() => denied.locator('[role=alert]').textContent()).toContain('403');
    expect(await denied.locator('[role=alert]').textContent()).toContain('deny-projects');
    expect(await denied.locator('table.files').count()).toBe(0);
    await denied.context().close();
  });

  it('browse: a nested archive opens in place, and a long member is previewed a page at a time', async () => {
    const page = await open('/browse?index=hosted&project=ui-xss');
    await page.getByRole('button', { name: 'Contents' }).click();
    await page.getByRole('link', { name: 'ui_xss/vendor/tool-1.0.tar.gz' }).click();
    await page.getByRole('heading', { name: 'Contents of ui_xss-6.6.6-py3-none-any.whl › ui_xss/vendor/tool-1.0.tar.gz' }).waitFor();
    await page.getByRole('link', { name: 'tool-1.0/README.txt' }).click();
    await expect.poll(() => page.locator('pre.member').textContent()).toContain('a vendored archive inside the wheel');

    await page.goto(`${server.url}/browse?index=hosted&project=ui-xss`);
    await page.getByRole('button', { name: 'Contents' }).click();
    await page.getByRole('link', { name: 'ui_xss/big.txt' }).click();
    await page.getByRole('button', { name: 'Next page' }).waitFor();
    expect(await page.locator('pre.member').textContent()).not.toContain('THE LAST LINE');
    await page.getByRole('button', { name: 'Next page' }).click();
    await expect.poll(() => page.locator('pre.member').textContent()).toContain('THE LAST LINE');
    expect(await page.getByRole('button', { name: 'Next page' }).count()).toBe(0);
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('browse: an image repository with its tag, manifest, layers and a file inside a layer', async () => {
    const page = await open('/browse?index=oci');
    await page.getByRole('link', { name: 'root/oci/team/app' }).click();
    await page.getByRole('link', { name: 'v1' }).click();
    await page.getByRole('heading', { name: 'Manifest v1' }).waitFor();
    expect(await page.locator('ol.layers li').count()).toBe(2);
    await expect.poll(() => page.locator('.referrers').textContent()).toContain('None');
    await page.locator('ol.layers li').first().getByRole('button', { name: 'Browse files' }).click();
    await page.getByRole('link', { name: 'etc/velodex/layer-0.txt' }).click();
    await expect.poll(() => page.locator('pre.member').textContent()).toContain('layer 0 of image ui-image');
    await shoot(page, 'browse-image');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('browse: a multi-platform image lists its platforms, and a manifest shows its referrers (an SBOM)', async () => {
    const work = tempDir('velodex-ui-multi-');
    const index = buildIndex('ui-multi');
    const env = { HOME: work, DOCKER_CONFIG: join(work, '.docker') };
    await run(tool('crane'), ['auth', 'login', `127.0.0.1:${server.port}`, '-u', '__token__', '--password-stdin'], { env, input: token });
    await run(tool('crane'), ['push', '--insecure', writeLayout(join(work, 'src'), [{ tag: 'v2', item: index }]), `127.0.0.1:${server.port}/root/oci/team/multi:v2`], { env });
    // An SBOM that refers to the arm64 image, pushed through the API as a signing tool would.
    const registry = new Registry(server.url, basicAuth(token));
    const arm = index.images[1]!.manifest.descriptor;
    const empty = await registry.pushBlob('root/oci/team/multi', '{}');
    const sbom = await registry.pushBlob('root/oci/team/multi', '{"spdxVersion":"SPDX-2.3"}');
    const artifact = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      artifactType: 'application/spdx+json',
      config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: `sha256:${empty}`, size: 2 },
      layers: [{ mediaType: 'application/spdx+json', digest: `sha256:${sbom}`, size: 26 }],
      subject: { mediaType: arm.mediaType, digest: arm.digest, size: arm.size },
    });
    expect((await registry.pushManifest('root/oci/team/multi', `sha256:${createHash('sha256').update(artifact).digest('hex')}`, artifact)).status).toBe(201);

    const page = await open('/browse?index=oci&repo=root/oci/team/multi&ref=v2');
    await page.getByRole('heading', { name: 'Manifest v2' }).waitFor();
    expect(await page.locator('ul.platforms li').allTextContents()).toEqual([expect.stringContaining('linux/amd64'), expect.stringContaining('linux/arm64')]);
    await page.getByRole('link', { name: 'linux/arm64' }).click();
    await page.getByRole('heading', { name: `Manifest ${arm.digest}` }).waitFor();
    await expect.poll(() => page.locator('.referrers').textContent()).toContain('application/spdx+json');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('the keyboard alone gets from the search box to a project', async () => {
    const page = await open('/browse');
    await page.getByRole('searchbox').waitFor();
    // The search box has focus on arrival; type, Tab past the count to the first result, Enter.
    await page.keyboard.type('ui-d');
    await expect.poll(() => page.locator('#results li').count()).toBe(1);
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('ui-demo');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'ui-demo' }).waitFor();
    await page.context().close();
  });

  it('the usage page samples /+stats and draws a line per index that rises with traffic', async () => {
    const page = await open('/stats');
    await expect.poll(() => page.locator('.chart polyline').count()).toBe(4);
    // Traffic while the page samples: the hosted index's line must climb.
    for (let i = 0; i < 20; i++) await fetch(`${server.url}/root/hosted/simple/ui-demo/`);
    await expect.poll(() => page.locator('.chart svg').getAttribute('aria-label'), { timeout: 10_000 }).toMatch(/[3-9] samples/);
    const points = await page.locator('.chart polyline[data-row="root/hosted"]').getAttribute('points');
    const ys = points!.split(' ').map((p) => Number(p.split(',')[1]));
    // SVG y grows downwards: a later sample with more requests sits higher (smaller y).
    expect(ys[ys.length - 1]!).toBeLessThan(ys[0]!);
    // The table ranks the indexes by what they served; the hosted one leads after that traffic.
    expect(await page.locator('table.usage tbody th').first().textContent()).toBe('root/hosted');
    await shoot(page, 'stats');
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('the usage page drills down from an index to its projects to the files pip downloaded', async () => {
    const page = await open('/stats');
    await page.getByRole('link', { name: 'root/dev' }).click();
    await page.waitForURL('**/stats?index=root%2Fdev');
    const projects = page.locator('table.usage tbody tr');
    await expect.poll(() => projects.locator('th').allTextContents()).toEqual(expect.arrayContaining(['ui-demo', 'ui-upstream']));
    // pip read the page, the METADATA sibling and the wheel of ui-demo once each through the virtual
    // route: served (pages + downloads), pages, downloads, metadata, bytes, uploads.
    const cells = async (row: ReturnType<Page['locator']>) => (await row.locator('td').allTextContents()).map((t) => t.trim());
    expect(await cells(projects.filter({ hasText: 'ui-demo' }))).toEqual(['2', '1', '1', '1', expect.stringMatching(/KiB$/), '0']);
    expect(await page.locator('.chart polyline').count()).toBe(2);
    await shoot(page, 'stats-index');
    await page.getByRole('link', { name: 'ui-upstream' }).click();
    await page.waitForURL('**/stats?index=root%2Fdev&project=ui-upstream');
    const file = page.locator('table.usage tbody tr');
    await expect.poll(() => file.locator('th').allTextContents()).toEqual(['ui_upstream-2.0-py3-none-any.whl']);
    // The wheel and its METADATA sibling, each read once by pip (sizes read through the cached index, which counts apart).
    const page658 = (await (await fetch(`${server.url}/root/pypi/simple/ui-upstream/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } })).json()) as { files: { url: string; size: number }[] };
    const wheel = page658.files[0]!;
    const metadataSize = (await (await fetch(new URL(`${wheel.url}.metadata`, `${server.url}/root/pypi/simple/ui-upstream/`))).arrayBuffer()).byteLength;
    expect(await cells(file)).toEqual(['2', '1', '1', `${((wheel.size + metadataSize) / 1024).toFixed(1)} KiB`]);
    expect(await page.locator('nav.crumbs').textContent()).toBe('All indexes › root/dev › ui-upstream');
    await page.getByRole('link', { name: 'ui-upstream in the package browser' }).click();
    await page.getByRole('heading', { name: 'ui-upstream' }).waitFor();
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('the dashboard search box finds projects and images in every index, keyboard only, and opens their browse pages', async () => {
    const page = await open('/');
    // From the top of the page, Tab alone reaches the box.
    for (let i = 0; i < 12 && (await page.evaluate('document.activeElement?.id')) !== 'search-q'; i++) await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.id')).toBe('search-q');
    await page.keyboard.type('ui-demo');
    await expect.poll(() => page.locator('#search-results a.result').first().textContent()).toBe('ui-demo');
    expect(await page.locator('#search-results li').first().textContent()).toContain('python · hosted (/root/hosted/) · 1.0');
    await page.keyboard.press('ArrowDown');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('ui-demo');
    await page.keyboard.press('Enter');
    await page.waitForURL('**/browse?index=hosted&project=ui-demo');
    await page.getByRole('heading', { name: 'ui-demo' }).waitFor();

    // An image, and a project velodex mirrored: results of both ecosystems, each to its own page.
    await page.goto(`${server.url}/`);
    await page.locator('#search-q').focus();
    await page.keyboard.type('ui app');
    await expect.poll(() => page.locator('#search-results a.result').allTextContents()).toEqual(['team/app']);
    expect(await page.locator('#search-results li').textContent()).toContain('oci · oci (/root/oci/) · v1');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.waitForURL('**/browse?index=oci&repo=root%2Foci%2Fteam%2Fapp');
    await page.getByRole('heading', { name: 'root/oci/team/app' }).waitFor();
    await page.goto(`${server.url}/`);
    await page.locator('#search-q').focus();
    await page.keyboard.type('ui-upstream');
    await expect.poll(() => page.locator('#search-results li').first().textContent()).toContain('python · pypi (/root/pypi/) · 2.0');
    // Up from the first result, and Escape, go back to the box.
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowUp');
    expect(await page.evaluate('document.activeElement?.id')).toBe('search-q');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('.search-count').textContent()).toMatch(/^1 result for “ui-upstream”/);
    expect(problemsOf(page)).toEqual([]);
    await shoot(page, 'search');
    await page.context().close();
  });

  it('the dashboard search shows markup and script in a summary as text, and nothing of it runs', async () => {
    const page = await open('/');
    await page.locator('#search-q').fill('ui-xss');
    await expect.poll(() => page.locator('#search-results .summary').textContent()).toContain('<script>window.__xss=1</script> <img src=x onerror="window.__xss=1">');
    expect(await page.locator('#search-results li').textContent()).toContain('6.6.6 (yanked)');
    expect(await page.evaluate('window.__xss')).toBeUndefined();
    expect(await page.locator('main script, main img, main svg[onload]').count()).toBe(0);
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('markup and script in every field of a package are shown as text and never run', async () => {
    const checks: Array<[string, (p: Page) => Promise<void>]> = [
      ['/admin/status', async (p) => p.getByRole('heading', { name: 'Recent uploads' }).waitFor()],
      [
        '/browse?index=hosted&project=ui-xss',
        async (p) => {
          await p.getByRole('heading', { name: 'ui-xss' }).waitFor();
          expect(await p.locator('table.files').textContent()).toContain('yanked: <script>window.__xss=1</script> bad <b>build</b>');
          await p.getByRole('button', { name: 'METADATA' }).click();
          await expect.poll(() => p.locator('pre.metadata').textContent()).toContain('Summary: <script>window.__xss=1</script> <img src=x onerror="window.__xss=1">');
          await p.getByRole('button', { name: 'Contents' }).click();
          await p.getByRole('link', { name: 'ui_xss/<img src=x onerror=window.__xss=1>.txt' }).click();
          await expect.poll(() => p.locator('pre.member').textContent()).toContain('"><svg onload="window.__xss=1">');
        },
      ],
    ];
    for (const [path, drive] of checks) {
      const page = await open(path, { admin: path === '/admin/status' });
      await drive(page);
      // Nothing ran, and nothing of the payloads became an element.
      expect(await page.evaluate('window.__xss')).toBeUndefined();
      expect(await page.locator('main script, main img, main svg[onload], main b').count()).toBe(0);
      expect(problemsOf(page)).toEqual([]);
      if (path.startsWith('/browse')) await shoot(page, 'xss-as-text');
      await page.context().close();
    }
  });

  it('the dashboard shows what each index stores as /+status says, how full the quota and the budget are, and the total', async () => {
    const page = await open('/');
    const row = (route: string) => page.locator('table.indexes tbody tr').filter({ hasText: route }).locator('td.stored');
    // The figures reach /+status within a flush (2 s): reload until the page and the document agree.
    let status = await statusDoc();
    await expect
      .poll(
        async () => {
          status = await statusDoc();
          await page.reload();
          await row('root/hosted').waitFor();
          const hosted = status.indexes.find((i) => i.name === 'hosted')!.stored!;
          const shown = (await row('root/hosted').textContent())!;
          const want = storedWords(hosted);
          return hosted.bytes > 0 && shown.includes(want) ? 'agree' : `shown "${shown}", /+status says "${want}"`;
        },
        { timeout: 15_000, interval: 1_000 },
      )
      .toBe('agree');
    const hosted = status.indexes.find((i) => i.name === 'hosted')!.stored!;
    // Four uploads and their pages: more than the files alone, far under the quota.
    expect(hosted.objects).toBeGreaterThanOrEqual(4);
    const quota = page.getByRole('meter', { name: 'hosted quota' });
    const pct = (100 * hosted.bytes) / 1024 ** 2;
    const words = `${pct < 10 ? pct.toFixed(1) : Math.round(pct)}% of 1.0 MiB quota`;
    expect(await quota.getAttribute('max')).toBe(String(1024 ** 2));
    expect(await quota.getAttribute('value')).toBe(String(hosted.bytes));
    expect(await quota.getAttribute('aria-valuetext')).toBe(words);
    expect(await row('root/hosted').textContent()).toContain(words);
    // The cache's budget and its idle limit; the virtual index holds nothing of its own; the OCI index has no limit.
    // A few KiB of a 20 MiB budget: a little, not nothing.
    expect(await row('root/pypi').textContent()).toContain('<0.1% of 20.0 MiB budget');
    expect(await page.getByRole('meter', { name: 'pypi budget' }).count()).toBe(1);
    expect(await row('root/pypi').textContent()).toContain('evicts what is not downloaded for 30 d');
    expect(await row('root/dev').textContent()).toBe('held by its members');
    expect(await row('root/oci').textContent()).toBe(storedWords(status.indexes.find((i) => i.name === 'oci')!.stored!));
    expect(await page.locator('meter').count()).toBe(2);
    expect(await page.locator('p.total').textContent()).toContain(`The store holds ${storedWords(status.stored)} in all`);
    expect(problemsOf(page)).toEqual([]);
    await page.context().close();
  });

  it('the status page shows the total, whether it was counted exactly, and the last collection with what it reclaimed', async () => {
    const storage = async (page: Page) => {
      await page.getByRole('heading', { name: 'Storage' }).waitFor();
      return (await page.locator('dl.storage').textContent())!;
    };
    const page = await open('/admin/status', { admin: true });
    const before = await statusDoc();
    const text = await storage(page);
    expect(text).toContain(`stored in all${storedWords(before.stored)}`);
    // A store never counted is counted once a few seconds after start: either is right, as /+status says.
    expect(text).toContain(before.stored.counted_at === null ? 'kept by the writes; not counted yet' : 'counted exactly at ');
    if (before.gc.last_run === null) expect(text).toContain('last collectionnone yet');
    await page.context().close();

    // A collection on demand counts exactly and is shown with what it reclaimed.
    const gc = await fetch(`${server.url}/+admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
    expect(gc.status).toBe(200);
    const after = await statusDoc();
    expect(after.stored.counted_at).not.toBeNull();
    const run = after.gc.last_run!;
    const again = await open('/admin/status', { admin: true });
    const counted = await storage(again);
    const when = await again.evaluate((iso) => new Date(iso).toLocaleString(), after.stored.counted_at!);
    expect(counted).toContain(`counted exactly at ${when}`);
    expect(counted).toContain(`: ok, reclaimed ${size(run.bytes_deleted)} in ${run.blobs_deleted} blob`);
    expect(await again.locator('table.indexes tbody tr').filter({ hasText: 'root/hosted' }).locator('td.stored').textContent()).toContain('of 1.0 MiB quota');
    expect(problemsOf(again)).toEqual([]);
    await again.context().close();
  });

  it('with the upstream stopped, the dashboard and status say the cached index serves what it stored', async () => {
    await upstream.stop();
    // The mirrored page is past its freshness window: velodex tries the upstream, fails, serves its copy.
    await new Promise((r) => setTimeout(r, 1_100));
    const res = await fetch(`${server.url}/root/pypi/simple/ui-upstream/`);
    expect(res.status).toBe(200);
    const page = await open('/');
    const row = page.locator('table.indexes tbody tr').filter({ hasText: 'root/pypi' });
    await expect.poll(() => row.textContent()).toContain('upstream offline: serving cached data');
    expect(await page.locator('table.indexes tbody tr').filter({ hasText: 'root/hosted' }).textContent()).toContain('healthy');
    await shoot(page, 'dashboard-offline');
    await page.context().close();
    const status = await open('/admin/status', { admin: true });
    await expect.poll(() => status.locator('table.indexes tbody tr').filter({ hasText: 'root/pypi' }).textContent()).toContain('upstream offline');
    await status.context().close();
  });
});
