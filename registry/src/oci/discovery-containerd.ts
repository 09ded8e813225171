/**
 * containerd's `hosts.toml` for an OCI index (containerd docs/hosts.md). With an upstream in the
 * index's stack it is a mirror: pulls of the upstream's images (`docker.io/library/alpine`) go
 * to velodex first, with `override_path` because the route sits between `/v2/` and the
 * repository. Without one it makes the index's own image names pullable over the origin's scheme
 * (the CRI has no `--plain-http`).
 */
import type { Origin } from '../discovery/origin.js';
import type { ClientText, IndexView } from '../discovery/types.js';

/** Docker Hub's API host is not the name images are pulled by. */
const NAMESPACE_ALIASES: Record<string, string> = { 'registry-1.docker.io': 'docker.io', 'index.docker.io': 'docker.io' };

export function containerdHosts(view: IndexView, origin: Origin): ClientText {
  const cached = view.members.find((m) => m.role === 'cached');
  const upstream = cached?.role === 'cached' ? new URL(cached.upstream) : null;
  if (upstream) {
    const namespace = NAMESPACE_ALIASES[upstream.host] ?? upstream.host;
    return {
      description: `containerd: pull ${namespace} images through this index (config_path of the CRI registry, or ctr --hosts-dir)`,
      path: `/etc/containerd/certs.d/${namespace}/hosts.toml`,
      text: hostsToml(upstream.origin, `${origin.href}/v2/${view.index.route}`, ['pull', 'resolve'], true),
    };
  }
  return {
    description: `containerd: pull ${origin.host}/${view.index.route}/<image>:<tag> over ${origin.scheme} (config_path of the CRI registry, or ctr --hosts-dir)`,
    path: `/etc/containerd/certs.d/${origin.host}/hosts.toml`,
    text: hostsToml(origin.href, origin.href, view.writable ? ['pull', 'resolve', 'push'] : ['pull', 'resolve'], false),
  };
}

function hostsToml(server: string, host: string, capabilities: string[], overridePath: boolean): string {
  return [
    `server = ${JSON.stringify(server)}`,
    '',
    `[host.${JSON.stringify(host)}]`,
    `  capabilities = [${capabilities.map((c) => JSON.stringify(c)).join(', ')}]`,
    ...(overridePath ? ['  override_path = true'] : []),
    '',
  ].join('\n');
}
