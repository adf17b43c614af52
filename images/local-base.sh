#!/usr/bin/env bash
# images/local-base.sh
# Where no container registry is reachable (this project's test machines), puts the base images
# images/cell/Dockerfile starts FROM into buildah's local storage under the names it uses, so
# `images/build.sh` builds the Dockerfile unchanged with `--pull=never`:
#   debian:bookworm, debian:bookworm-slim  the Debian bookworm minbase root file system that
#                                           images/build-local.sh debootstraps (cached)
#   rust:1-bookworm                         that root file system plus gcc and libc6-dev (apt) and
#                                           this machine's Rust toolchain (rustc --print sysroot),
#                                           at /usr/local/rust, CARGO_HOME /usr/local/cargo
# RUN steps of the build still reach Debian's packages, PyPI and crates.io as usual, trusting what
# this machine trusts: its CA bundle goes into the base images as /etc/ssl/host-ca-bundle.crt (a
# path apt's ca-certificates leaves alone) and SSL_CERT_FILE, PIP_CERT and CARGO_HTTP_CAINFO name
# it (where the registries are reached through a TLS-inspecting proxy, that CA is in it). A machine
# that can pull from Docker Hub needs none of this. Idempotent: images already present are kept.
set -euo pipefail
shopt -s inherit_errexit

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "local-base: $*" >&2; }
HOST_CA=${HOST_CA:-/etc/ssl/certs/ca-certificates.crt}

present() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# A one-layer image from a directory, with the PATH a Debian image has.
from_dir() {
  local dir=$1 name=$2 ctr mnt
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$dir/." "$mnt/"
  rm -f "$mnt/.complete"
  cp "$HOST_CA" "$mnt/etc/ssl/host-ca-bundle.crt"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash \
    --env SSL_CERT_FILE=/etc/ssl/host-ca-bundle.crt --env PIP_CERT=/etc/ssl/host-ca-bundle.crt \
    --env CARGO_HTTP_CAINFO=/etc/ssl/host-ca-bundle.crt "$ctr"
  buildah commit -q --rm "$ctr" "$name" >/dev/null
  log "$name from $dir"
}

main() {
  command -v buildah >/dev/null || { log "buildah not found (hack/tools/apt.sh installs it)"; exit 1; }
  local rootfs
  rootfs=$("$REPO_ROOT/images/build-local.sh" rootfs)
  present debian:bookworm || from_dir "$rootfs" debian:bookworm
  present debian:bookworm-slim || buildah tag debian:bookworm debian:bookworm-slim
  if ! present rust:1-bookworm; then
    local sysroot ctr mnt
    sysroot=$(rustc --print sysroot)
    ctr=$(buildah from --pull=never debian:bookworm)
    buildah run --isolation chroot "$ctr" -- sh -c \
      'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/*'
    mnt=$(buildah mount "$ctr")
    mkdir -p "$mnt/usr/local/rust" "$mnt/usr/local/cargo"
    cp -a "$sysroot/bin" "$sysroot/lib" "$mnt/usr/local/rust/"
    buildah umount "$ctr" >/dev/null
    buildah config --env CARGO_HOME=/usr/local/cargo \
      --env PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
    buildah commit -q --rm "$ctr" rust:1-bookworm >/dev/null
    log "rust:1-bookworm with $(rustc --version)"
  fi
  buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E '/(debian|rust):' >&2 || true
}
main "$@"
