#!/usr/bin/env bash
# Build Argo Workflows' argo CLI, workflow-controller and argoexec, pinned, from the Go module
# proxy only, plus the module's api/jsonschema/schema.json (for offline Workflow validation) and
# its minimal CRDs (what hack/cluster/argo.sh installs):
#   $CCSWEEP_CACHE/tools/argo-$ARGO_WORKFLOWS_VERSION/{argo,workflow-controller,argoexec,schema.json,crds/}
# `go install .../cmd/argo@VERSION` fails (its go.mod has replace directives), so: copy the module source
# out of the module cache, patch the two things the module zip lacks, and build it from a
# wrapper module that replaces argo-workflows with that copy. Cold ~5 min + downloads; warm ~1 min.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

MODULE=github.com/argoproj/argo-workflows/v3
# argoexec is also the executor image's whole content (images/argoexec/Dockerfile copies it).
BINARIES=(argo workflow-controller argoexec)
DEST=$TOOLS_CACHE/argo-$ARGO_WORKFLOWS_VERSION
WORK=$TOOLS_CACHE/build/argo-$ARGO_WORKFLOWS_VERSION

prepare_source() {
  local dir
  dir=$(go_mod_field "$MODULE@$ARGO_WORKFLOWS_VERSION" Dir)
  log "copying module source from $dir"
  rm -rf "$WORK/src"; mkdir -p "$WORK"
  cp -r "$dir" "$WORK/src"; chmod -R u+w "$WORK/src"
  # The UI is //go:embed-ed from ui/dist/app, which is not in the module zip: a placeholder page.
  mkdir -p "$WORK/src/ui/dist/app"
  echo '<html><body>argo UI not built (ccsweep uses the CLI)</body></html>' > "$WORK/src/ui/dist/app/index.html"
  # signal_linux.go is a symlink to signal_darwin.go upstream; the zip drops symlinks.
  cp "$WORK/src/workflow/executor/osspecific/signal_darwin.go" "$WORK/src/workflow/executor/osspecific/signal_linux.go"
}

write_wrapper_module() {
  cat > "$WORK/go.mod" <<EOM
module local/ccsweep-argobuild

go 1.25.7

require $MODULE $ARGO_WORKFLOWS_VERSION

replace $MODULE => ./src

// argo's CLI needs the pre-1.0 tablewriter API.
replace github.com/olekukonko/tablewriter => github.com/olekukonko/tablewriter v0.0.5
EOM
  cat > "$WORK/tools.go" <<EOM
//go:build tools

package tools

import (
	_ "$MODULE/cmd/argo/commands"
	_ "$MODULE/cmd/argoexec/commands"
	_ "$MODULE/workflow/controller"
)
EOM
  log "go mod tidy (resolves argo's dependencies once)"
  (cd "$WORK" && heavy go mod tidy)
}

build_binaries() {
  local out=$1 b pkgs=()
  for b in "${BINARIES[@]}"; do pkgs+=("$MODULE/cmd/$b"); done
  log "go build ${BINARIES[*]} (static, nice 19; cold ~5 min)"
  # Static like upstream's images: argoexec is copied into every workflow pod (emissary
  # executor) and must run there whatever the image's libc is.
  (cd "$WORK" && CGO_ENABLED=0 heavy go build -trimpath -ldflags "-s -w -X $MODULE.version=$ARGO_WORKFLOWS_VERSION" -o "$out/" "${pkgs[@]}")
  cp "$WORK/src/api/jsonschema/schema.json" "$out/schema.json"
  mkdir -p "$out/crds"
  cp "$WORK/src/manifests/base/crds/minimal/"argoproj.io_*.yaml "$out/crds/"
}

# bin/argo-render (hack/tools/argo-render/main.go): the controller's substitution and podSpecPatch
# code from the same module copy, for tests/workflows/test_hostile_parameters.py. Cached by the
# source's hash, so an edit of main.go rebuilds it (seconds once argo is built).
build_render() {
  local source=$REPO_ROOT/hack/tools/argo-render/main.go
  local hash dest
  hash=$(sha256sum "$source" | cut -c1-12)
  dest=$TOOLS_CACHE/argo-render-$ARGO_WORKFLOWS_VERSION-$hash
  if ! have_all "$dest" argo-render; then
    [[ -s $WORK/go.mod && -d $WORK/src ]] || { prepare_source; write_wrapper_module; }
    mkdir -p "$WORK/render" "$dest.partial"
    cp "$source" "$WORK/render/main.go"
    log "go build argo-render"
    (cd "$WORK" && CGO_ENABLED=0 heavy go build -trimpath -o "$dest.partial/argo-render" ./render)
    publish "$dest.partial" "$dest"
  fi
  link_into_bin "$dest" argo-render
}

main() {
  if have_all "$DEST" "${BINARIES[@]}" && [[ -s $DEST/schema.json && -s $DEST/crds/argoproj.io_workflows.yaml ]]; then
    log "cached: $DEST"
  else
    log "building Argo Workflows $ARGO_WORKFLOWS_VERSION into $DEST"
    prepare_source
    write_wrapper_module
    local staging=$DEST.partial
    rm -rf "$staging"; mkdir -p "$staging"
    build_binaries "$staging"
    publish "$staging" "$DEST"
  fi
  "$DEST/${BINARIES[0]}" version --short
  link_into_bin "$DEST" "${BINARIES[@]}"
  build_render
  ln -sfn "$DEST/schema.json" "$REPO_BIN/argo-workflows-schema.json"
  done_msg "Argo Workflows $ARGO_WORKFLOWS_VERSION"
}
main "$@"
