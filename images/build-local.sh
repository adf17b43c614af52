#!/usr/bin/env bash
# build-local.sh [--import SOCKET] pause|rootfs|cell|argoexec
# The project's images WITHOUT Docker or a registry (the machines here reach package registries
# only). Prints the OCI archive's path on stdout; logs go to stderr.
#   pause   the sandbox image: the static pause binary from hack/tools/kubernetes.sh
#   rootfs  just the cached Debian bookworm minbase rootfs (debootstrap, ~1 min once)
#   cell    what images/cell/Dockerfile builds, assembled locally: the rootfs, plus a venv with
#           the ccsweep package with its operator extra (the chart's operator and node probe
#           run it), the emulator binary ccsweep-link, the sweep presets and traces.
#           Mahimahi is NOT in the local image (its source is on GitHub, unreachable here): the
#           Dockerfile builds it for users with internet; the label ccsweep.mahimahi says which.
#   argoexec  Argo's executor (images/argoexec/Dockerfile): the static argoexec binary from
#           hack/tools/argo.sh, alone with CA certificates; the controller's --executor-image.
# --import SOCKET (or CONTAINERD_ADDRESS): also `ctr -n k8s.io images import` the archive there,
# so pods can use it with imagePullPolicy: Never.
# Inputs of `cell` (each optional except the package; missing ones are reported and labelled):
#   CCSWEEP_PACKAGE_SRC  folder with pyproject.toml (default: the repo root)
#   CCSWEEP_LINK         emulator binary (default: $CCSWEEP_CACHE/cargo-target/release/ccsweep-link)
#   CCSWEEP_TRACES       folder of Mahimahi traces (default: the ones the package ships, src/ccsweep/traces)
# Outputs are cached in $CCSWEEP_CACHE/images/ by a hash of their inputs.
set -euo pipefail
shopt -s inherit_errexit

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../hack/versions.sh
source "$REPO_ROOT/hack/versions.sh"
CCSWEEP_CACHE=${CCSWEEP_CACHE:-$HOME/.cache/ccsweep}
IMAGES=$CCSWEEP_CACHE/images
REPO_BIN=${CCSWEEP_BIN:-$REPO_ROOT/bin}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# procps: `sysctl`, which the cell runner uses for per-namespace TCP buffer limits.
ROOTFS_PACKAGES=(python3 python3-venv iproute2 procps iperf3 ca-certificates)
CELL_IMAGE=${CCSWEEP_CELL_IMAGE:-localhost/ccsweep/cell:local}
ARGOEXEC_IMAGE=localhost/ccsweep/argoexec:$ARGO_WORKFLOWS_VERSION
PAUSE_IMAGE=localhost/ccsweep/pause:$KUBERNETES_VERSION
PY_TAG=3.11   # bookworm's python3
# pip for wheels and downloads: the project's venv (make venv) has one; a Debian python3 may not.
PIP_PYTHON=${PIP_PYTHON:-$REPO_ROOT/.venv/bin/python}
[[ -x $PIP_PYTHON ]] || PIP_PYTHON=python3
_T0=$(date +%s)

