#!/usr/bin/env bash
# down.sh [BASE] [NS]: stop the cluster that up.sh started at BASE, and undo what it did on the
# host: add-ons and daemons (by their recorded PIDs only), container shims serving our containerd socket,
# mounts under BASE, the pod network namespaces (cni-*) our containerd made, and NS itself.
# Safe to run twice, and after a partial or failed up.sh. Keeps BASE's caches (PKI, images).
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"
guard_base

api_alive() { pid_of kube-apiserver >/dev/null && pid_of kubelet >/dev/null && [[ -x $BASE/kubectl ]]; }

# Pod network namespaces created by OUR containerd: read from its sandboxes' specs.
record_cni_netns() {
  pid_of containerd >/dev/null || return 0
  local id
  for id in $(ctr -a "$SOCK" -n k8s.io containers ls -q 2>/dev/null); do
    ctr -a "$SOCK" -n k8s.io containers info "$id" 2>/dev/null \
      | grep -o '"/var/run/netns/cni-[^"]*"\|"/run/netns/cni-[^"]*"' | tr -d '"' | xargs -r -n1 basename || true
  done | sort -u >> "$BASE/state/cni-netns"
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

# stop_pids NAME:PID...: SIGTERM to all at once, wait up to 15 s for all, then SIGKILL the rest.
stop_pids() {
  local entry _ alive
  for entry in "$@"; do kill -TERM "${entry#*:}" 2>/dev/null || true; done
  for _ in $(seq 1 75); do
    alive=()
    for entry in "$@"; do kill -0 "${entry#*:}" 2>/dev/null && alive+=("$entry"); done
    ((${#alive[@]})) || break
    sleep 0.2
  done
  for entry in "${alive[@]}"; do
    kill -KILL "${entry#*:}" 2>/dev/null || true
    log "killed ${entry%%:*} (pid ${entry#*:}) after 15 s"
  done
  ((${#@})) && log "stopped ${*%%:*}" || true
}

# stop_group NAME...: the recorded daemons among NAME, all at once.
stop_group() {
  local d pid entries=()
  for d in "$@"; do
    pid=$(pid_of "$d") && entries+=("$d:$pid")
    rm -f "$(pidfile "$d")"
  done
  ((${#entries[@]} == 0)) || stop_pids "${entries[@]}"
}

# Node and control plane together (they only talk to each other), then etcd, which they use.
stop_daemons() {
  stop_group kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver
  stop_group etcd
}

kill_containers() {
  pid_of containerd >/dev/null || return 0
  local t
  for t in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$SOCK" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
  done
  sleep 0.5
  for t in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$SOCK" -n k8s.io tasks rm -f "$t" >/dev/null 2>&1 || true
  done
}

stop_containerd() {
  local pid
  if pid=$(pid_of containerd); then stop_pids "containerd:$pid"; fi
  rm -f "$(pidfile containerd)"
  for pid in $(our_shim_pids); do stop_pids "containerd-shim:$pid"; done
}

unmount_base() {
  local m n=0
  # Deepest first; mount points are octal-escaped in /proc/mounts (\040 for a space).
  while read -r m; do
    m=$(printf '%b' "$m")
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    n=$((n + 1))
  done < <(awk -v b="$BASE/" 'index($2, b) == 1 {print $2}' /proc/mounts | sort -r)
  ((n == 0)) || log "unmounted $n mounts under $BASE"
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
  record_cni_netns
  delete_pods
  record_cni_netns
  stop_daemons
  kill_containers
  stop_containerd
  unmount_base
  delete_netns
  remove_cgroups
  local left
  left=$(our_pids | tr '\n' ' ')
  [[ -z $left ]] || die "still running: $left"
  log "teardown of $BASE done in $(($(date +%s) - _T0))s"
}
main
