#!/usr/bin/env bash
# down.sh [BASE] [NS]: stop the cluster that up.sh started at BASE, and undo what it did on the
# host: add-ons, the nodes node.sh added (node.sh remove), daemons (by their recorded PIDs only),
# container shims serving our containerd socket, mounts under BASE, the pod network namespaces
# (cni-*) our containerd made, and NS itself.
# Safe to run twice, and after a partial or failed up.sh. Keeps BASE's caches (PKI, images).
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"
guard_base

api_alive() { pid_of kube-apiserver >/dev/null && pid_of kubelet >/dev/null && [[ -x $BASE/kubectl ]]; }

# The nodes node.sh added, each removed with everything it left (while the API server still runs).
remove_nodes() {
  local dir
  for dir in "$NODES_DIR"/*/; do
    [[ -d $dir ]] || continue
    "$(dirname "$0")/node.sh" remove "$(basename "$dir")" "$BASE" "$NS"
  done
}

delete_pods() {
  api_alive || return 0
  log "deleting all pods (grace 0) so the kubelet and CNI clean up their sandboxes"
  "$BASE/kubectl" delete pods --all --all-namespaces --force --grace-period=0 --wait=true --timeout=60s >/dev/null 2>&1 || true
  local _
  for _ in $(seq 1 30); do
    [[ -z $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null | head -1) ]] && break
    sleep 1
  done
}

# Node and control plane together (they only talk to each other), then etcd, which they use.
stop_daemons() {
  stop_group kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver
  stop_group etcd
}

stop_containerd() {
  kill_containers "$SOCK"
  local pid
  if pid=$(pid_of containerd); then stop_pids "containerd:$pid"; fi
  rm -f "$(pidfile containerd)"
  for pid in $(our_shim_pids); do stop_pids "containerd-shim:$pid"; done
}

delete_netns() {
  local n
  if [[ -f $BASE/state/cni-netns ]]; then
    while read -r n; do
      [[ -e /run/netns/$n ]] || continue
      grep -qx "$n" "$BASE/state/cni-netns-before" 2>/dev/null && continue
      ip netns delete "$n" && log "deleted pod netns $n"
    done < <(sort -u "$BASE/state/cni-netns")
    rm -f "$BASE/state/cni-netns"
  fi
  if ns_exists; then
    ip netns delete "$NS" && log "deleted netns $NS"
  fi
  rm -f "$BASE/state/netns"
}

# The kubelet (cgroupfs driver) leaves empty kubepods cgroups behind: remove the empty ones.
remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubepods; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

main() {
  if [[ ! -d $BASE ]]; then
    log "no cluster state at $BASE"; ns_exists || return 0
  fi
  mkdir -p "$BASE/state" "$BASE/pids"
  local pids
  pids=$(our_pids | tr '\n' ' ')
  # shellcheck disable=SC2086
  [[ -z $pids ]] || log "tearing down $BASE (netns $NS); daemons RSS $(rss_mb $pids) MB"
  # The Argo controller first: it would replace the pods delete_pods removes (retries).
  stop_group "${ADDONS[@]}"
  remove_nodes
  record_cni_netns "$SOCK" "$BASE/state/cni-netns"
  delete_pods
  record_cni_netns "$SOCK" "$BASE/state/cni-netns"
  stop_daemons
  stop_containerd
  unmount_under "$BASE"
  delete_netns
  remove_cgroups
  local left
  left=$(our_pids | tr '\n' ' ')
  [[ -z $left ]] || die "still running: $left"
  log "teardown of $BASE done in $(($(date +%s) - _T0))s"
}
main
