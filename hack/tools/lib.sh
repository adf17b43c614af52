# shellcheck shell=bash
# Shared helpers for hack/tools/*.sh: one cache outside the clone, timing, linking into ./bin,
# the pinned versions (versions.env).
# Sourced, never run. Every tool lands in $CCSWEEP_CACHE/tools/<name>-<version>/ and is only
# rebuilt when its binaries are missing there (delete that folder to force a rebuild).

CCSWEEP_CACHE=${CCSWEEP_CACHE:-$HOME/.cache/ccsweep}
TOOLS_CACHE=$CCSWEEP_CACHE/tools
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REPO_BIN=${CCSWEEP_BIN:-$REPO_ROOT/bin}
# shellcheck source=../versions.sh
source "$REPO_ROOT/hack/versions.sh"
_T0=$(date +%s)

# One build of a tool at a time: a second caller (make tools beside a test that needs the tool)
# waits here, then finds the cache filled, instead of deleting the first one's staging folder.
mkdir -p "$TOOLS_CACHE"
exec {_TOOL_LOCK}> "$TOOLS_CACHE/.$(basename "$0" .sh).lock"
flock "$_TOOL_LOCK"

log() { printf '[%s %3ss] %s\n' "$(basename "$0" .sh)" "$(($(date +%s) - _T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Heavy work yields to colleagues on this 2-core machine.
heavy() { nice -n 19 "$@"; }

# have_all DIR NAME...: true when every NAME is an executable file in DIR.
have_all() {
  local dir=$1; shift
  local n
  for n in "$@"; do [[ -x $dir/$n ]] || return 1; done
}

# link_into_bin DIR NAME...: symlink DIR/NAME into the repo's ./bin (gitignored).
link_into_bin() {
  local dir=$1; shift
  mkdir -p "$REPO_BIN"
  local n
  for n in "$@"; do ln -sfn "$dir/$n" "$REPO_BIN/$n"; done
  log "linked into $REPO_BIN: $*"
}

# go_mod_field MODULE@VERSION FIELD: one field (Dir, GoMod, Version, ...) of `go mod download -json`.
go_mod_field() {
  go mod download -json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d.get("Error")) if d.get("Error") else print(d[sys.argv[1]])' "$2"
}

# publish STAGING FINAL: move a fully built folder into place, so a cache hit is never half a build.
publish() {
  rm -rf "$2"
  mv "$1" "$2"
}

done_msg() { log "done in $(($(date +%s) - _T0))s: $*"; }

# go_install_pinned NAME VERSION PACKAGE@VERSION BINARY [LDFLAGS]: `go install` into the cache
# folder $TOOLS_CACHE/NAME-VERSION (GOBIN), skipped when the binary is there; then linked into
# ./bin. LDFLAGS adds to "-s -w" (e.g. -X flags that stamp the version).
go_install_pinned() {
  local name=$1 version=$2 pkg=$3 binary=$4 ldflags="-s -w ${5:-}"
  local dest=$TOOLS_CACHE/$name-$version
  if have_all "$dest" "$binary"; then
    log "cached: $dest/$binary"
  else
    log "go install $pkg (nice 19)"
    local staging=$dest.partial
    rm -rf "$staging"; mkdir -p "$staging"
    GOBIN=$staging heavy go install -trimpath -ldflags "$ldflags" "$pkg"
    publish "$staging" "$dest"
  fi
  link_into_bin "$dest" "$binary"
}
