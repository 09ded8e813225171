#!/usr/bin/env bash
# Installs, idempotently, the real programs the test suites drive, into .tools/ (ignored by git):
#   .tools/venv      pip, uv, twine, build (PyPI, pinned in hack/python-tools.txt)
#   .tools/bin       crane, oras, regctl, promtool, the OCI conformance suites (Go module proxy)
#   skopeo           Debian package
#   containerd, ctr  Debian package (the ctr suite starts its own private daemon)
#   lua5.4, cjson    Debian packages (the Argo CD health checks of docs/gitops.md run on them)
#   .tools/bin       etcd, kube-apiserver and the other cluster binaries, kubectl, helm, CoreDNS
#                    (Go module proxy, hack/k8s-tools.sh; 15-25 min cold, seconds warm)
#   .tools/crds      the Gateway API's and cert-manager's CRDs (their Go modules, hack/k8s-tools.sh)
#   curl, strace, wrk  Debian packages (make bench: its large-download clients, file system call
#                    counts, the C load generator of the worker rows)
#   CNI plugins, iptables, iproute2, openssl, gcc
#                    Debian packages (the end-to-end cluster: pod network, kube-proxy, its
#                    certificates, the pause binary)
#   .tools/images    pause, MinIO and CoreDNS images for that cluster (hack/cluster/images.ts)
# A tool that cannot be installed stops this script with an error: the suites never skip.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=$ROOT/.tools
mkdir -p "$TOOLS/bin"

log() { printf '[tools] %s\n' "$*" >&2; }

# --- Python clients --------------------------------------------------------------------------
# shellcheck source=hack/python-tools.sh
source hack/python-tools.sh
install_python_tools "$TOOLS/venv"

# --- Debian packages -------------------------------------------------------------------------
apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
# chromium (and a font for its text): the web UI suites drive it through playwright-core, whose own
# browser download cannot work here.
apt_install skopeo containerd docker.io lua5.4 lua-cjson containernetworking-plugins iptables iproute2 openssl gcc libc6-dev curl strace wrk chromium fonts-dejavu-core

# --- Go programs -----------------------------------------------------------------------------
# shellcheck source=hack/go-tools.sh
source hack/go-tools.sh
install_go_tools "$TOOLS/bin"

# --- Kubernetes: the operator suites' API server (and cluster), kubectl, helm -----------------
# shellcheck source=hack/k8s-tools.sh
source hack/k8s-tools.sh
install_k8s_tools "$TOOLS/bin"
install_k8s_crds "$TOOLS/crds"
install_k8s_node_tools "$TOOLS/bin"

# --- Images of the end-to-end cluster (pause, MinIO, CoreDNS), packed without a registry --------
want_images=$(cat hack/cluster/images.ts hack/image/oci-archive.ts "$TOOLS/bin/.minio.version" "$TOOLS/bin/.coredns.version" | sha256sum | cut -c1-16)
if [ "$(cat "$TOOLS/images/.stamp" 2>/dev/null)" != "$want_images" ]; then
  log "cluster images: pause, minio, coredns"
  node --import tsx hack/cluster/images.ts "$TOOLS/images"
  echo "$want_images" > "$TOOLS/images/.stamp"
fi

log "all tools present"
