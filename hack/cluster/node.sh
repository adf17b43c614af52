#!/usr/bin/env bash
# node.sh add|kill|remove NAME [BASE] [NS]: one more node, on this machine, of the cluster up.sh
# started at BASE inside netns NS (up.sh's NODES=N calls `add` for nodes 2..N).
#   add     start node NAME and wait until it is Ready: a containerd of its own (two kubelets on one
#           would garbage-collect each other's pod sandboxes) holding the first node's images, a
#           kubelet with its own root folder, certificate (system:node:NAME), address 10.200.0.K on
#           the netns' veth, pod CIDR 10.244.(K-1).0/24 on a bridge of its own, a cgroup of its
#           own for its pods, and its slice of the machine: allocatable CCSWEEP_NODE_CPU_MILLI
#           millicores and CCSWEEP_NODE_MEMORY_MI MiB (default: an equal share among the nodes
#           there are then), labels CCSWEEP_NODE_LABELS (key=value,...). A node that was killed
#           comes back: what the lost run left on the host is cleared first; its images are kept.
#   kill    lose the node as a machine dies: SIGKILL at once to its kubelet, its containerd, their
#           shims and every process of its pods (found in the node's cgroup), nothing told to the
#           API server. The control plane finds out by itself (up.sh: --node-monitor-grace-period).
#   remove  delete its pods and its Node object, stop it (what still runs), and remove what it
#           left on the host: mounts, pod network namespaces, bridge, address, cgroups, its folder.
# One kube-proxy serves every node (up.sh's): the nodes share NS, whose iptables rules a second
# kube-proxy would rewrite at the same time as the first, and all pods are reached through NS.
set -euo pipefail
shopt -s inherit_errexit
ACTION=${1:-}
NODE=${2:-}
usage() { echo "node.sh: $1 (usage: node.sh add|kill|remove NAME [BASE] [NS])" >&2; exit 2; }
[[ $ACTION =~ ^(add|kill|remove)$ ]] || usage "the action must be add, kill or remove, got '$ACTION'"
[[ $NODE =~ ^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$ ]] \
  || usage "NAME must be 1-40 lowercase letters, digits and '-', starting and ending alphanumeric, got '$NODE'"
shift 2
source "$(dirname "$0")/lib.sh"
guard_base
[[ $NODE != "$NODE_NAME" ]] || usage "$NODE is the first node, up.sh's"

ND=$NODES_DIR/$NODE
PIDS_DIR=$ND/pids
LOGS_DIR=$ND/logs
NODE_SOCK=$ND/containerd/containerd.sock
CGROUP=ccsweep-$NS-$NODE   # the node's pods' cgroups, in every cgroup v1 hierarchy
READY_TIMEOUT=${CCSWEEP_READY_TIMEOUT:-180}
MAX_INDEX=8

