# Go programs for the OCI suites, built from the Go module proxy into a bin folder.
# Sourced by hack/tools.sh; defines install_go_tools DIR.
#
# Every version is pinned. Each binary has a stamp file (DIR/.NAME.version); a binary whose stamp
# matches the pinned version is not rebuilt, so a second run costs nothing.
#
# Only the Go module proxy is reachable (no github.com), and the proxy this machine and CI reach
# serves a fixed set of module versions: anything else answers 403 "This module version is not
# available", including `@latest`, `@<branch>` and `@<commit>` queries. Hence:
#   - oras: `go install oras.land/oras/cmd/oras@V` probes the path oras.land/oras/cmd/oras first,
#     gets 403 (fatal for go) and stops. We download the module oras.land/oras@V itself and build
#     ./cmd/oras inside a writable copy of it, with the module's own go.mod/go.sum.
#   - the distribution-spec conformance suite is a nested module
#     (github.com/opencontainers/distribution-spec/conformance) that has never been tagged, so
#     only pseudo-versions exist, and the checksum database (sum.golang.org) is not reachable, so
#     each suite's hash is pinned here and checked after download. Two suites run:
#       oci-conformance       the v1.1.1 release commit (a139cc423184), the ginkgo suite, built as
#                             a test binary (`go test -c`) the way it is meant to be run. The proxy
#                             answers 403 for its `.info` (so `go mod download` refuses it) but
#                             serves its `.mod` and `.zip`: the zip is fetched directly and its
#                             sha256 checked against CONFORMANCE_ZIP_SHA256.
#       oci-conformance-main  the newest main-line commit the proxy serves (2026-08-31, the
#                             redesigned suite configured by OCI_REGISTRY, OCI_REPO1, ...), built
#                             with `go build` from `go mod download` and its pinned h1: hash.

CRANE_VERSION=v0.22.1
REGCTL_VERSION=v0.11.7
ORAS_VERSION=v1.2.3
PROMTOOL_VERSION=v0.316.0
CONFORMANCE_MODULE=github.com/opencontainers/distribution-spec/conformance
CONFORMANCE_VERSION=v0.0.0-20250123160558-a139cc423184 # v1.1.1
CONFORMANCE_ZIP_SHA256=c5924bf4af67ec20e683cde59cf5e7ed4482669668741da59f2ad93e2c3a88b1
CONFORMANCE_MAIN_VERSION=v0.0.0-20260831232431-97274622c111
CONFORMANCE_MAIN_SUM=h1:ppZPU0CrEPzyJhVggYwUIZrqh0w2lIT0esw+9ABNPA4=
# The S3 server of the storage suites. MinIO publishes no semver tags the proxy serves; this
# pseudo-version (2026-02-12) is, and it answers 412 to a stale If-Match and to If-None-Match: *
# on an existing key, which the s3 MetaStore relies on (test/storage proves it).
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
# The upstream of the OCI pull-through suites (token auth, referrers). Installed as `distribution`,
# beside the bench's pinned `registry`, so the two versions never overwrite each other.
DISTRIBUTION_TEST_VERSION=v3.1.2

type -t log >/dev/null || log() { printf '[tools] %s\n' "$*" >&2; }

# True when DIR/NAME exists and was built for VERSION.
go_tool_current() { # DIR NAME VERSION
  [ -x "$1/$2" ] && [ "$(cat "$1/.$2.version" 2>/dev/null)" = "$3" ]
}

go_install() { # DIR NAME PACKAGE VERSION
  go_install_as "$1" "$2" "$3" "$4" "$2"
}

# go_install for a command whose binary name (BUILT) is taken: installed as NAME.
go_install_as() { # DIR NAME PACKAGE VERSION BUILT
  local dir=$1 name=$2 pkg=$3 version=$4 built=$5
  go_tool_current "$dir" "$name" "$version" && return 0
  log "go install $pkg@$version"
  local tmpbin
  mkdir -p "$dir"
  tmpbin=$(mktemp -d)
  GOBIN=$tmpbin GOFLAGS=-mod=mod go install -trimpath "$pkg@$version"
  mv -f "$tmpbin/$built" "$dir/$name"
  rm -rf "$tmpbin"
  echo "$version" > "$dir/.$name.version"
}

