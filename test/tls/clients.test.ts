/**
 * velodex with `[tls]` (two workers on the one socket), driven by real clients that trust the test's CA the way a user tells them
 * to: twine and pip with `--cert`, uv and crane with `SSL_CERT_FILE`. Discovery, the start-up line
 * and the clients' URLs say https; a client that does not trust the CA, or speaks plain HTTP to
 * the port, is refused before any request is served.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultIndexes } from '../support/backend.js';
import { testCa } from '../support/certificates.js';
import { tls, toml } from '../support/config.js';
import { buildImage, layoutMismatches, allBlobs, readLayout, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv, freshUvVenv, requestedPaths } from '../python/fixtures/clients.js';
import { buildProject } from '../python/fixtures/projects.js';
import { getTrusting } from './https.js';

/**
 * The clients' environment: no machine-wide CA bundle in the way. requests (twine) prefers
 * REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE to its own `--cert`, and this machine may set them.
 */
const CLIENT_ENV = { ...CLEAN_ENV, REQUESTS_CA_BUNDLE: '', CURL_CA_BUNDLE: '' };

let server: Velodex;
let token: string;
let caFile: string;
let ca: Buffer;
let work: string;
/** One pip environment for the file: `pip download` leaves it as it was, so the install after it starts clean. */
let pipVenv: Promise<string> | undefined;
const sharedPipVenv = (): Promise<string> => (pipVenv ??= freshPipVenv());

beforeAll(async () => {
  work = tempDir('velodex-tls-');
  const authority = testCa(work);
  const certificate = authority.issue('server');
  caFile = authority.caFile;
  ca = readFileSync(caFile);
  const dataDir = tempDir();
  // Two workers: each serves TLS on the one shared socket, and the clients' connections reach both.
  server = await startVelodex({ config: toml(defaultIndexes(dataDir), tls(certificate)), dataDir, env: { VELODEX_WORKERS: '2' } });
  token = defaultToken(server);
});

afterAll(async () => {
  await server?.stop();
});

describe('serving https', () => {
  it('announces an https URL and says https in /+api and its client texts', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    // The banner goes to stderr just after the JSON line the start waited for.
    await until('the start-up banner', async () => (server.logs().includes(`velodex listening on ${server.url} (`) ? true : undefined), { timeoutMs: 10_000 });
    expect(server.logs()).toContain('2 worker processes');
    const res = await getTrusting(`${server.url}/+api`, ca);
    expect(res.status).toBe(200);
    const doc = JSON.parse(res.body) as { urls: Record<string, string>; index_apis: Record<string, string> };
    for (const url of [...Object.values(doc.urls), ...Object.values(doc.index_apis)]) expect(url).toMatch(new RegExp(`^${server.url}/`));
    const index = await getTrusting(`${server.url}/root/hosted/+api`, ca);
    expect(index.body).not.toContain('http://');
    expect(index.body).toContain(`${server.url}/root/hosted/simple/`);
    expect(index.body).not.toContain('trusted-host');
    const images = await getTrusting(`${server.url}/root/oci/+api`, ca);
    expect(images.body).toContain('crane');
    expect(images.body).not.toContain('--insecure');
  });

  it('refuses a client that does not trust the CA in the handshake, before any request', async () => {
    const mark = server.logs().length;
    const code = await new Promise<string | undefined>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: server.port }, () => resolve('connected'));
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
    });
    expect(code).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    const pip = await run(join(await sharedPipVenv(), 'bin', 'pip'), ['download', '--no-deps', '--no-cache-dir', '--retries', '0', '-d', join(work, 'refused'), '--index-url', `${server.url}/root/hosted/simple/`, 'alpha'], {
      env: CLIENT_ENV,
      allowFailure: true,
    });
    expect(pip.code).not.toBe(0);
    expect(`${pip.stdout}${pip.stderr}`).toMatch(/CERTIFICATE_VERIFY_FAILED/);
    // Only the paths pip asks for: with two workers, a line of the test before may arrive late.
    expect(requestedPaths(server, mark).filter((p) => p.startsWith('/root/hosted/simple/'))).toEqual([]);
  });

  it('refuses plain HTTP on the TLS port', async () => {
    const mark = server.logs().length;
    await expect(fetch(`http://127.0.0.1:${server.port}/+api?plain-http`)).rejects.toThrow();
    expect(requestedPaths(server, mark).filter((p) => p.includes('plain-http'))).toEqual([]);
  });
});

describe('Python clients', () => {
  it('twine uploads with --cert, pip installs with --cert, uv installs with SSL_CERT_FILE', async () => {
    const alpha = await buildProject('alpha', '1.0.0');
    await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--cert', caFile, '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, alpha.wheel, alpha.sdist], {
      env: CLIENT_ENV,
    });
    const index = `${server.url}/root/hosted/simple/`;

    const pip = await run(join(await sharedPipVenv(), 'bin', 'pip'), ['install', '--no-cache-dir', '--cert', caFile, '--index-url', index, 'alpha'], { env: CLIENT_ENV });
    expect(pip.stdout).toMatch(/Successfully installed alpha-1\.0\.0/);

    const uvVenv = await freshUvVenv();
    const uv = await run(tool('uv'), ['pip', 'install', '--python', join(uvVenv, 'bin', 'python'), '--index-url', index, 'alpha'], { env: { ...CLIENT_ENV, SSL_CERT_FILE: caFile } });
    expect(uv.stderr).toContain('+ alpha==1.0.0');
  });

  it('uv publish uploads with SSL_CERT_FILE', async () => {
    const alpha = await buildProject('alpha', '1.1.0');
    await run(tool('uv'), ['publish', '--publish-url', `${server.url}/root/hosted/`, '--username', '__token__', '--password', token, alpha.wheel], { env: { ...CLIENT_ENV, SSL_CERT_FILE: caFile } });
    const page = await getTrusting(`${server.url}/root/hosted/simple/alpha/`, ca);
    expect(page.body).toContain(alpha.wheelFilename);
  });
});

describe('OCI clients', () => {
  it('crane pushes and pulls with SSL_CERT_FILE and no --insecure', async () => {
    const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker'), SSL_CERT_FILE: caFile };
    const host = `127.0.0.1:${server.port}`;
    await run(tool('crane'), ['auth', 'login', host, '-u', '__token__', '--password-stdin'], { env, input: token });
    const image = buildImage({ seed: 'tls-crane' });
    const src = writeLayout(join(work, 'image-src'), [{ tag: 'v1', item: image }]);
    const ref = `${host}/root/oci/tls/app:v1`;
    await run(tool('crane'), ['push', src, ref], { env });
    expect((await run(tool('crane'), ['digest', ref], { env })).stdout.trim()).toBe(image.manifest.descriptor.digest);
    const pulled = join(work, 'image-pull');
    await run(tool('crane'), ['pull', '--format', 'oci', ref, pulled], { env });
    expect(layoutMismatches(readLayout(pulled), allBlobs(image))).toEqual([]);
  });
});
