#!/usr/bin/env bash
# Debian packages the local cluster and the local image build need; installs only what is missing
# (one `apt-get update` first, and only then). Never starts their daemons: the cluster scripts
# start containerd and etcd themselves, inside their own network namespace.
#   containerd runc         container runtime (1.6.x on bookworm)
#   etcd-server             the cluster's datastore (3.4.x)
#   containernetworking-plugins  CNI bridge + host-local in /usr/lib/cni
#   iptables                kube-proxy's iptables mode
#   debootstrap             the local image's Debian rootfs
#   buildah                 builds images/cell/Dockerfile (images/build.sh, make image)
#   iproute2 gcc openssl curl  netns/veth, the static pause binary, PKI, health checks
#   prometheus prometheus-pushgateway  metrics beside the cluster (hack/cluster/services.sh)
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

PACKAGES=(containerd runc iptables debootstrap buildah etcd-server containernetworking-plugins iproute2 gcc openssl curl
          prometheus prometheus-pushgateway)

missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

main() {
  local missing
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]} == 0)); then
    log "all ${#PACKAGES[@]} packages present"
  else
    log "installing: ${missing[*]}"
    apt-get update -qq
    # RUNLEVEL=1: the packages' init scripts do not start their daemons.
    DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  log "containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), etcd $(etcd --version 2>/dev/null | awk 'NR==1{print $3}')"
  done_msg "apt packages"
}
main "$@"
