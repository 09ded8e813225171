/**
 * containerd's `ctr` against velodex: a private containerd daemon pulls an image, then pushes it
 * again under other names. The blobs are already there, so the first write of each push is the
 * manifest PUT, which containerd sends without credentials and writes in full before it reads the
 * 401; a server that answered before reading made the retry hang (4 pushes in 6). Each push has
 * a timeout, so a hang fails the test. A named token that may upload to `app*` pushes there and
 * is refused elsewhere. A private index (`read = "token"`) is pulled with its read token, from the
 * command line or from the header of the `hosts.toml` its `/+api` prints (what a node's containerd
 * is given), never without; that file's header does not get in the way of an open index.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startContainerd, type Containerd } from '../support/containerd.js';
import type { DiscoveryDocument } from '../../registry/src/discovery/types.js';
import { oci } from '../support/config.js';
import { allBlobs, buildImage } from '../support/oci-image.js';
import { basicAuth } from '../support/velodex.js';
import { Registry } from './api-support.js';
import { clientSuite } from './client-setup.js';

/** A named token of the index at `tokens/oci` that may upload to `app*` only. */
const CI_SECRET = 'ci-ctr-secret-e03b9c';
/** The private index at `vault/oci`: its upload token and a named token that may only read. */
const VAULT = { upload: 'vault-ctr-upload-52b0d7', read: 'vault-ctr-read-a91f3c' };
const c = clientSuite('ctr', {
  indexes: [
    oci.hosted('tokens', { route: 'tokens/oci', tokens: [{ name: 'ci', secret: CI_SECRET, scopes: ['upload'], projects: ['app*'] }] }),
    oci.hosted('vault', { route: 'vault/oci', token: VAULT.upload, read: 'token', tokens: [{ name: 'puller', secret: VAULT.read, scopes: ['read'] }] }),
  ],
});
let daemon: Containerd;
const PUSHES = 8;

beforeAll(async () => {
  const dir = join(c.work, 'containerd');
  mkdirSync(dir);
  daemon = await startContainerd(dir);
});

afterAll(async () => {
  await daemon?.stop();
});

const image = buildImage({ seed: 'ctr-push', layers: 2, bigFileSize: 64 * 1024 });

describe('ctr', () => {
  it('pushes an image whose blobs velodex already has, every time', async () => {
    const reg = new Registry(c.server.url, basicAuth(c.token));
    for (const blob of allBlobs(image).slice(1)) await reg.pushBlob('root/oci/ctr/app', blob.bytes);
    expect((await reg.pushManifest('root/oci/ctr/app', 'v1', image.manifest.bytes)).status).toBe(201);

    const source = `${c.host}/root/oci/ctr/app:v1`;
    // The native snapshotter: unpacking needs no overlay mounts wherever the suite runs.
    await daemon.ctr(['images', 'pull', '--plain-http', '--snapshotter', 'native', source], { timeoutMs: 60_000 });

    for (let i = 0; i < PUSHES; i++) {
      // Another tag, and every other time another repository: the manifest is new there.
      const target = `${c.host}/root/oci/ctr/${i % 2 === 0 ? 'copy' : 'app'}:push-${i}`;
      await daemon.ctr(['images', 'tag', source, target]);
      const pushed = await daemon.ctr(['images', 'push', '--plain-http', '--user', `__token__:${c.token}`, target], { timeoutMs: 20_000, allowFailure: true });
      // Not the command line in the message: it carries the token.
      expect(pushed.code, `push ${i} of ${target} exited with ${pushed.code} (-1: killed after 20 s, hung)\n${pushed.stderr}`).toBe(0);
      const res = await fetch(`${c.server.url}/v2/${target.slice(c.host.length + 1).replace(':', '/manifests/')}`, { method: 'HEAD' });
      expect(res.status).toBe(200);
      expect(res.headers.get('docker-content-digest')).toBe(image.manifest.descriptor.digest);
    }
  });

  it('pushes with a named token to a repository its globs match, and is refused outside them', async () => {
    // The image the test above pulled into containerd.
    const source = `${c.host}/root/oci/ctr/app:v1`;
    const push = async (repo: string) => {
      const target = `${c.host}/tokens/oci/${repo}:named`;
      await daemon.ctr(['images', 'tag', source, target]);
      return daemon.ctr(['images', 'push', '--plain-http', '--user', `ci:${CI_SECRET}`, target], { timeoutMs: 20_000, allowFailure: true });
    };
    const pushed = await push('app');
    expect(pushed.code, pushed.stderr).toBe(0);
    const res = await fetch(`${c.server.url}/v2/tokens/oci/app/manifests/named`, { method: 'HEAD' });
    expect(res.headers.get('docker-content-digest')).toBe(image.manifest.descriptor.digest);

    const refused = await push('other');
    expect(refused.code).not.toBe(0);
    // containerd answers velodex's Basic challenge with Basic credentials, so the refusal is a
    // 403 DENIED naming the token; ctr prints only the status, the security log the token.
    expect(refused.stderr).toMatch(/unexpected status: 403 Forbidden/);
    expect(c.server.logs()).toMatch(/"event":"auth_failed","index":"tokens\/oci","method":"POST","client":"127.0.0.1","reason":"insufficient-scope","token":"ci"/);
    expect((await fetch(`${c.server.url}/v2/tokens/oci/other/manifests/named`, { method: 'HEAD' })).status).toBe(404);
  });
});