# node_index: K, this node's number (2..MAX_INDEX): kept in the node's folder, else the lowest free.
node_index() {
  [[ -s $ND/index ]] && { cat "$ND/index"; return; }
  local k
  for ((k = 2; k <= MAX_INDEX; k++)); do
    grep -qsx "$k" "$NODES_DIR"/*/index || { echo "$k"; return; }
  done
  die "no free node number: at most $((MAX_INDEX - 1)) added nodes"
}

# cgroup_dirs: the node's cgroup in each cgroup v1 hierarchy (the kubelet's cgroupRoot).
cgroup_dirs() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ $(stat -f -c %T "$h") == cgroupfs ]] && echo "${h%/}/$CGROUP"
  done
  return 0
}

# api_up: the cluster's API server runs (its PID is recorded with the cluster's, not the node's).
api_up() { [[ -x $BASE/kubectl ]] && PIDS_DIR=$BASE/pids pid_of kube-apiserver >/dev/null; }

node_ready() {
  [[ $("$BASE/kubectl" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

node_pids() { local d; for d in kubelet containerd; do pid_of "$d" || true; done; shim_pids_of "$NODE_SOCK"; }

# pod_pids: every process in the node's cgroups, the pods' (the kubelet puts nothing else there).
pod_pids() {
  local d
  for d in $(cgroup_dirs); do
    if [[ -d $d ]]; then find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
  done | sort -un
}

# kill_pods: SIGKILL to the node's pods' processes until none is left (a dying parent's child may
# show up once more).
kill_pods() {
  local _ pids
  for _ in $(seq 1 50); do
    pids=$(pod_pids)
    [[ -n $pids ]] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  die "processes left in the cgroups of node $NODE: $(pod_pids | tr '\n' ' ')"
}

# kill_node: SIGKILL at once to the node's kubelet, containerd and shims, then to its pods' processes.
kill_node() {
  local pids
  pids=$(node_pids | tr '\n' ' ')
  # shellcheck disable=SC2086
  [[ -z ${pids// /} ]] || kill -KILL $pids 2>/dev/null || true
  kill_pods
  echo "$pids"
}

lose() {
  [[ -d $ND/state ]] || die "no node $NODE at $BASE"
  # Which pod network namespaces were the node's: its containerd can say so only while it runs.
  record_cni_netns "$NODE_SOCK" "$ND/state/cni-netns"
  log "node $NODE lost: kubelet, containerd, shims (pids $(kill_node)) and its pods' processes killed"
}

# clear_host: what a run of this node left on the host once nothing of it runs: shim sockets,
# mounts, pod network namespaces, its bridge, its cgroups.
clear_host() {
  local f address n
  kill_node >/dev/null
  # A shim killed by a signal leaves its socket, whose path it wrote into its task's bundle.
  for f in "$ND"/containerd/state/io.containerd.runtime.v2.task/*/*/address; do
    [[ -f $f ]] || continue
    address=$(<"$f")
    address=${address#unix://}
    [[ $address == /run/containerd/s/* && -S $address ]] && rm -f "$address"
  done
  unmount_under "$ND"
  if [[ -f $ND/state/cni-netns ]]; then
    while read -r n; do
      [[ -e /run/netns/$n ]] && ip netns delete "$n" && log "deleted pod netns $n"
    done < <(sort -u "$ND/state/cni-netns")
    rm -f "$ND/state/cni-netns"
  fi
  if [[ -s $ND/index ]] && ns_exists && ip -n "$NS" link show "cni$(($(<"$ND/index") - 1))" >/dev/null 2>&1; then
    ip -n "$NS" link delete "cni$(($(<"$ND/index") - 1))"
  fi
  for f in $(cgroup_dirs); do
    [[ -d $f ]] && find "$f" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# slice VAR MACHINE NAME: the allocatable VAR asks for (default: an equal share among the nodes
# there will be), checked against the machine.
slice() {
  local value=${!1:-} machine=$2 others
  others=$(find "$NODES_DIR" -mindepth 1 -maxdepth 1 -type d ! -name "$NODE" 2>/dev/null | wc -l || true)
  value=${value:-$((machine / (others + 2)))}
  if [[ ! $value =~ ^[0-9]+$ ]] || ((value < 100 || value > machine)); then
    echo "node.sh: $1 must be an integer from 100 to $machine (this machine's $3), got '${!1:-}'" >&2
    exit 2
  fi
  echo "$value"
}

copy_images() {
  local refs missing
  refs=$(ctr -a "$SOCK" -n k8s.io images ls -q | grep -v -e '^sha256:' -e '@sha256:' || true)
  missing=$(comm -23 <(sort <<<"$refs") <(ctr -a "$NODE_SOCK" -n k8s.io images ls -q | sort))
  [[ -n $missing ]] || return 0
  # shellcheck disable=SC2086  # image references: no spaces
  ctr -a "$SOCK" -n k8s.io images export "$ND/images.tar" $missing
  ctr -a "$NODE_SOCK" -n k8s.io images import "$ND/images.tar" >&2
  rm -f "$ND/images.tar"
  log "copied $(wc -w <<<"$missing") images from $NODE_NAME"
}

add() {
  local cpu memory labels=${CCSWEEP_NODE_LABELS:-}
  cpu=$(slice CCSWEEP_NODE_CPU_MILLI "$(machine_cpu_milli)" "millicores")
  memory=$(slice CCSWEEP_NODE_MEMORY_MI "$(machine_memory_mi)" "MiB of memory")
  if [[ -n $labels && ! $labels =~ ^[a-z0-9./-]+=[A-Za-z0-9._-]*(,[a-z0-9./-]+=[A-Za-z0-9._-]*)*$ ]]; then
    echo "node.sh: CCSWEEP_NODE_LABELS must be key=value[,key=value...] label pairs, got '$labels'" >&2
    exit 2
  fi
  api_up || die "no cluster at $BASE: run hack/cluster/up.sh first"
  if pid_of kubelet >/dev/null && pid_of containerd >/dev/null && node_ready; then
    log "node $NODE already up and Ready: nothing to do"
    return
  fi
  mkdir -p "$ND"
  local k ip cidr
  k=$(node_index)
  echo "$k" > "$ND/index"
  ip=10.200.0.$k
  cidr=10.244.$((k - 1)).0/24
  clear_host   # what an earlier run of the node left, if any (a lost node coming back)
  # As a machine starting again: fresh runtime state, pods and address leases; images kept.
  rm -rf "$ND"/{pids,logs,state,kubelet,pod-logs,cni} "$ND"/containerd/{state,runc}
  mkdir -p "$ND"/{pids,logs,state,kubelet,pod-logs,cni/net.d,containerd}
  local d
  for d in $(cgroup_dirs); do
    mkdir -p "$d"
    if [[ -f $d/cpuset.cpus && -z $(<"$d/cpuset.cpus") ]]; then   # a new cpuset admits no task until set
      cat "$(dirname "$d")/cpuset.cpus" > "$d/cpuset.cpus"
      cat "$(dirname "$d")/cpuset.mems" > "$d/cpuset.mems"
    fi
  done
  ip -n "$NS" addr replace "$ip/24" dev k8s0
  write_containerd_config "$ND/containerd" "$NODE_SOCK" "$ND/cni/net.d" "$ND/containerd/runc"
  write_cni_config "$ND/cni/net.d" "cni$((k - 1))" "$cidr" "$ND/cni/ipam"
  write_kubelet_config "$ND/kubelet-config.yaml" "$ip" "$cidr" "$NODE_SOCK" "$ND/kubelet" "$ND/pod-logs" \
    "/$CGROUP" $(($(machine_cpu_milli) - cpu)) $(($(machine_memory_mi) - memory))
  sign_kubelet "$NODE" "$ip" "$ND"
  write_kubeconfig "$ND/kubelet.kubeconfig" kubelet "$ND/kubelet"
  start_daemon containerd containerd --config "$ND/containerd/config.toml"
  wait_for containerd 30 ctr -a "$NODE_SOCK" version
  copy_images
  start_daemon kubelet "$REPO_BIN/kubelet" --config="$ND/kubelet-config.yaml" \
    --kubeconfig="$ND/kubelet.kubeconfig" --root-dir="$ND/kubelet" \
    --hostname-override="$NODE" --node-ip="$ip" ${labels:+--node-labels="$labels"}
  wait_for kubelet 60 "$BASE/kubectl" get node "$NODE"
  "$BASE/kubectl" wait --for=condition=Ready "node/$NODE" --timeout="${READY_TIMEOUT}s" >/dev/null \
    || { tail -n 30 "$LOGS_DIR/kubelet.log" >&2; die "node $NODE not Ready"; }
  log "node $NODE Ready at $ip (pods $cidr, allocatable ${cpu}m CPU, ${memory}Mi memory) in $(($(date +%s) - _T0))s"
}

remove() {
  [[ -d $ND ]] || { log "no node $NODE at $BASE"; return 0; }
  if api_up; then
    "$BASE/kubectl" delete pods --all-namespaces --field-selector "spec.nodeName=$NODE" \
      --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
    "$BASE/kubectl" delete node "$NODE" --ignore-not-found --wait=false >/dev/null
  fi
  mkdir -p "$ND/state"
  record_cni_netns "$NODE_SOCK" "$ND/state/cni-netns"
  stop_group kubelet
  kill_containers "$NODE_SOCK"
  stop_group containerd
  local pid
  for pid in $(shim_pids_of "$NODE_SOCK"); do stop_pids "containerd-shim:$pid"; done
  clear_host
  if [[ -s $ND/index ]] && ns_exists; then
    ip -n "$NS" addr del "10.200.0.$(<"$ND/index")/24" dev k8s0 2>/dev/null || true
  fi
  local left
  left=$(node_pids; pod_pids)
  [[ -z $left ]] || die "node $NODE: still running: $(tr '\n' ' ' <<<"$left")"
  rm -rf "$ND"
  log "node $NODE removed in $(($(date +%s) - _T0))s"
}

case $ACTION in
  add) add ;;
  kill) lose ;;
  remove) remove ;;
esac
