/**
 * The OCI part of the discovery documents: the registry root and image name prefix, what the
 * route can do, and the texts that point containerd, crane, skopeo and docker at it. Login lines
 * carry the placeholder `<upload-token>`, never the token; `<image>` and `<tag>` are the caller's.
 */
import { isLoopback, type Origin } from '../discovery/origin.js';
import type { ClientText, EcosystemDiscovery, IndexView } from '../discovery/types.js';
import { containerdHosts, containerdMirrorHosts } from './discovery-containerd.js';

export const ociDiscovery: EcosystemDiscovery = {
  serverUrls: (links) => ({ registry: links.url('/v2/') }),
  index(view, links) {
    const writable = view.writable !== null;
    return {
      urls: {
        registry: links.url('/v2/'),
        ...(links.origin ? { image_prefix: `${links.origin.host}/${view.index.route}/` } : {}),
      },
      capabilities: {
        pull: true,
        push: writable,
        delete: writable,
        cross_repository_mount: writable,
        tags_list: true,
        catalog: true,
        referrers: true,
        layer_contents: true,
        pull_through: view.members.some((m) => m.role === 'cached'),
      },
      ...(links.origin ? { client_configuration: clientTexts(view, links.origin) } : {}),
    };
  },
  mirror: (registry, view, origin) => ({ containerd: containerdMirrorHosts(registry, view, origin) }),
};

/** Shell lines; a `false` entry drops out (read-only indexes have no login or push lines). */
function shell(lines: (string | false)[]): string {
  return `${lines.filter((l): l is string => l !== false).join('\n')}\n`;
}

function clientTexts(view: IndexView, origin: Origin): Record<string, ClientText> {
  const w = view.writable !== null;
  const host = origin.host;
  const ref = `${host}/${view.index.route}/<image>:<tag>`;
  const plain = origin.scheme === 'http';
  const crane = plain ? 'crane --insecure' : 'crane';
  const login = (tool: string) => `printf '%s' '<upload-token>' | ${tool} -u __token__ --password-stdin`;
  return {
    containerd: containerdHosts(view, origin),
    crane: {
      description: w ? 'crane: log in (upload token), push an OCI layout directory or tarball, pull' : 'crane: pull',
      text: shell([
        w && login(`crane auth login ${host}`),
        w && `${crane} push ./image ${ref}`,
        `${crane} pull ${ref} image.tar`,
      ]),
    },
    skopeo: {
      description: w ? 'skopeo: log in (upload token), copy an OCI layout directory in, copy an image out' : 'skopeo: copy an image out',
      text: shell([
        w && login(`skopeo login${plain ? ' --tls-verify=false' : ''} ${host}`),
        w && `skopeo copy${plain ? ' --dest-tls-verify=false' : ''} oci:./image:<tag> docker://${ref}`,
        `skopeo copy${plain ? ' --src-tls-verify=false' : ''} docker://${ref} oci:./pulled:<tag>`,
      ]),
    },
    docker: {
      description: w ? 'docker: log in (upload token), push, pull' : 'docker: pull',
      text: shell([
        plain && !isLoopback(origin) && `# plain HTTP: add "${host}" to "insecure-registries" in /etc/docker/daemon.json first`,
        w && login(`docker login ${host}`),
        w && `docker tag <local-image> ${ref}`,
        w && `docker push ${ref}`,
        `docker pull ${ref}`,
      ]),
    },
  };
}
