#!/usr/bin/env bash
# Install the Debian packages ccsweep's demo and tests use, only those missing (idempotent).
# iproute2: namespaces; iperf3/ping: independent traffic for the emulator tests;
# prometheus/pushgateway: the services tests (started by the tests themselves, never as services);
# clang/libbpf-dev/bpftool: `make bpf` builds the BPF congestion controls of bpf/cc/ from source.
set -euo pipefail
packages=(iproute2 iperf3 iputils-ping procps prometheus prometheus-pushgateway clang libbpf-dev bpftool)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "apt: installing ${missing[*]}"
  apt-get update -qq
  # The Debian packages would start daemons through their init scripts: ccsweep starts its own.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "deps: cargo (Rust) is required to build the emulator: https://rustup.rs" >&2; exit 1; }
