#!/usr/bin/env bash
# Upstream Mahimahi (mm-delay, mm-loss, mm-link), pinned to $MAHIMAHI_COMMIT, built from the
# vendored, unmodified upstream tarball in third_party/mahimahi/ (GPL-3.0; its README gives the
# source, commit and SHA-256):
#   $MAHIMAHI_PREFIX/bin/mm-{delay,loss,link}   (cold ~2-4 min on 2 cores; warm instant)
#
# The install prefix is not under $CCSWEEP_CACHE, unlike the other tools: Mahimahi's binaries are
# setuid root and refuse to run as root, so the unprivileged user that runs them (and every shell
# they nest) must be able to reach them, and the cache usually lives in root's mode-700 home.
# Default /opt/ccsweep/mahimahi-$MAHIMAHI_COMMIT, the image's layout; the build tree stays in the cache.
#   MAHIMAHI_TARBALL  the source tarball (default third_party/mahimahi/mahimahi-$MAHIMAHI_COMMIT.tar.gz)
#   MAHIMAHI_PREFIX   where it is installed
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

# Build dependencies, from Mahimahi's debian/control; iptables and dnsmasq-base are also run-time
# needs (each shell adds a NAT rule and starts a DNS forwarder).
BUILD_PACKAGES=(autotools-dev dh-autoreconf protobuf-compiler libprotobuf-dev pkg-config libssl-dev dnsmasq-base
                ssl-cert libxcb-present-dev libcairo2-dev libpango1.0-dev apache2-dev apache2-bin iptables g++ make)
BINARIES=(mm-delay mm-loss mm-link)
TARBALL=${MAHIMAHI_TARBALL:-$REPO_ROOT/third_party/mahimahi/mahimahi-$MAHIMAHI_COMMIT.tar.gz}
PREFIX=${MAHIMAHI_PREFIX:-/opt/ccsweep/mahimahi-$MAHIMAHI_COMMIT}

install_build_packages() {
  local p missing=()
  for p in "${BUILD_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return
  log "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  [[ -f $TARBALL ]] || die "no Mahimahi source at $TARBALL (set MAHIMAHI_TARBALL to mahimahi-$MAHIMAHI_COMMIT.tar.gz)"
  install_build_packages
  local tree=$TOOLS_CACHE/mahimahi-$MAHIMAHI_COMMIT-build staging=$PREFIX.partial
  rm -rf "$tree" "$staging"; mkdir -p "$tree"
  tar -xzf "$TARBALL" -C "$tree" --strip-components=1
  log "building $TARBALL (nice 19)"
  (cd "$tree" && heavy ./autogen.sh >/dev/null && heavy ./configure -q --prefix="$PREFIX" >/dev/null \
     && heavy make -s -j"$(nproc)" -C src >/dev/null && heavy make -s -C src install DESTDIR="$tree/root" >/dev/null)
  mkdir -p "$(dirname "$PREFIX")"
  mv "$tree/root$PREFIX" "$staging"
  rm -rf "$tree"
  publish "$staging" "$PREFIX"
}

main() {
  if have_all "$PREFIX/bin" "${BINARIES[@]}"; then
    log "cached: $PREFIX"
  else
    build
  fi
  local n
  for n in "${BINARIES[@]}"; do
    chown root:root "$PREFIX/bin/$n"
    chmod 4755 "$PREFIX/bin/$n"
  done
  chmod 755 "$(dirname "$PREFIX")" "$PREFIX" "$PREFIX/bin"
  link_into_bin "$PREFIX/bin" "${BINARIES[@]}"
  done_msg "mahimahi $MAHIMAHI_COMMIT in $PREFIX (setuid root: ${BINARIES[*]})"
}
main "$@"
