/**
 * Real OCI clients configured only from the texts `GET /root/oci/+api` returns: the crane and
 * skopeo lines run as pasted (the token put in for `<upload-token>`, an image name and tag for
 * `<image>` and `<tag>`), and containerd pulls through the returned `hosts.toml` with no
 * `--plain-http`. The mirror form of `hosts.toml` (an index with an upstream, which this build
 * cannot configure for OCI yet) is taken from the same code and shown to route a pull of the
 * upstream's image name to the index's route.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IndexConfig } from '../../registry/src/config/types.js';
import { linksFor } from '../../registry/src/discovery/document.js';
import { originOf } from '../../registry/src/discovery/origin.js';
import type { ClientText, DiscoveryDocument } from '../../registry/src/discovery/types.js';
import { ociDiscovery } from '../../registry/src/oci/discovery.js';
import { clientSuite } from '../oci/client-setup.js';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { buildImage, layoutMismatches, allBlobs, readLayout, writeLayout, type Image } from '../support/oci-image.js';
import { TOOLS } from '../support/paths.js';
import { run } from '../support/run.js';
import { freePort } from '../support/velodex.js';

const c = clientSuite('discovery-oci', {
  env: (work) => ({ DOCKER_CONFIG: join(work, 'docker'), REGISTRY_AUTH_FILE: join(work, 'auth.json'), PATH: `${join(TOOLS, 'bin')}:/usr/bin:/bin` }),
  // skopeo reads the trust policy from HOME; the machine's own is not used.
  setup: ({ work }) => {
    mkdirSync(join(work, '.config', 'containers'), { recursive: true });
    writeFileSync(join(work, '.config', 'containers', 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
  },
});
let daemon: Containerd;

beforeAll(async () => {
  const dir = join(c.work, 'containerd');
  mkdirSync(dir);
  daemon = await startContainerd(dir);
});

afterAll(async () => {
  await daemon?.stop();
});

async function texts(): Promise<Record<string, ClientText>> {
  const doc = (await (await fetch(`${c.server.url}/root/oci/+api`)).json()) as DiscoveryDocument;
  const found = doc.indexes[0]?.client_configuration;
  if (!found) throw new Error('no client texts');
  return found;
}

/** Runs a returned shell text as pasted, placeholders filled in, in a folder holding `./image`. */
async function paste(text: string, image: Image, name: string): Promise<string> {
  const dir = join(c.work, `paste-${name.replace(/\//g, '-')}`);
  writeLayout(join(dir, 'image'), [{ tag: 'v1', item: image }]);
  const filled = text.replaceAll('<upload-token>', c.token).replaceAll('<image>', name).replaceAll('<tag>', 'v1');
  await run('/bin/bash', ['-euo', 'pipefail', '-c', filled], { cwd: dir, env: c.env, timeoutMs: 180_000 });
  return dir;
}

async function servedDigest(name: string): Promise<string | null> {
  const res = await fetch(`${c.server.url}/v2/root/oci/${name}/manifests/v1`, { method: 'HEAD' });
  return res.headers.get('docker-content-digest');
}

/** Writes a returned hosts.toml under `root` where its path says (below `/etc/containerd/certs.d/`). */
function placeHostsToml(root: string, hosts: ClientText | undefined): void {
  const path = hosts?.path ?? '';
  expect(path.startsWith('/etc/containerd/certs.d/')).toBe(true);
  const file = join(root, path.slice('/etc/containerd/certs.d/'.length));
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, hosts?.text ?? '');
}

describe('texts from /root/oci/+api', () => {
  it('crane: log in, push and pull as pasted', async () => {
    const image = buildImage({ seed: 'discovery-crane' });
    const text = (await texts()).crane?.text ?? '';
    expect(text).toContain('<upload-token>');
    const dir = await paste(text, image, 'disc/crane');
    expect(await servedDigest('disc/crane')).toBe(image.manifest.descriptor.digest);
    // crane pull wrote the image as a tarball.
    const list = await run('/bin/tar', ['-tf', join(dir, 'image.tar')]);
    expect(list.stdout).toContain('manifest.json');
  });

  it('skopeo: log in, copy in and copy out as pasted', async () => {
    const image = buildImage({ seed: 'discovery-skopeo' });
    const dir = await paste((await texts()).skopeo?.text ?? '', image, 'disc/skopeo');
    expect(await servedDigest('disc/skopeo')).toBe(image.manifest.descriptor.digest);
    const pulled = readLayout(join(dir, 'pulled'));
    expect(layoutMismatches(pulled, allBlobs(image).filter((b) => b !== image.manifest))).toEqual([]);
  });

  it('containerd pulls over plain HTTP through the returned hosts.toml, without --plain-http', async () => {
    const image = buildImage({ seed: 'discovery-ctr', layers: 1 });
    await paste((await texts()).crane?.text ?? '', image, 'disc/ctr');
    const ref = `${c.host}/root/oci/disc/ctr:v1`;
    // containerd falls back to plain HTTP on loopback by itself, so this shows the file is read
    // and works, not that it is needed; the mirror test below shows containerd obeys it.
    const hostsDir = join(c.work, 'certs.d');
    placeHostsToml(hostsDir, (await texts()).containerd);
    const pulled = await daemon.ctr(['images', 'pull', '--hosts-dir', hostsDir, '--snapshotter', 'native', ref], { timeoutMs: 60_000, allowFailure: true });
    expect(pulled.code, pulled.stderr).toBe(0);
    const listed = await daemon.ctr(['images', 'ls', '-q']);
    expect(listed.stdout.split('\n')).toContain(ref);
  });
});

describe('the mirror form of hosts.toml', () => {
  it('sends pulls of the upstream image names to /v2/<route>/ (override_path)', async () => {
    const image = buildImage({ seed: 'discovery-mirror', layers: 1 });
    await paste((await texts()).crane?.text ?? '', image, 'library/app');
    // An upstream nothing listens on: the pull can only succeed through the mirror host.
    const upstream = `127.0.0.1:${await freePort()}`;
    const cached: IndexConfig = {
      name: 'mirror',
      route: 'root/oci',
      routeSegments: ['root', 'oci'],
      ecosystem: 'oci',
      role: 'cached',
      upstreams: [{ url: `http://${upstream}`, hosts: [], failoverOn404: false }],
      cacheTtlSecs: 300,
      upstreamDeletions: 'follow',
      policy: { denyProjects: [], allowProjects: [] },
      webhooks: [],
      tokens: [],
      serviceAccounts: [],
      private: false,
    };
    const links = linksFor(originOf({ host: c.host }, 'http'));
    const hosts = ociDiscovery.index({ index: cached, members: [cached], writable: null }, links).client_configuration?.containerd;
    expect(hosts?.text).toContain('override_path = true');
    const hostsDir = join(c.work, 'certs.d-mirror');
    placeHostsToml(hostsDir, hosts);
    const ref = `${upstream}/library/app:v1`;
    const pulled = await daemon.ctr(['images', 'pull', '--hosts-dir', hostsDir, '--snapshotter', 'native', ref], { timeoutMs: 60_000, allowFailure: true });
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(c.server.logs()).toContain('/v2/root/oci/library/app/manifests/v1');
  });
});
