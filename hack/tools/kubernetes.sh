#!/usr/bin/env bash
# Build the Kubernetes node and control-plane binaries, kubectl and the pause binary, pinned,
# from the Go module proxy only (no GitHub, no release downloads):
#   $CCSWEEP_CACHE/tools/kubernetes-$KUBERNETES_VERSION/{kube-apiserver,...,kubectl,pause}
# k8s.io/kubernetes is not `go install`-able: its go.mod replaces every k8s.io/* staging module
# with ./staging/... . A scratch wrapper module requires it and replaces each of those with the
# published module of the matching v0.x version instead. Cold ~6 min / 2 GB; warm seconds.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

K8S_VERSION=${KUBERNETES_VERSION#v}           # 1.M.P, as the module versions are built from it
STAGING_VERSION=0.${K8S_VERSION#1.}          # the staging modules of 1.M.P are v0.M.P
MINOR=${K8S_VERSION#1.}; MINOR=${MINOR%%.*}
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
DEST=$TOOLS_CACHE/kubernetes-v$K8S_VERSION
WORK=$TOOLS_CACHE/build/kubernetes-v$K8S_VERSION

write_wrapper_module() {
  local upstream_mod
  upstream_mod=$(go_mod_field "k8s.io/kubernetes@v$K8S_VERSION" GoMod)
  mkdir -p "$WORK"
  {
    printf 'module local/ccsweep-kubebuild\n\ngo 1.24.0\n\ngodebug default=go1.24\n\n'
    printf 'require k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    awk -v v="$STAGING_VERSION" '/=> \.\/staging/ {print "\t" $1 " => " $1 " v" v}' "$upstream_mod"
    echo ')'
  } > "$WORK/go.mod"
  log "wrapper module: $(grep -c ' => ' "$WORK/go.mod") staging modules replaced by v$STAGING_VERSION"
}

build_binaries() {
  local out=$1 ld="-s -w" p pkgs=()
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
  done
  for p in "${BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$p"); done
  log "go build ${BINARIES[*]} (nice 19; cold ~6 min)"
  (cd "$WORK" && GOFLAGS=-mod=mod heavy go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}")
}

build_pause() {
  local out=$1 src
  src=$(go_mod_field "k8s.io/kubernetes@v$K8S_VERSION" Dir)/build/pause/linux/pause.c
  log "gcc -static pause ($src)"
  heavy gcc -Os -static -o "$out/pause" "$src"
}

main() {
  if have_all "$DEST" "${BINARIES[@]}" pause; then
    log "cached: $DEST"
  else
    log "building Kubernetes v$K8S_VERSION into $DEST"
    write_wrapper_module
    local staging=$DEST.partial
    rm -rf "$staging"; mkdir -p "$staging"
    build_binaries "$staging"
    build_pause "$staging"
    publish "$staging" "$DEST"
  fi
  "$DEST/kube-apiserver" --version
  link_into_bin "$DEST" "${BINARIES[@]}" pause
  done_msg "Kubernetes v$K8S_VERSION"
}
main "$@"