# Downloads MODULE@VERSION through the proxy, copies it to a writable temp dir and builds it there
# with the module's own go.mod and go.sum. MODE is "build" (a command at ./SUBDIR) or "test" (the
# test binary of the package at ./SUBDIR). SUM, when given, must equal the module's h1: hash.
go_build_module() { # DIR NAME MODULE VERSION SUBDIR MODE [SUM]
  local dir=$1 name=$2 module=$3 version=$4 subdir=$5 mode=$6 sum=${7:-}
  go_tool_current "$dir" "$name" "$version" && return 0
  log "go build $module@$version ($subdir) -> $name"
  local json src got work
  if [ -n "$sum" ]; then
    # No checksum-database record for this version: the pinned hash below stands in for it.
    json=$(GONOSUMDB=$module GOFLAGS=-mod=mod go mod download -json "$module@$version")
  else
    json=$(GOFLAGS=-mod=mod go mod download -json "$module@$version")
  fi
  if printf '%s' "$json" | grep -q '"Error"'; then
    printf '%s\n' "$json" >&2
    echo "cannot download $module@$version from the Go module proxy" >&2
    return 1
  fi
  src=$(printf '%s' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  got=$(printf '%s' "$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p')
  if [ -n "$sum" ] && [ "$got" != "$sum" ]; then
    echo "$module@$version: module hash $got, pinned $sum" >&2
    return 1
  fi
  build_module_source "$dir" "$name" "$version" "$src" "$subdir" "$mode"
}

# Builds a module source tree (read-only, as the module cache leaves it) in a writable copy, with
# the module's own go.mod and go.sum, and stamps the result.
build_module_source() { # DIR NAME VERSION SRC SUBDIR MODE
  local dir=$1 name=$2 version=$3 src=$4 subdir=$5 mode=$6 work
  work=$(mktemp -d)
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  if [ "$mode" = test ]; then
    (cd "$work" && GOFLAGS=-mod=readonly go test -c -trimpath -o "$work/.out" "./$subdir")
  else
    (cd "$work" && GOFLAGS=-mod=readonly go build -trimpath -o "$work/.out" "./$subdir")
  fi
  mv -f "$work/.out" "$dir/$name"
  rm -rf "$work"
  echo "$version" > "$dir/.$name.version"
}

# For a module version whose `.info` the proxy refuses while it serves the `.zip`: fetches the zip
# from the first proxy in GOPROXY, checks its sha256, and builds it like go_build_module.
go_build_module_zip() { # DIR NAME MODULE VERSION SUBDIR MODE SHA256
  local dir=$1 name=$2 module=$3 version=$4 subdir=$5 mode=$6 sha=$7 proxy tmp got
  go_tool_current "$dir" "$name" "$version" && return 0
  log "fetch $module@$version.zip -> $name"
  proxy=$(go env GOPROXY | cut -d, -f1 | cut -d'|' -f1)
  case "$proxy" in http://*|https://*) ;; *) echo "GOPROXY ($proxy) is not a proxy URL; cannot fetch $module@$version" >&2; return 1 ;; esac
  tmp=$(mktemp -d)
  if ! curl -fsSL --retry 3 -o "$tmp/module.zip" "$proxy/$module/@v/$version.zip"; then
    echo "cannot download $module@$version.zip from $proxy" >&2
    rm -rf "$tmp"
    return 1
  fi
  got=$(sha256sum "$tmp/module.zip" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "$module@$version: zip sha256 $got, pinned $sha" >&2
    rm -rf "$tmp"
    return 1
  fi
  python3 -m zipfile -e "$tmp/module.zip" "$tmp"
  build_module_source "$dir" "$name" "$version" "$tmp/$module@$version" "$subdir" "$mode"
  rm -rf "$tmp"
}

install_go_tools() {
  local dir=$1
  command -v go >/dev/null || { echo "go is required to build the OCI tools" >&2; return 1; }
  go_install "$dir" crane github.com/google/go-containerregistry/cmd/crane "$CRANE_VERSION"
  go_install "$dir" regctl github.com/regclient/regclient/cmd/regctl "$REGCTL_VERSION"
  # Prometheus's own checker of the /metrics exposition (the module's v0.3xx are Prometheus 3.x).
  go_install "$dir" promtool github.com/prometheus/prometheus/cmd/promtool "$PROMTOOL_VERSION"
  go_build_module "$dir" oras oras.land/oras "$ORAS_VERSION" cmd/oras build
  go_build_module_zip "$dir" oci-conformance "$CONFORMANCE_MODULE" "$CONFORMANCE_VERSION" . test "$CONFORMANCE_ZIP_SHA256"
  go_build_module "$dir" oci-conformance-main "$CONFORMANCE_MODULE" "$CONFORMANCE_MAIN_VERSION" . build "$CONFORMANCE_MAIN_SUM"
  # The module root is the server's main package, so go install builds it directly (a few minutes).
  go_install "$dir" minio github.com/minio/minio "$MINIO_VERSION"
  # About 70 s on 2 cores.
  go_install_as "$dir" distribution github.com/distribution/distribution/v3/cmd/registry "$DISTRIBUTION_TEST_VERSION" registry
}

# --- Optional: peers for `make bench` ------------------------------------------------------------
# Not part of install_go_tools (the suites do not need them; CI stays lean). `make bench-tools`
# calls install_bench_tools. The OCI peer is the CNCF Distribution registry (the reference
# registry, formerly docker/distribution); the proxy serves v3.0.0 (checked: v3.0.0-rc.3, -rc.4 and
# -beta.1 too), and `go install .../cmd/registry@v3.0.0` builds it directly (~2 min on 2 cores).
# If a pinned version ever stops being served, the build fails here, a note is left in
# DIR/.registry.unavailable, and the bench prints that it has no OCI peer; nothing else fails.
# (Fallback not needed today and therefore not wired: zot, zotregistry.dev/zot/cmd/zot, built from
# its downloaded module with go_build_module as oras is.)
DISTRIBUTION_VERSION=v3.0.0

# Like go_install, but reports failure as a status (go_install relies on set -e, which a tested
# call switches off) and never leaves a stamp behind a failed build.
bench_go_install() { # DIR NAME PACKAGE VERSION
  local dir=$1 name=$2 pkg=$3 version=$4 tmpbin
  go_tool_current "$dir" "$name" "$version" && return 0
  log "go install $pkg@$version"
  tmpbin=$(mktemp -d)
  if GOBIN=$tmpbin GOFLAGS=-mod=mod go install -trimpath "$pkg@$version" && mv -f "$tmpbin/$name" "$dir/$name"; then
    rm -rf "$tmpbin"
    echo "$version" > "$dir/.$name.version"
    return 0
  fi
  rm -rf "$tmpbin"
  return 1
}

install_bench_tools() {
  local dir=$1
  mkdir -p "$dir"
  command -v go >/dev/null || { echo "go is required to build the bench peers" >&2; return 1; }
  rm -f "$dir/.registry.unavailable"
  if ! bench_go_install "$dir" registry github.com/distribution/distribution/v3/cmd/registry "$DISTRIBUTION_VERSION"; then
    echo "distribution registry $DISTRIBUTION_VERSION could not be built from the Go module proxy" > "$dir/.registry.unavailable"
    log "distribution registry $DISTRIBUTION_VERSION could not be built; make bench runs without an OCI peer"
  fi
}

# Run directly (`bash hack/go-tools.sh bench DIR`) rather than sourced: install the bench peers.
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = bench ]; then
  set -euo pipefail
  install_bench_tools "${2:?usage: go-tools.sh bench DIR}"
fi
