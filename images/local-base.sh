#!/usr/bin/env bash
# images/local-base.sh cell|argoexec|pause
# Where no container registry is reachable (this project's test machines), puts the base images an
# image's Dockerfile starts FROM into buildah's local storage under the names it uses, so
# `images/build.sh --local-base` builds the Dockerfile unchanged with `--pull=never`:
#   debian:bookworm, debian:bookworm-slim  a Debian bookworm minbase root file system, made with
#                                           debootstrap from Debian's mirror (cached in
#                                           $CCSWEEP_CACHE/images/rootfs-*, ~1 min once)
#   rust:1-bookworm       (cell)            that root file system plus gcc and libc6-dev (apt) and
#                                           this machine's Rust toolchain (rustc --print sysroot),
#                                           at /usr/local/rust, CARGO_HOME /usr/local/cargo
#   gcr.io/distroless/static-debian12 (argoexec)  what the distroless image gives a static binary:
#                                           this machine's CA bundle, /etc/passwd and /etc/group
#                                           with root, nobody and nonroot (65532), /tmp
# The pause image starts FROM scratch and needs none. RUN steps of a build still reach Debian's
# packages, PyPI and crates.io as usual, trusting what this machine trusts:
# its CA bundle goes into the base images as /etc/ssl/host-ca-bundle.crt (a path apt's
# ca-certificates leaves alone) and SSL_CERT_FILE, PIP_CERT and CARGO_HTTP_CAINFO name it (where
# the registries are reached through a TLS-inspecting proxy, that CA is in it). A machine that can
# pull from Docker Hub needs none of this. Idempotent: images already present are kept.
set -euo pipefail
shopt -s inherit_errexit

CCSWEEP_CACHE=${CCSWEEP_CACHE:-$HOME/.cache/ccsweep}
IMAGES=$CCSWEEP_CACHE/images
HOST_CA=${HOST_CA:-/etc/ssl/certs/ca-certificates.crt}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# What the Dockerfiles' RUN steps need before their own apt-get: ca-certificates for https.
ROOTFS_PACKAGES=(ca-certificates)
log() { echo "local-base: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

present() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# The debootstrap minbase root file system, built once into the cache (keyed by what it holds).
rootfs() {
  local dir
  dir=$IMAGES/rootfs-$(printf '%s\n' "$SUITE" minbase "${ROOTFS_PACKAGES[@]}" | sha256sum | cut -c1-12)
  if [[ ! -f $dir/.complete ]]; then
    command -v debootstrap >/dev/null || die "debootstrap not found (hack/tools/apt.sh installs it)"
    log "debootstrap --variant=minbase $SUITE into $dir (about 1 min)"
    rm -rf "$dir.partial"; mkdir -p "$IMAGES"
    local include; include=$(IFS=,; echo "${ROOTFS_PACKAGES[*]}")
    DEBIAN_FRONTEND=noninteractive nice -n 19 debootstrap --variant=minbase --include="$include" \
      "$SUITE" "$dir.partial" "$MIRROR" >&2 || die "debootstrap failed (log: $dir.partial/debootstrap/debootstrap.log)"
    rm -rf "$dir.partial"/var/cache/apt/archives/*.deb "$dir.partial"/var/lib/apt/lists/*
    touch "$dir.partial/.complete"
    rm -rf "$dir"; mv "$dir.partial" "$dir"
    find "$IMAGES" -maxdepth 1 -name 'rootfs-*' ! -path "$dir" ! -name '*.partial' -exec rm -rf {} +
  fi
  echo "$dir"
}

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

debian() {
  present debian:bookworm || from_dir "$(rootfs)" debian:bookworm
  present debian:bookworm-slim || buildah tag debian:bookworm debian:bookworm-slim
}

rust() {
  present rust:1-bookworm && return
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
}

distroless_static() {
  local name=gcr.io/distroless/static-debian12:latest ctr mnt
  present "$name" && return
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  mkdir -p "$mnt/etc/ssl/certs" "$mnt/tmp" "$mnt/home/nonroot" "$mnt/root"
  chmod 1777 "$mnt/tmp"
  cp "$HOST_CA" "$mnt/etc/ssl/certs/ca-certificates.crt"
  printf '%s\n' root:x:0:0:root:/root:/sbin/nologin nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin \
    nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin > "$mnt/etc/passwd"
  printf '%s\n' root:x:0: nobody:x:65534: nonroot:x:65532: > "$mnt/etc/group"
  chown 65532:65532 "$mnt/home/nonroot"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/bin:/usr/bin:/bin --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$ctr"
  buildah commit -q --rm "$ctr" "$name" >/dev/null
  log "$name with $HOST_CA"
}

main() {
  command -v buildah >/dev/null || die "buildah not found (hack/tools/apt.sh installs it)"
  case ${1:-} in
    cell) debian; rust ;;
    argoexec) distroless_static ;;
    pause) ;;  # FROM scratch
    *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}
main "$@"
