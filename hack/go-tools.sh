# Go programs for the OCI suites, built from the Go module proxy into a bin folder.
# Sourced by hack/tools.sh; defines install_go_tools DIR.

CRANE_VERSION=v0.22.1
REGCTL_VERSION=latest

go_install() { # DIR NAME PACKAGE@VERSION
  local dir=$1 name=$2 pkg=$3
  [ -x "$dir/$name" ] && return 0
  log "go install $pkg"
  GOBIN=$dir GOFLAGS=-mod=mod go install "$pkg"
}

install_go_tools() {
  local dir=$1
  command -v go >/dev/null || { echo "go is required to build the OCI tools" >&2; return 1; }
  go_install "$dir" crane "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
  go_install "$dir" regctl "github.com/regclient/regclient/cmd/regctl@$REGCTL_VERSION"
}