log() { printf '[build-local %3ss] %s\n' "$(($(date +%s) - _T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
short_hash() { sha256sum | cut -c1-12; }
file_hash() { if [[ -f ${1:-} ]]; then sha256sum < "$1" | cut -c1-12; else echo absent; fi; }
tree_hash() { if [[ -d ${1:-} ]]; then (cd "$1" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 -r sha256sum) | short_hash; else echo absent; fi; }
# prune DIR GLOB KEEP: delete DIR/GLOB except KEEP (older builds of the same image, ~400 MB each).
prune() { find "$1" -maxdepth 1 -name "$2" ! -path "$3" -exec rm -rf {} +; }
mkoci() { python3 "$REPO_ROOT/images/mkoci.py" "$@" >/dev/null; }

build_pause() {
  local bin=$REPO_BIN/pause
  [[ -x $bin ]] || die "$bin missing: run hack/tools/kubernetes.sh"
  local out
  out=$IMAGES/pause-$KUBERNETES_VERSION-$(file_hash "$bin").tar
  if [[ ! -s $out ]]; then
    local stage=$IMAGES/work/pause
    rm -rf "$stage"; mkdir -p "$stage"; cp "$bin" "$stage/pause"
    mkoci --name "$PAUSE_IMAGE" --out "$out" --root "$stage" --entrypoint /pause
    rm -rf "$stage"
    log "built $PAUSE_IMAGE"
  fi
  echo "$out"
}

rootfs_dir() { echo "$IMAGES/rootfs-$(printf '%s\n' "$SUITE" minbase "${ROOTFS_PACKAGES[@]}" | short_hash)"; }

build_rootfs() {
  local dir
  dir=$(rootfs_dir)
  if [[ -f $dir/.complete ]]; then
    log "cached rootfs $dir"
  else
    command -v debootstrap >/dev/null || die "debootstrap missing: run hack/tools/apt.sh"
    log "debootstrap --variant=minbase $SUITE with ${ROOTFS_PACKAGES[*]} (about 1 min)"
    rm -rf "$dir.partial"
    local inc; inc=$(IFS=,; echo "${ROOTFS_PACKAGES[*]}")
    DEBIAN_FRONTEND=noninteractive nice -n 19 debootstrap --variant=minbase --include="$inc" "$SUITE" "$dir.partial" "$MIRROR" >&2 \
      || die "debootstrap failed (log: $dir.partial/debootstrap/debootstrap.log)"
    rm -rf "$dir.partial"/var/cache/apt/archives/*.deb "$dir.partial"/var/lib/apt/lists/*
    touch "$dir.partial/.complete"
    rm -rf "$dir"; mv "$dir.partial" "$dir"
    prune "$IMAGES" 'rootfs-*' "$dir"
  fi
  echo "$dir"
}

# Wheels of ccsweep and all its dependencies for bookworm's CPython 3.11 (binary wheels only,
# fetched with the host's pip so the image build itself needs no network).
build_wheels() {
  local src=$1 wheels=$2
  rm -rf "$wheels"; mkdir -p "$wheels"
  # Build from a copy: setuptools would leave build/ and *.egg-info in the source tree.
  local copy=$wheels.src
  rm -rf "$copy"; mkdir -p "$copy"
  # sweeps/ too: the package's presets/ is a symlink to it.
  cp -r "$src/pyproject.toml" "$src/src" "$src/operator" "$src/sweeps" "$copy/"
  [[ ! -f $src/README.md ]] || cp "$src/README.md" "$copy/"
  log "pip wheel $src (from a copy)"
  "$PIP_PYTHON" -m pip wheel -q --no-deps -w "$wheels" "$copy" >&2
  rm -rf "$copy"
  local platforms=() v
  for v in 17 24 27 28 31 34 36; do platforms+=(--platform "manylinux_2_${v}_x86_64"); done
  log "pip download dependencies for CPython $PY_TAG manylinux"
  local wheel; wheel=$(echo "$wheels"/ccsweep-*.whl)
  "$PIP_PYTHON" -m pip download -q --only-binary=:all: --python-version "$PY_TAG" --implementation cp \
    "${platforms[@]}" --platform manylinux2014_x86_64 -c "$src/constraints.txt" -d "$wheels" "${wheel}[operator]" >&2
}

build_cell() {
  local src=${CCSWEEP_PACKAGE_SRC:-$REPO_ROOT}
  local link=${CCSWEEP_LINK:-$CCSWEEP_CACHE/cargo-target/release/ccsweep-link}
  local traces=${CCSWEEP_TRACES:-$REPO_ROOT/src/ccsweep/traces}
  [[ -f $src/pyproject.toml ]] || die "no pyproject.toml in $src (set CCSWEEP_PACKAGE_SRC)"
  local base; base=$(build_rootfs)

  local key
  key=$(printf '%s\n' "$base" "$(file_hash "$src/pyproject.toml")" "$(tree_hash "$src/src")" "$(tree_hash "$src/operator")" \
        "$(file_hash "$link")" "$(tree_hash "$REPO_ROOT/sweeps")" "$(tree_hash "$traces")" \
        "$(file_hash "$REPO_ROOT/images/mkoci.py")" "$(file_hash "$0")" | short_hash)
  local out=$IMAGES/cell-$key.tar
  if [[ -s $out ]]; then log "cached $out"; echo "$out"; return; fi

  local work=$IMAGES/work/cell-$key
  rm -rf "$work"; mkdir -p "$work/extra/usr/local/bin" "$work/extra/opt/ccsweep"
  build_wheels "$src" "$work/wheels"

  log "copying the rootfs and installing ccsweep into /opt/ccsweep/venv (chroot, no network)"
  cp -a "$base" "$work/root"
  cp -r "$work/wheels" "$work/root/tmp/wheels"
  local chroot_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
  chroot "$work/root" "${chroot_env[@]}" python3 -m venv /opt/ccsweep/venv
  chroot "$work/root" "${chroot_env[@]}" /opt/ccsweep/venv/bin/pip install -q --no-index \
    --find-links /tmp/wheels 'ccsweep[operator]' >&2
  rm -rf "$work/root/tmp/wheels" "$work/root/.complete"

  local labels=(--label "org.opencontainers.image.source=ccsweep images/build-local.sh")
  labels+=(--label "ccsweep.mahimahi=absent (needs GitHub; see images/cell/Dockerfile)")
  if [[ -x $link ]]; then cp "$link" "$work/extra/usr/local/bin/ccsweep-link"; labels+=(--label ccsweep.emulator=present)
  else log "WARNING: emulator binary $link not found: image has no ccsweep-link"; labels+=(--label ccsweep.emulator=absent); fi
  cp -r "$REPO_ROOT/sweeps" "$work/extra/opt/ccsweep/sweeps"   # presets by name (spec.py's search path)
  if [[ -d $traces ]]; then cp -r "$traces" "$work/extra/opt/ccsweep/traces"
  else log "WARNING: no traces at $traces"; mkdir -p "$work/extra/opt/ccsweep/traces"; fi

  mkoci --name "$CELL_IMAGE" --out "$out" --root "$work/root" --root "$work/extra" \
    --entrypoint ccsweep --cmd '["--help"]' \
    --env PATH=/opt/ccsweep/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env CCSWEEP_TRACES=/opt/ccsweep/traces --env CCSWEEP_LINK=/usr/local/bin/ccsweep-link \
    "${labels[@]}"
  rm -rf "$work"
  prune "$IMAGES" 'cell-*.tar' "$out"
  log "built $CELL_IMAGE ($(du -h "$out" | cut -f1))"
  echo "$out"
}

build_argoexec() {
  local bin=$REPO_BIN/argoexec
  [[ -x $bin ]] || die "$bin missing: run hack/tools/argo.sh"
  # ldd exits 1 for a static binary, hence the `|| true` (pipefail would take that as failure).
  grep -q 'not a dynamic executable' <<< "$(ldd "$bin" 2>&1 || true)" \
    || die "$bin is not static (hack/tools/argo.sh builds with CGO_ENABLED=0)"
  local out
  out=$IMAGES/argoexec-$ARGO_WORKFLOWS_VERSION-$(file_hash "$bin").tar
  if [[ ! -s $out ]]; then
    local stage=$IMAGES/work/argoexec
    rm -rf "$stage"; mkdir -p "$stage/bin" "$stage/etc/ssl/certs" "$stage/tmp"
    chmod 1777 "$stage/tmp"
    cp "$(readlink -f "$bin")" "$stage/bin/argoexec"
    cp /etc/ssl/certs/ca-certificates.crt "$stage/etc/ssl/certs/"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:8737:8737:nonroot:/home/nonroot:/sbin/nologin\n' > "$stage/etc/passwd"
    mkoci --name "$ARGOEXEC_IMAGE" --out "$out" --root "$stage" --entrypoint argoexec \
      --env PATH=/bin --label "org.opencontainers.image.source=ccsweep images/build-local.sh"
    rm -rf "$stage"
    log "built $ARGOEXEC_IMAGE ($(du -h "$out" | cut -f1))"
  fi
  echo "$out"
}

import_into() {
  local sock=$1 tar=$2
  log "importing $(basename "$tar") into containerd at $sock (namespace k8s.io)"
  ctr -a "$sock" -n k8s.io images import "$tar" >&2
}

main() {
  local sock=${CONTAINERD_ADDRESS:-}
  if [[ ${1:-} == --import ]]; then sock=$2; shift 2; fi
  mkdir -p "$IMAGES"
  local tar
  case ${1:-} in
    pause) tar=$(build_pause);;
    rootfs) build_rootfs; return;;
    cell) tar=$(build_cell);;
    argoexec) tar=$(build_argoexec);;
    *) sed -n '2,20p' "$0" >&2; exit 2;;
  esac
  [[ -z $sock ]] || import_into "$sock" "$tar"
  log "done in $(($(date +%s) - _T0))s"
  echo "$tar"
}
main "$@"
