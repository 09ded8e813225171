# The single-node Kubernetes cluster of the operator suites, built from the Go module proxy into a
# bin folder (stock kind cannot run here: its node image comes from Docker Hub). Sourced by
# hack/tools.sh; defines install_k8s_tools DIR. Also runs directly: `bash hack/k8s-tools.sh DIR`.
#
#   kube-apiserver kubectl (install_k8s_tools); kube-controller-manager kube-scheduler
#   kubelet kube-proxy (install_k8s_node_tools, for the end-to-end cluster)           v1.34.2
#   etcd                                                                              v3.6.6
#   helm                                                                              $HELM_VERSION
#   coredns (install_k8s_node_tools)                                                  $COREDNS_VERSION
#   Gateway API and cert-manager CRDs (install_k8s_crds, into another DIR)            $GATEWAY_API_VERSION, $CERT_MANAGER_VERSION
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod replaces every k8s.io/*
# staging module with ./staging/src/k8s.io/<name>. A scratch module that requires it and replaces
# each of those with the published module at the matching v0.x.y builds the commands unchanged.
# Cold, on two cores, this takes 15-25 minutes; with Go's caches warm, seconds. Each binary has a
# stamp file (DIR/.NAME.version) and is not rebuilt when the stamp matches.

KUBERNETES_VERSION=v1.34.2
KUBERNETES_STAGING_VERSION=v0.34.2
ETCD_VERSION=v3.6.6
HELM_VERSION=v3.19.2
# The test cluster's DNS (no image can be pulled: it is packed from this binary).
COREDNS_VERSION=v1.12.4

# go_install and its stamps (DIR/.NAME.version) come from go-tools.sh, sourced here when run alone.
if ! type -t go_install >/dev/null; then
  # shellcheck source=hack/go-tools.sh
  source "$(dirname "${BASH_SOURCE[0]}")/go-tools.sh"
fi

k8s_log() { if type -t log >/dev/null; then log "$@"; else printf '[k8s-tools] %s\n' "$*" >&2; fi; }

k8s_current() { # DIR NAME VERSION
  [ -x "$1/$2" ] && [ "$(cat "$1/.$2.version" 2>/dev/null)" = "$3" ]
}

# Kubernetes binaries report their version from variables the release build sets; without them
# the API server says v0.0.0-master, which kubectl and helm then misjudge.
k8s_version_flags() { # MODULE VERSION
  [ "$1" = k8s.io/kubernetes ] || return 0
  local v=$2 minor
  minor=$(printf '%s' "$v" | cut -d. -f2)
  local flags="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags="$flags -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  printf '%s' "$flags"
}

# Builds PACKAGES (import paths) of MODULE@VERSION from a scratch module; REPLACES is extra go.mod text.
k8s_scratch_build() { # DIR VERSION MODULE REPLACES NAME=PACKAGE...
  local dir=$1 version=$2 module=$3 replaces=$4 work name pkg pair stamp
  shift 4
  # The stamp names the build flavour too: binaries built before the version flags are rebuilt.
  stamp=$version
  if [ "$module" = k8s.io/kubernetes ]; then stamp="$version+version-flags"; fi
  local todo=()
  for pair in "$@"; do
    name=${pair%%=*}
    k8s_current "$dir" "$name" "$stamp" || todo+=("$pair")
  done
  [ ${#todo[@]} -eq 0 ] && return 0
  work=$(mktemp -d)
  cat > "$work/go.mod" <<MOD
module velodex.dev/k8s-tools

go 1.24

require $module $version

$replaces
MOD
  printf 'package tools\n' > "$work/tools.go"
  (cd "$work" && GOFLAGS=-mod=mod go mod download "$module" >/dev/null)
  for pair in "${todo[@]}"; do
    name=${pair%%=*}
    pkg=${pair#*=}
    k8s_log "go build $pkg ($version) -> $name"
    (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_version_flags "$module" "$version")" -o "$work/$name" "$pkg")
    mv -f "$work/$name" "$dir/$name"
    echo "$stamp" > "$dir/.$name.version"
  done
  rm -rf "$work"
}

# The replace lines: every `k8s.io/x => ./staging/src/k8s.io/x` of kubernetes' own go.mod, pointed
# at the published k8s.io/x module of the same release.
k8s_replaces() {
  local gomod
  gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$gomod" ] || { echo "cannot download k8s.io/kubernetes@$KUBERNETES_VERSION from the Go module proxy" >&2; return 1; }
  printf 'replace (\n'
  sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*#\t\1 => \1 '"$KUBERNETES_STAGING_VERSION"'#p' "$gomod"
  printf ')\n'
}

# What the API-server suites need: the control plane's API server and its etcd, kubectl, helm.
install_k8s_tools() {
  local dir=$1 replaces
  mkdir -p "$dir"
  command -v go >/dev/null || { echo "go is required to build the cluster binaries" >&2; return 1; }
  replaces=$(k8s_replaces)
  k8s_scratch_build "$dir" "$KUBERNETES_VERSION" k8s.io/kubernetes "$replaces" \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kubectl=k8s.io/kubernetes/cmd/kubectl
  k8s_scratch_build "$dir" "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "" etcd=go.etcd.io/etcd/server/v3
  install_k8s_clients "$dir"
}

# The CRDs of other projects whose kinds a PackageRegistry may ask for (spec.gatewayRoute: the
# Gateway API's HTTPRoute, standard channel; spec.tls.certManager: cert-manager's Certificate),
# which the API-server suite installs. Copied from each project's Go module, pinned, into
# DIR/<name>/*.yaml with a stamp (DIR/<name>/.version): not fetched again when it matches.
GATEWAY_API_VERSION=v1.6.3
CERT_MANAGER_VERSION=v1.21.2

k8s_module_crds() { # DIR NAME MODULE VERSION FOLDER
  local dir=$1/$2 module=$3 version=$4 folder=$5 src
  [ "$(cat "$dir/.version" 2>/dev/null)" = "$version" ] && return 0
  k8s_log "CRDs: $module@$version $folder -> $dir"
  # Outside any module: the repository has no go.mod of its own.
  src=$(cd / && GOFLAGS=-mod=mod go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  if [ -z "$src" ] || ! ls "$src/$folder"/*.yaml >/dev/null 2>&1; then
    echo "cannot get the CRDs of $module@$version ($folder/*.yaml) from the Go module proxy" >&2
    return 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$src/$folder"/*.yaml "$dir/"
  # The module cache's files are read-only.
  chmod u+w "$dir"/*.yaml
  echo "$version" > "$dir/.version"
}

install_k8s_crds() { # DIR
  command -v go >/dev/null || { echo "go is required to download the Gateway API and cert-manager CRDs" >&2; return 1; }
  k8s_module_crds "$1" gateway-api sigs.k8s.io/gateway-api "$GATEWAY_API_VERSION" config/crd/standard || return 1
  k8s_module_crds "$1" cert-manager github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" deploy/crds || return 1
}

# The clients alone (make kind-e2e): kubectl and helm.
install_k8s_clients() {
  local dir=$1
  mkdir -p "$dir"
  command -v go >/dev/null || { echo "go is required to build kubectl and helm" >&2; return 1; }
  k8s_current "$dir" kubectl "$KUBERNETES_VERSION+version-flags" || k8s_scratch_build "$dir" "$KUBERNETES_VERSION" k8s.io/kubernetes "$(k8s_replaces)" kubectl=k8s.io/kubernetes/cmd/kubectl
  k8s_scratch_build "$dir" "$HELM_VERSION" helm.sh/helm/v3 "" helm=helm.sh/helm/v3/cmd/helm
}

# kind, for `make kind-e2e` on a machine with Docker (the suites here never use it).
KIND_VERSION=v0.30.0
install_kind() {
  go_install "$1" kind sigs.k8s.io/kind "$KIND_VERSION"
}

# The rest of a single-node cluster (controller manager, scheduler, kubelet, kube-proxy), for the
# end-to-end suite with real pods.
install_k8s_node_tools() {
  local dir=$1 replaces
  mkdir -p "$dir"
  replaces=$(k8s_replaces)
  k8s_scratch_build "$dir" "$KUBERNETES_VERSION" k8s.io/kubernetes "$replaces" \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
    kubelet=k8s.io/kubernetes/cmd/kubelet \
    kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
  go_install "$dir" coredns github.com/coredns/coredns "$COREDNS_VERSION"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  install_k8s_tools "${1:?usage: k8s-tools.sh DIR [node]}"
  install_k8s_crds "$1/../crds"
  if [ "${2:-}" = node ]; then install_k8s_node_tools "$1"; fi
fi
