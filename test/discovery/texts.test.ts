/**
 * The client texts as pure functions, for the cases the real-client suites cannot set up: an
 * HTTPS origin behind a proxy, a plain-HTTP host that is not loopback, and a Docker Hub mirror.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { HostedIndex, IndexConfig } from '../../registry/src/config/types.js';
import { buildConfig } from '../../registry/src/config/load.js';
import { DiscoveryBuilder, linksFor } from '../../registry/src/discovery/document.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { originOf } from '../../registry/src/discovery/origin.js';
import type { ClientText } from '../../registry/src/discovery/types.js';
import { ociDiscovery } from '../../registry/src/oci/discovery.js';
import { pythonDiscovery } from '../../registry/src/python/discovery.js';
import { REPO } from '../support/paths.js';

function base(name: string, ecosystem: string) {
  const route = `team/${name}`;
  return { name, route, routeSegments: route.split('/'), ecosystem, policy: { denyProjects: [], allowProjects: [] }, webhooks: [], tokens: [], serviceAccounts: [], private: false };
}
const hosted = (name: string, ecosystem = 'oci'): HostedIndex => ({ ...base(name, ecosystem), role: 'hosted', volatile: false, trustedPublishers: [] });
const cached = (name: string, upstream: string, ecosystem = 'oci'): IndexConfig => ({ ...base(name, ecosystem), role: 'cached', upstreams: [{ url: upstream, hosts: [], failoverOn404: false }], cacheTtlSecs: 300, upstreamDeletions: 'follow' });

const at = (host: string, scheme: 'http' | 'https' = 'http') => linksFor(originOf({ host }, scheme));

function ociTexts(ix: IndexConfig, host: string, scheme: 'http' | 'https' = 'http'): Record<string, ClientText> {
  return ociDiscovery.index({ index: ix, members: [ix], writable: ix.role === 'hosted' ? ix : null }, at(host, scheme)).client_configuration ?? {};
}

describe('OCI texts', () => {
  it('mirror Docker Hub under the name images are pulled by', () => {
    const hub = cached('hub', 'https://user:pass@registry-1.docker.io/?token=x');
    const hosts = ociTexts(hub, 'reg.internal:4433').containerd;
    expect(hosts?.path).toBe('/etc/containerd/certs.d/docker.io/hosts.toml');
    expect(hosts?.text).toBe('server = "https://registry-1.docker.io"\n\n[host."http://reg.internal:4433/v2/team/hub"]\n  capabilities = ["pull", "resolve"]\n  override_path = true\n');
    expect(JSON.stringify(ociTexts(hub, 'reg.internal:4433'))).not.toMatch(/pass|token=|login|push/);
  });

  it('over HTTPS: no insecure flags', () => {
    const texts = ociTexts(hosted('images'), 'reg.example.com', 'https');
    expect(Object.values(texts).map((t) => t.text).join('')).not.toMatch(/insecure|tls-verify|http:/);
    expect(texts.containerd?.text).toContain('[host."https://reg.example.com"]');
  });

  it('plain HTTP on a host that is not loopback: insecure flags, and docker is told about insecure-registries', () => {
    const texts = ociTexts(hosted('images'), 'reg.internal:4433');
    expect(texts.crane?.text).toContain('crane --insecure pull reg.internal:4433/team/images/<image>:<tag> image.tar');
    expect(texts.docker?.text).toContain('insecure-registries');
    expect(ociTexts(hosted('images'), '127.0.0.1:4433').docker?.text).not.toContain('insecure-registries');
  });
  it('a private index: the hosts.toml has a header table for the read token, a placeholder in it', () => {
    const texts = ociTexts({ ...hosted('vault'), private: true }, 'reg.internal:4433');
    expect(texts.containerd?.description).toMatch(/private: put a read token in the header$/);
    expect(texts.containerd?.text).toBe(
      [
        'server = "http://reg.internal:4433"',
        '',
        '[host."http://reg.internal:4433"]',
        '  capabilities = ["pull", "resolve", "push"]',
        '  [host."http://reg.internal:4433".header]',
        `    # printf '%s' "__token__:<read-token>" | base64 -w0`,
        '    Authorization = "Basic <base64>"',
        '',
      ].join('\n'),
    );
    const mirror = ociTexts({ ...cached('hub', 'https://registry-1.docker.io'), private: true }, 'reg.internal:4433').containerd?.text;
    expect(mirror).toContain('  override_path = true\n  [host."http://reg.internal:4433/v2/team/hub".header]\n');
    expect(ociTexts(hosted('open'), 'reg.internal:4433').containerd?.text).not.toContain('header');
  });
});

describe('the node mirror’s hosts.toml', () => {
  function mirrorText(registry: string, ix: IndexConfig, host: string, scheme: 'http' | 'https' = 'http'): ClientText | undefined {
    const origin = originOf({ host }, scheme);
    if (!origin) throw new Error(`no origin from ${host}`);
    return ociDiscovery.mirror?.(registry, { index: ix, members: [ix], writable: null }, origin).containerd;
  }

  it('points at the origin with no path; the fallback is the registry, from the upstream when that is the registry', () => {
    expect(mirrorText('docker.io', cached('hub', 'https://user:pass@registry-1.docker.io/?token=x'), 'reg.internal:4433')).toEqual({
      description: 'containerd: pull docker.io images through this endpoint (index "hub"), from docker.io itself when it has no answer (config_path of the CRI registry, or ctr --hosts-dir)',
      path: '/etc/containerd/certs.d/docker.io/hosts.toml',
      text: 'server = "https://registry-1.docker.io"\n\n[host."http://reg.internal:4433"]\n  capabilities = ["pull", "resolve"]\n',
    });
    // An upstream that is another host (a company mirror of the registry): the registry's own API host.
    expect(mirrorText('docker.io', cached('hub', 'https://mirror.corp.example/'), 'reg.internal:4433')?.text).toMatch(/^server = "https:\/\/registry-1\.docker\.io"\n/);
    expect(mirrorText('ghcr.io', cached('ghcr', 'https://mirror.corp.example/'), 'reg.internal:4433')?.text).toMatch(/^server = "https:\/\/ghcr\.io"\n/);
    // A registry on plain HTTP that velodex reaches as its upstream: its scheme and port.
    expect(mirrorText('10.0.0.5:5000', cached('lab', 'http://10.0.0.5:5000'), 'reg.internal:4433')?.text).toMatch(/^server = "http:\/\/10\.0\.0\.5:5000"\n/);
  });

  it('over HTTPS: a commented ca line for a private CA, never skip_verify; over HTTP neither', () => {
    const https = mirrorText('ghcr.io', cached('ghcr', 'https://ghcr.io'), 'reg.example.com', 'https')?.text ?? '';
    expect(https).toContain('[host."https://reg.example.com"]');
    expect(https).toContain('  # ca = "/etc/containerd/certs.d/ghcr.io/velodex-ca.crt"');
    expect(https).not.toMatch(/skip_verify|^\s*ca =/m);
    expect(mirrorText('ghcr.io', cached('ghcr', 'https://ghcr.io'), 'reg.internal:4433')?.text).not.toMatch(/ca =|skip_verify/);
  });
});

describe('Python texts', () => {
  const py = (ix: IndexConfig, host: string, scheme: 'http' | 'https' = 'http') =>
    pythonDiscovery.index({ index: ix, members: [ix], writable: ix.role === 'hosted' ? ix : null }, at(host, scheme)).client_configuration ?? {};

  it('trust a plain-HTTP host for pip only off loopback', () => {
    const ix = hosted('private', 'python');
    expect(py(ix, 'pkgs.internal').pip?.text).toBe('[global]\nindex-url = http://pkgs.internal/team/private/simple/\ntrusted-host = pkgs.internal\n');
    expect(py(ix, 'localhost:4433').pip?.text).not.toContain('trusted-host');
    expect(py(ix, 'pkgs.example.com', 'https').pip?.text).not.toContain('trusted-host');
  });

  it('uv: default = true exactly when the index reaches an upstream', () => {
    const pypi = cached('pypi', 'https://pypi.org/simple/', 'python');
    expect(py(pypi, 'pkgs.example.com', 'https').uv?.text).toBe('[[tool.uv.index]]\nname = "pypi"\nurl = "https://pkgs.example.com/team/pypi/simple/"\ndefault = true\n');
    expect(py(hosted('private', 'python'), 'pkgs.example.com', 'https').uv?.text).toBe(
      '[[tool.uv.index]]\nname = "private"\nurl = "https://pkgs.example.com/team/private/simple/"\npublish-url = "https://pkgs.example.com/team/private/"\n',
    );
  });
});

describe('the server-wide URLs', () => {
  const build = (raw: object) => new DiscoveryBuilder(buildConfig(raw, 'test', { ecosystems, env: {} }), new Map([['python', pythonDiscovery], ['oci', ociDiscovery]]));
  const hostedOnly = { index: [{ name: 'h', route: 'root/h', hosted: true }] };

  it('name /metrics only while it is served, and /v2/ only with an OCI index', () => {
    const origin = originOf({ host: 'pkgs.example.com' }, 'https');
    expect(build(hostedOnly).document(origin).urls).toEqual({
      api: 'https://pkgs.example.com/+api',
      status: 'https://pkgs.example.com/+status',
      stats: 'https://pkgs.example.com/+stats',
      metrics: 'https://pkgs.example.com/metrics',
      search: 'https://pkgs.example.com/+search',
    });
    expect(build({ ...hostedOnly, metrics: { enabled: false } }).document(origin).urls.metrics).toBeUndefined();
    expect(build({ ...hostedOnly, search: { enabled: false } }).document(origin).urls.search).toBeUndefined();
  });
});

describe('docs/python.md', () => {
  it('recommends for the hosted index exactly the uv table /+api returns', () => {
    const doc = readFileSync(join(REPO, 'docs', 'python.md'), 'utf8');
    const section = doc.slice(doc.indexOf('### uv projects'));
    const block = /```toml\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
    const recipe = block.replace(/ *#.*$/gm, '');
    const ix: HostedIndex = { ...hosted('hosted', 'python'), route: 'root/hosted', routeSegments: ['root', 'hosted'] };
    const text = pythonDiscovery.index({ index: ix, members: [ix], writable: ix }, at('127.0.0.1:4433')).client_configuration?.uv?.text;
    expect(recipe).toBe(text);
  });
});
