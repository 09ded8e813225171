/**
 * containerd's `hosts.toml` for an OCI index (containerd docs/hosts.md). With an upstream in the
 * index's stack it is a mirror: pulls of the upstream's images (`docker.io/library/alpine`) go
 * to velodex first, with `override_path` because the route sits between `/v2/` and the
 * repository. Without one it makes the index's own image names pullable over the origin's scheme
 * (the CRI has no `--plain-http`). A private index is read with a credential, which containerd
 * sends from a header of the host entry; the text carries a placeholder, never a token.
 */
import type { Origin } from '../discovery/origin.js';
import type { ClientText, IndexView } from '../discovery/types.js';

/** Docker Hub's API host is not the name images are pulled by. */
const NAMESPACE_ALIASES: Record<string, string> = { 'registry-1.docker.io': 'docker.io', 'index.docker.io': 'docker.io' };

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

interface HostsFile {
  server: string;
  /** The host entry: velodex. */
  host: string;
  capabilities: string[];
  overridePath: boolean;
  /** Adds the header table containerd sends to the host on every request, with a placeholder credential. */
  privateIndex: boolean;
}

function hostsToml(f: HostsFile): string {
  const host = `host.${JSON.stringify(f.host)}`;
  return [
    `server = ${JSON.stringify(f.server)}`,
    '',
    `[${host}]`,
    `  capabilities = [${f.capabilities.map((c) => JSON.stringify(c)).join(', ')}]`,
    ...(f.overridePath ? ['  override_path = true'] : []),
    ...(f.privateIndex ? [`  [${host}.header]`, `    # printf '%s' "__token__:<read-token>" | base64 -w0`, '    Authorization = "Basic <base64>"'] : []),
    '',
  ].join('\n');
}
