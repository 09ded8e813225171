#!/usr/bin/env bash
# make kind-e2e: velodex on a kind cluster, for a machine with a running Docker engine where kind's
# node image (kindest/node, from Docker Hub) and MinIO's image can be pulled. Creates the cluster
# `velodex-e2e`, loads the image `make image` builds (no Docker build involved), and runs
# hack/e2e-flow.sh on it: helm install, the team example, pip, twine and crane through a
# PackageIndex. The cluster is deleted at the end unless KEEP_CLUSTER=1.
#
# Needs docker, go (kind, kubectl, helm and crane are built into .tools/bin when missing) and
# python3 (a venv in .tools/venv with pip, twine and build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=$ROOT/.tools
CLUSTER=${KIND_CLUSTER_NAME:-velodex-e2e}
log() { printf '[kind-e2e] %s\n' "$*" >&2; }

for cmd in docker go python3; do
  command -v "$cmd" >/dev/null || { echo "make kind-e2e needs $cmd on PATH" >&2; exit 1; }
done
docker info >/dev/null 2>&1 || { echo "make kind-e2e needs a running Docker engine (docker info failed)" >&2; exit 1; }

# shellcheck source=hack/python-tools.sh
source hack/python-tools.sh
# shellcheck source=hack/go-tools.sh
source hack/go-tools.sh
# shellcheck source=hack/k8s-tools.sh
source hack/k8s-tools.sh
mkdir -p "$TOOLS/bin"
install_python_tools "$TOOLS/venv"
go_install "$TOOLS/bin" crane github.com/google/go-containerregistry/cmd/crane "$CRANE_VERSION"
install_k8s_clients "$TOOLS/bin"
install_kind "$TOOLS/bin"
export PATH=$TOOLS/bin:$TOOLS/venv/bin:$PATH

log "the image, as an OCI archive (make image)"
make --no-print-directory image
WORK=$(mktemp -d)
export WORK KUBECONFIG=$WORK/kubeconfig

log "kind create cluster $CLUSTER"
kind create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" --wait 180s
if [ "${KEEP_CLUSTER:-}" != 1 ]; then trap 'kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true' EXIT; fi
kind load image-archive "$TOOLS/images/velodex.oci.tar" --name "$CLUSTER"

VELODEX_IMAGE_TAG=dev bash hack/e2e-flow.sh
log "passed"
[ "${KEEP_CLUSTER:-}" = 1 ] && log "the cluster stays: KUBECONFIG=$KUBECONFIG; kind delete cluster --name $CLUSTER"
exit 0
