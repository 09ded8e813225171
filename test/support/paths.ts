/** Where the repository, the built server and the tools of `hack/tools.sh` live. */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const TOOLS = join(REPO, '.tools');
export const CLI = join(REPO, 'registry', 'dist', 'cli.js');

const TOOL_PATHS: Record<string, string> = {
  python: join(TOOLS, 'venv', 'bin', 'python'),
  pip: join(TOOLS, 'venv', 'bin', 'pip'),
  uv: join(TOOLS, 'venv', 'bin', 'uv'),
  twine: join(TOOLS, 'venv', 'bin', 'twine'),
  'pypi-server': join(TOOLS, 'venv', 'bin', 'pypi-server'),
  crane: join(TOOLS, 'bin', 'crane'),
  oras: join(TOOLS, 'bin', 'oras'),
  regctl: join(TOOLS, 'bin', 'regctl'),
  promtool: join(TOOLS, 'bin', 'promtool'),
  minio: join(TOOLS, 'bin', 'minio'),
  etcd: join(TOOLS, 'bin', 'etcd'),
  'kube-apiserver': join(TOOLS, 'bin', 'kube-apiserver'),
  kubectl: join(TOOLS, 'bin', 'kubectl'),
  helm: join(TOOLS, 'bin', 'helm'),
  'kube-controller-manager': join(TOOLS, 'bin', 'kube-controller-manager'),
  'kube-scheduler': join(TOOLS, 'bin', 'kube-scheduler'),
  kubelet: join(TOOLS, 'bin', 'kubelet'),
  'kube-proxy': join(TOOLS, 'bin', 'kube-proxy'),
  coredns: join(TOOLS, 'bin', 'coredns'),
  // Folders of CRD manifests other projects publish (hack/k8s-tools.sh install_k8s_crds).
  'gateway-api-crds': join(TOOLS, 'crds', 'gateway-api'),
  'cert-manager-crds': join(TOOLS, 'crds', 'cert-manager'),
  conformance: join(TOOLS, 'bin', 'oci-conformance'),
  distribution: join(TOOLS, 'bin', 'distribution'),
  'conformance-main': join(TOOLS, 'bin', 'oci-conformance-main'),
  skopeo: '/usr/bin/skopeo',
  containerd: '/usr/bin/containerd',
  ctr: '/usr/bin/ctr',
  // Debian's docker.io: its engine and its CLI (another docker CLI may sit earlier in PATH).
  dockerd: '/usr/sbin/dockerd',
  docker: '/usr/bin/docker',
  curl: '/usr/bin/curl',
};

/**
 * The absolute path of a tool the suites drive. A missing tool fails the test that needs it with
 * an instruction; it never skips.
 */
export function tool(name: keyof typeof TOOL_PATHS | string): string {
  const path = TOOL_PATHS[name];
  if (!path) throw new Error(`unknown tool "${name}"`);
  if (!existsSync(path)) throw new Error(`${name} is not installed at ${path}: run "bash hack/tools.sh" (make tools)`);
  return path;
}
