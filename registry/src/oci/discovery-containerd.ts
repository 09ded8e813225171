/**
 * containerd's `hosts.toml` for an OCI index (containerd docs/hosts.md). With an upstream in the
 * index's stack it is a mirror: pulls of the upstream's images (`docker.io/library/alpine`) go
 * to velodex first, with `override_path` because the route sits between `/v2/` and the
 * repository. Without one it makes the index's own image names pullable over the origin's scheme
 * (the CRI has no `--plain-http`). A private index is read with a credential, which containerd
 * sends from a header of the host entry; the text carries a placeholder, never a token.
 *
 * A registry of `[[mirror]]` gets the text of the one endpoint instead (`containerdMirrorHosts`):
 * no route in the path, containerd's `ns` names the registry on each request.
 */
import { registryHost } from '../config/mirrors.js';
import type { Origin } from '../discovery/origin.js';
import type { ClientText, IndexView } from '../discovery/types.js';
import { ociFacts } from './facts.js';

/** Docker Hub's API host is not the name images are pulled by (`docker.io`). */
const NAMESPACE_ALIASES = ociFacts.mirror?.aliases ?? {};
/** Where a registry's API answers when that is not the name images carry. */
const API_HOSTS: Record<string, string> = { 'docker.io': 'registry-1.docker.io' };

export function containerdHosts(view: IndexView, origin: Origin): ClientText {
  const cached = view.members.find((m) => m.role === 'cached');
  const upstream = cached?.role === 'cached' ? new URL(cached.upstreams[0].url) : null;
  const credentials = view.index.private ? '; private: put a read token in the header' : '';
  if (upstream) {
    const namespace = NAMESPACE_ALIASES[upstream.host] ?? upstream.host;
    return {
      description: `containerd: pull ${namespace} images through this index (config_path of the CRI registry, or ctr --hosts-dir)${credentials}`,
      path: `/etc/containerd/certs.d/${namespace}/hosts.toml`,
      text: hostsToml({ server: upstream.origin, host: `${origin.href}/v2/${view.index.route}`, capabilities: ['pull', 'resolve'], overridePath: true, privateIndex: view.index.private }),
    };
  }
  return {
    description: `containerd: pull ${origin.host}/${view.index.route}/<image>:<tag> over ${origin.scheme} (config_path of the CRI registry, or ctr --hosts-dir)${credentials}`,
    path: `/etc/containerd/certs.d/${origin.host}/hosts.toml`,
    text: hostsToml({
      server: origin.href,
      host: origin.href,
      capabilities: view.writable ? ['pull', 'resolve', 'push'] : ['pull', 'resolve'],
      overridePath: false,
      privateIndex: view.index.private,
    }),
  };
}

/**
 * The `hosts.toml` of registry `registry` (canonical, config/mirrors.ts) on a node whose pulls go
 * to this endpoint first: `server` is the registry itself, where containerd goes when velodex
 * answers 404 or is down (an upstream of the index that is the registry, for its scheme and
 * port; else the registry's API host as containerd would reach it without a `server`: https, or
 * plain HTTP on loopback); the host entry is velodex's origin, no path.
 */
export function containerdMirrorHosts(registry: string, view: IndexView, origin: Origin): ClientText {
  const credentials = view.index.private ? '; private: put a read token in the header' : '';
  return {
    description: `containerd: pull ${registry} images through this endpoint (index "${view.index.name}"), from ${registry} itself when it has no answer (config_path of the CRI registry, or ctr --hosts-dir)${credentials}`,
    path: `/etc/containerd/certs.d/${registry}/hosts.toml`,
    text: hostsToml({ server: registryServer(registry, view), host: origin.href, capabilities: ['pull', 'resolve'], overridePath: false, privateIndex: view.index.private, caHint: origin.scheme === 'https' ? registry : undefined }),
  };
}

function registryServer(registry: string, view: IndexView): string {
  const cached = view.members.find((m) => m.role === 'cached');
  // The first of the index's upstreams that is the registry itself (its scheme and port).
  const upstream = cached?.role === 'cached' ? cached.upstreams.map((u) => new URL(u.url)).find((u) => registryHost(u.host, NAMESPACE_ALIASES) === registry) : undefined;
  if (upstream) return upstream.origin;
  // containerd's own default for a registry without a `server`: plain HTTP on loopback, else https.
  return `${isLoopbackHost(registry) ? 'http' : 'https'}://${API_HOSTS[registry] ?? registry}`;
}

function isLoopbackHost(registry: string): boolean {
  const name = registry.replace(/:[0-9]+$/, '');
  return name === 'localhost' || name === '[::1]' || /^127\.[0-9.]+$/.test(name);
}

interface HostsFile {
  server: string;
  /** The host entry: velodex. */
  host: string;
  capabilities: string[];
  overridePath: boolean;
  /** Adds the header table containerd sends to the host on every request, with a placeholder credential. */
  privateIndex: boolean;
  /**
   * The folder of the file, when velodex serves HTTPS: a commented `ca` line for a certificate of
   * a private CA (docs/tls.md). Never `skip_verify`.
   */
  caHint?: string | undefined;
}

function hostsToml(f: HostsFile): string {
  const host = `host.${JSON.stringify(f.host)}`;
  return [
    `server = ${JSON.stringify(f.server)}`,
    '',
    `[${host}]`,
    `  capabilities = [${f.capabilities.map((c) => JSON.stringify(c)).join(', ')}]`,
    ...(f.overridePath ? ['  override_path = true'] : []),
    ...(f.caHint !== undefined ? ['  # velodex\'s certificate from a private CA: copy the CA here and uncomment', `  # ca = ${JSON.stringify(`/etc/containerd/certs.d/${f.caHint}/velodex-ca.crt`)}`] : []),
    ...(f.privateIndex ? [`  [${host}.header]`, `    # printf '%s' "__token__:<read-token>" | base64 -w0`, '    Authorization = "Basic <base64>"'] : []),
    '',
  ].join('\n');
}