describe('ctr and a private index', () => {
  // One image per way of pulling, so each pull fetches its blobs rather than finding them in containerd.
  const images = { app: buildImage({ seed: 'ctr-vault-app', layers: 1, bigFileSize: 16 * 1024 }), web: buildImage({ seed: 'ctr-vault-web', layers: 1, bigFileSize: 16 * 1024 }) };
  const ref = (repo: string) => `${c.host}/vault/oci/${repo}:v1`;
  const pull = (args: string[]) => daemon.ctr(['images', 'pull', '--snapshotter', 'native', ...args], { timeoutMs: 60_000, allowFailure: true });

  beforeAll(async () => {
    const reg = new Registry(c.server.url, basicAuth(VAULT.upload));
    for (const [repo, image] of Object.entries(images)) {
      for (const blob of allBlobs(image).slice(1)) await reg.pushBlob(`vault/oci/${repo}`, blob.bytes);
      expect((await reg.pushManifest(`vault/oci/${repo}`, 'v1', image.manifest.bytes)).status).toBe(201);
    }
  });

  it('refuses a pull without credentials', async () => {
    const res = await pull(['--plain-http', ref('app')]);
    expect(res.code).not.toBe(0);
    // containerd fetched a token without credentials: the realm grants no `pull` on a private index.
    expect(res.stderr).toContain(`failed to resolve reference "${ref('app')}": pull access denied, repository does not exist or may require authorization`);
    expect(c.server.logs()).toMatch(/"event":"auth_failed","index":"vault\/oci","method":"HEAD","client":"127.0.0.1","reason":"insufficient-scope"/);
  });

  it('pulls with the read token as --user', async () => {
    const res = await pull(['--plain-http', '--user', `puller:${VAULT.read}`, ref('app')]);
    expect(res.code, res.stderr).toBe(0);
    expect(await digestIn(ref('app'))).toBe(images.app.manifest.descriptor.digest);
  });

  it('pulls with the read token in the header of the hosts.toml its /+api prints, as a node configured for a private index does', async () => {
    const doc = (await (await fetch(`${c.server.url}/vault/oci/+api`)).json()) as DiscoveryDocument;
    const hosts = doc.indexes[0]?.client_configuration?.containerd;
    expect(hosts?.path).toBe(`/etc/containerd/certs.d/${c.host}/hosts.toml`);
    expect(hosts?.text).toContain(`[host."http://${c.host}".header]`);
    const hostsDir = join(c.work, 'certs.d');
    mkdirSync(join(hostsDir, c.host), { recursive: true });
    // The placeholder filled in as its comment says.
    writeFileSync(join(hostsDir, c.host, 'hosts.toml'), (hosts?.text ?? '').replace('<base64>', Buffer.from(`__token__:${VAULT.read}`).toString('base64')));
    // No --user: the credentials come from the hosts file (and the scheme; on loopback containerd would also try plain HTTP by itself).
    const res = await pull(['--hosts-dir', hostsDir, ref('web')]);
    expect(res.code, res.stderr).toBe(0);
    expect(await digestIn(ref('web'))).toBe(images.web.manifest.descriptor.digest);
    // The header goes to every index of the host: an open one reads as without it.
    const open = await pull(['--hosts-dir', hostsDir, `${c.host}/root/oci/ctr/app:v1`]);
    expect(open.code, open.stderr).toBe(0);
  });

  it('leaves no secret of the private index in the log, nor the header that carries one', () => {
    const logs = c.server.logs();
    for (const secret of Object.values(VAULT)) expect(logs).not.toContain(secret);
    expect(logs).not.toContain(Buffer.from(`__token__:${VAULT.read}`).toString('base64'));
  });

  /** The digest of `ref` in containerd's image store. */
  async function digestIn(ref: string): Promise<string | undefined> {
    const list = await daemon.ctr(['images', 'list', `name==${ref}`]);
    return /sha256:[0-9a-f]{64}/.exec(list.stdout)?.[0];
  }
});
