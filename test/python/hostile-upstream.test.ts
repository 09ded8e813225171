/**
 * A cached Python index in front of a hostile upstream (a server of the test's own, test/support/
 * hostile-server.ts) whose pages link to, or redirect to, an internal service: another loopback
 * address (127.0.0.2) standing for the cloud metadata address. Nothing is fetched from a host the
 * configuration does not name, directly or after a redirect: not the file, not its `.metadata`
 * sibling without a hash, not its `.asc` signature. A second index names the host in
 * `upstream_hosts`, and pip installs through it: the rule is the configuration's, not a blanket ban.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cached, toml } from '../support/config.js';
import { startHostile, type HostileServer } from '../support/hostile-server.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV } from './fixtures/clients.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';

const JSON_ACCEPT = { accept: 'application/vnd.pypi.simple.v1+json' };
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

let upstream: HostileServer;
let internal: HostileServer;
let velodex: Velodex;
const projects: Record<string, BuiltProject> = {};
const work = tempDir('velodex-hostile-python-');

/** The internal service: answers everything it is asked (so a leak would succeed), and records it. */
function internalService(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void {
  const name = (req.url ?? '').split('/').pop() ?? '';
  const project = Object.values(projects).find((p) => name.startsWith(p.wheelFilename));
  if (!project) return void res.writeHead(200, { 'content-type': 'text/plain' }).end('internal secret\n');
  if (name.endsWith('.metadata')) return void res.writeHead(200).end('Metadata-Version: 2.1\nName: internal\nVersion: 1.0\n');
  if (name.endsWith('.asc')) return void res.writeHead(200).end('-----BEGIN PGP SIGNATURE-----\ninternal\n');
  res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(project.wheel));
}

/** PEP 503 pages whose links lead where they should not. */
function hostileUpstream(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void {
  const path = (req.url ?? '').split('?')[0]!;
  const page = /^\/simple\/([a-z0-9-]+)\/$/.exec(path);
  if (page) {
    const project = projects[page[1]!];
    if (!project) return void res.writeHead(404).end();
    const hash = sha256(readFileSync(project.wheel));
    const file = project.wheelFilename;
    const links: Record<string, string> = {
      'hostile-link': `<a href="${internal.url}/internal/${file}#sha256=${hash}">${file}</a>`,
      'hostile-redirect': `<a href="/files/${file}#sha256=${hash}">${file}</a>`,
      'hostile-siblings': `<a href="/files/${file}#sha256=${hash}" data-dist-info-metadata="true" data-gpg-sig="true">${file}</a>`,
    };
    res.writeHead(200, { 'content-type': 'text/html' });
    return void res.end(`<!DOCTYPE html><html><body>${links[page[1]!]}</body></html>`);
  }
  const file = /^\/files\/(.+)$/.exec(path);
  if (file) {
    const name = file[1]!;
    const project = Object.values(projects).find((p) => name.startsWith(p.wheelFilename));
    if (!project) return void res.writeHead(404).end();
    // The file itself from the upstream's own host; everything else off to the internal service.
    if (project.name === 'hostile-siblings' && name === project.wheelFilename) return void res.writeHead(200).end(readFileSync(project.wheel));
    return void res.writeHead(302, { location: `${internal.url}/internal/${name}` }).end();
  }
  res.writeHead(404).end();
}

beforeAll(async () => {
  for (const name of ['hostile-link', 'hostile-redirect', 'hostile-siblings']) projects[name] = await buildProject(name, '1.0');
  internal = await startHostile(internalService, { host: '127.0.0.2' });
  upstream = await startHostile(hostileUpstream);
  const simple = `${upstream.url}/simple/`;
  velodex = await startVelodex({ config: toml(cached('cache', simple), cached('trusting', simple, { upstreamHosts: ['127.0.0.2'] })) });
}, 180_000);

afterAll(async () => {
  await velodex?.stop();
  await upstream?.close();
  await internal?.close();
});

function pipDownload(index: string, project: string) {
  return run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--retries', '0', '--dest', join(work, `${index}-${project}`), '--index-url', `${velodex.url}/root/${index}/simple/`, project], {
    env: CLEAN_ENV,
    allowFailure: true,
    timeoutMs: 120_000,
  });
}

/** The file's URL on velodex, from its PEP 691 page. */
async function fileUrl(index: string, project: string): Promise<string> {
  const page = (await (await fetch(`${velodex.url}/root/${index}/simple/${project}/`, { headers: JSON_ACCEPT })).json()) as { files: { url: string }[] };
  return new URL(page.files[0]!.url, `${velodex.url}/root/${index}/simple/${project}/`).toString();
}

describe('a cached Python index fetches only from hosts its configuration names', () => {
  it('a page link to another host is not fetched: pip fails with a message naming upstream_hosts', async () => {
    const res = await pipDownload('cache', 'hostile-link');
    expect(res.code).not.toBe(0);
    expect(internal.requests).toEqual([]);
    const answer = await fetch(await fileUrl('cache', 'hostile-link'));
    expect(answer.status).toBe(502);
    expect(await answer.text()).toContain('upstream_hosts');
    expect(internal.requests).toEqual([]);
  });

  it('a redirect from the upstream to another host is not followed', async () => {
    const res = await pipDownload('cache', 'hostile-redirect');
    expect(res.code).not.toBe(0);
    expect(internal.requests).toEqual([]);
    expect(upstream.requests.some((r) => r.path.startsWith('/files/hostile_redirect'))).toBe(true);
  });

  it('a metadata sibling without a hash and a signature are not fetched from another host: the metadata comes from the verified wheel', async () => {
    const url = await fileUrl('cache', 'hostile-siblings');
    // The metadata is read from the wheel instead, whose sha256 the page did give.
    const metadata = await fetch(`${url}.metadata`);
    expect(metadata.status).toBe(200);
    const text = await metadata.text();
    expect(text).toMatch(/^Name: hostile-siblings$/m);
    expect(text).not.toContain('internal');
    const signature = await fetch(`${url}.asc`);
    expect(signature.status).not.toBe(200);
    expect(await signature.text()).not.toContain('BEGIN PGP');
    expect(internal.requests).toEqual([]);
    const res = await pipDownload('cache', 'hostile-siblings');
    expect(res.stderr).not.toContain('ERROR');
    expect(res.code).toBe(0);
    expect(internal.requests).toEqual([]);
  });

  it('with the host in upstream_hosts, pip downloads the file from it', async () => {
    const res = await pipDownload('trusting', 'hostile-link');
    expect(res.code).toBe(0);
    expect(readFileSync(join(work, 'trusting-hostile-link', projects['hostile-link']!.wheelFilename))).toEqual(readFileSync(projects['hostile-link']!.wheel));
    expect(internal.requests.some((r) => r.path.endsWith(projects['hostile-link']!.wheelFilename))).toBe(true);
  });
});
