#!/usr/bin/env bash
# up.sh [BASE] [NS]: a Kubernetes cluster (versions.env) inside its own network namespace, of one
# node, or of NODES nodes on this machine (NODES=2 up.sh ...: the first, ccsweep-node, then
# ccsweep-node-2 ... added by node.sh, each with an equal slice of the cores and memory).
#   BASE  folder for all its state, outside the clone (default ~/.cache/ccsweep/cluster)
#   NS    network namespace to create (default ccsweep-k8s)
# Needs: hack/tools/apt.sh and hack/tools/kubernetes.sh run first (binaries in ./bin), root.
# Idempotent: a healthy cluster at BASE is left as it is; anything half-started is torn down
# first (down.sh) and the cluster is started fresh. Stop it with down.sh BASE NS.
# Nothing listens outside NS: the node address $NODE_IP lives on a veth pair inside it.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"
guard_base

K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
READY_TIMEOUT=${CCSWEEP_READY_TIMEOUT:-180}
# The free space the cluster needs to start: images, etcd and pod logs.
MIN_FREE_MB=3072
NODES=${NODES:-1}
MAX_NODES=8   # node.sh gives node k the address 10.200.0.k and pod CIDR 10.244.(k-1).0/24
if [[ ! $NODES =~ ^[0-9]+$ ]] || ((NODES < 1 || NODES > MAX_NODES)); then
  echo "up.sh: NODES must be an integer from 1 to $MAX_NODES, got '$NODES'" >&2
  exit 2
fi
# CCSWEEP_CONTROL_PLANE_CPU_MILLI: also held back from the first node's allocatable, for what runs on
# this machine beside its pods (the control plane, Argo's controller, Prometheus, the Pushgateway,
# MinIO: about 350m while a full sweep runs, docs/kubernetes.md). A cluster's control plane has
# machines of its own; here, unreserved, it takes its CPU from the cells the scheduler placed by
# their requests. Default 0: the node offers the machine's cores, as the e2e tests expect.
CONTROL_PLANE_CPU_MILLI=${CCSWEEP_CONTROL_PLANE_CPU_MILLI:-0}
MAX_CONTROL_PLANE_CPU_MILLI=$(($(machine_cpu_milli) / NODES - 100))   # the first node's share less 100m
if [[ ! $CONTROL_PLANE_CPU_MILLI =~ ^[0-9]+$ ]] || ((CONTROL_PLANE_CPU_MILLI > MAX_CONTROL_PLANE_CPU_MILLI)); then
  echo "up.sh: CCSWEEP_CONTROL_PLANE_CPU_MILLI must be an integer from 0 to $MAX_CONTROL_PLANE_CPU_MILLI" \
    "(the first node's share less 100m), got '$CONTROL_PLANE_CPU_MILLI'" >&2
  exit 2
fi

check_prerequisites() {
  [[ $(id -u) == 0 ]] || die "must run as root (namespaces, mounts, containerd)"
  local b
  for b in "${K8S_BINS[@]}" pause; do
    [[ -x $REPO_BIN/$b ]] || die "$REPO_BIN/$b missing: run hack/tools/kubernetes.sh"
  done
  for b in containerd runc etcd nsenter openssl curl ip; do
    command -v "$b" >/dev/null || die "$b missing: run hack/tools/apt.sh"
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || die "CNI plugins missing: run hack/tools/apt.sh"
  local disk=$BASE free_mb
  while [[ ! -d $disk ]]; do disk=$(dirname "$disk"); done
  free_mb=$(df --output=avail -m "$disk" | tail -n 1 | tr -d ' ')
  ((free_mb >= MIN_FREE_MB)) \
    || die "only ${free_mb} MB free on the disk of $BASE; the cluster needs ${MIN_FREE_MB} MB (below ${EVICTION_DISK_MB} MB its kubelet refuses pods)"
}

# extra_nodes: the names of the nodes beyond the first that NODES asks for.
extra_nodes() {
  local i
  for ((i = 2; i <= NODES; i++)); do echo "$NODE_NAME-$i"; done
}

cluster_healthy() {
  local d node
  for d in "${DAEMONS[@]}"; do pid_of "$d" >/dev/null || return 1; done
  for node in "$NODE_NAME" $(extra_nodes); do
    "$BASE/kubectl" get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null \
      | grep -qx True || return 1
  done
}

prepare_base() {
  # Fresh cluster state every time; PKI and the containerd content store are kept (cache), and so is
  # the result store (BASE/minio, under keys services.sh makes once per BASE): a sweep measured over
  # hours resumes after the cluster restarts, running only the cells it lacks.
  rm -rf "$BASE/etcd" "$BASE/kubelet" "$BASE/containerd/state" "$BASE/cni/ipam" "$BASE/pod-logs" "$BASE/logs" "$BASE/pids" \
    "$BASE/prometheus"
  mkdir -p "$BASE"/{pids,state,logs,pki,cni/net.d,containerd,images,pod-logs}
  # Remember which cni-* namespaces already existed, so down.sh never touches those.
  find /run/netns -maxdepth 1 -name 'cni-*' -printf '%f\n' 2>/dev/null | sort > "$BASE/state/cni-netns-before" || true
}

make_netns() {
  log "network namespace $NS with $NODE_IP on a veth pair"
  ip netns add "$NS"
  echo "$NS" > "$BASE/state/netns"
  ip -n "$NS" link set lo up
  # No 'dummy' link type in this kernel: a veth pair with both ends inside NS carries the node IP.
  ip -n "$NS" link add k8s0 type veth peer name k8s1
  ip -n "$NS" addr add "$NODE_IP/24" dev k8s0
  ip -n "$NS" link set k8s0 up
  ip -n "$NS" link set k8s1 up
  ip -n "$NS" route add default dev k8s0
}

write_configs() {
  write_containerd_config "$BASE/containerd" "$SOCK" "$BASE/cni/net.d"
  write_cni_config "$BASE/cni/net.d" cni0 "$POD_CIDR" "$BASE/cni/ipam"
  # With NODES > 1 this node keeps its share of the machine, as node.sh gives each other node.
  local cpu=$(($(machine_cpu_milli) / NODES)) memory=$(($(machine_memory_mi) / NODES))
  write_kubelet_config "$BASE/kubelet-config.yaml" "$NODE_IP" "$POD_CIDR" "$SOCK" "$BASE/pki/kubelet" \
    "$BASE/pod-logs" / $(($(machine_cpu_milli) - cpu + CONTROL_PLANE_CPU_MILLI)) $(($(machine_memory_mi) - memory))
}

start_containerd() {
  start_daemon containerd containerd --config "$BASE/containerd/config.toml"
  wait_for containerd 30 ctr -a "$SOCK" version
}

import_pause_image() {
  [[ $(import_image pause) == "$PAUSE_IMAGE" ]] || die "images/build.sh pause did not build $PAUSE_IMAGE"
}

make_pki() {
  local p=$BASE/pki
  if [[ ! -s $p/ca.crt ]]; then
    log "PKI: new CA in $p (reused by later bring-ups)"
    rm -f "$p"/*.crt "$p"/*.key "$p"/*.csr
    openssl genrsa -out "$p/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$p/ca.key" -subj /CN=ccsweep-test-ca -days 365 -out "$p/ca.crt"
  fi
  sign apiserver /CN=kube-apiserver "subjectAltName=IP:$NODE_IP,IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n"
  sign admin /O=system:masters/CN=admin 'extendedKeyUsage=clientAuth\n'
  sign_kubelet "$NODE_NAME" "$NODE_IP" "$p"
  [[ -s $p/sa.key ]] || { openssl genrsa -out "$p/sa.key" 2048 2>/dev/null; openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null; }
  local user
  for user in admin kubelet; do write_kubeconfig "$BASE/$user.kubeconfig" "$user" "$p/$user"; done
}

write_wrappers() {
  cat > "$BASE/kubectl" <<EOT
#!/bin/sh
# kubectl for the cluster at $BASE (the API server only listens inside netns $NS).
exec nsenter --net=/run/netns/$NS $REPO_BIN/kubectl --kubeconfig=$BASE/admin.kubeconfig "\$@"
EOT
  cat > "$BASE/ctr" <<EOT
#!/bin/sh
# ctr for the cluster's containerd (Kubernetes' images live in namespace k8s.io).
exec ctr -a $SOCK -n k8s.io "\$@"
EOT
  cat > "$BASE/env" <<EOT
export KUBECONFIG=$BASE/admin.kubeconfig
export CCSWEEP_CLUSTER_BASE=$BASE
export CCSWEEP_CLUSTER_NS=$NS
export CONTAINERD_ADDRESS=$SOCK
export CCSWEEP_NODE_NAME=$NODE_NAME
EOT
  chmod +x "$BASE/kubectl" "$BASE/ctr"
}

start_etcd() {
  start_daemon etcd etcd --name ccsweep --data-dir "$BASE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster ccsweep=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  wait_for etcd 30 "${IN_NS[@]}" curl -sf http://127.0.0.1:2379/health
}

start_control_plane() {
  local p=$BASE/pki
  start_daemon kube-apiserver "$REPO_BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --advertise-address="$NODE_IP" --secure-port=6443 \
    --client-ca-file="$p/ca.crt" --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --kubelet-client-certificate="$p/admin.crt" --kubelet-client-key="$p/admin.key" \
    --kubelet-preferred-address-types=InternalIP
  wait_for kube-apiserver 90 sh -c "${IN_NS[*]} curl -sk https://127.0.0.1:6443/readyz | grep -qx ok"
  local admin=$BASE/admin.kubeconfig
  local auth=(--kubeconfig="$admin" --authentication-kubeconfig="$admin" --authorization-kubeconfig="$admin"
              --leader-elect=false)
  # A node whose kubelet renewed no Lease for 20 s (five renewals missed: NODE_LEASE_SECONDS) is
  # lost: Ready turns Unknown and the node is tainted unreachable, so the scheduler sends it no more
  # pods. Upstream waits 50 s; a lost node's cells wait that long before anyone may act on them.
  # Checked every 2 s instead of 5 s. What is then done with the lost node's pods is
  # docs/kubernetes.md's "A lost node"; the pods' tolerations of an unreachable node keep their
  # 300 s default, so a node that misses a few renewals under load loses no running cell.
  start_daemon kube-controller-manager "$REPO_BIN/kube-controller-manager" "${auth[@]}" \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
    --use-service-account-credentials=true --service-cluster-ip-range="$SERVICE_CIDR" \
    --node-monitor-grace-period=20s --node-monitor-period=2s
  start_daemon kube-scheduler "$REPO_BIN/kube-scheduler" "${auth[@]}"
}

start_node() {
  start_daemon kubelet "$REPO_BIN/kubelet" --config="$BASE/kubelet-config.yaml" \
    --kubeconfig="$BASE/kubelet.kubeconfig" --root-dir="$BASE/kubelet" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP"
  start_daemon kube-proxy "$REPO_BIN/kube-proxy" --kubeconfig="$BASE/admin.kubeconfig" \
    --hostname-override="$NODE_NAME" --proxy-mode=iptables --cluster-cidr=10.244.0.0/16 \
    --conntrack-max-per-core=0
}

wait_node_ready() {
  wait_for kubelet 60 "$BASE/kubectl" get node "$NODE_NAME"
  "$BASE/kubectl" wait --for=condition=Ready "node/$NODE_NAME" --timeout="${READY_TIMEOUT}s" >/dev/null \
    || { tail -n 30 "$BASE/logs/kubelet.log" >&2; die "node $NODE_NAME not Ready"; }
  # Pods need the default service account, created asynchronously by the controller-manager.
  wait_for kube-controller-manager 60 "$BASE/kubectl" get serviceaccount default -n default
}

main() {
  check_prerequisites
  if [[ -x $BASE/kubectl ]] && cluster_healthy; then
    log "cluster at $BASE (netns $NS) already up and Ready: nothing to do"
    return
  fi
  if ns_exists || [[ -n $(our_pids) ]] || grep -q " $BASE/" /proc/mounts || compgen -G "$NODES_DIR/*" >/dev/null; then
    log "leftovers of an earlier cluster at $BASE: tearing them down first"
    "$(dirname "$0")/down.sh" "$BASE" "$NS"
  fi
  log "bringing up Kubernetes in $BASE, netns $NS"
  prepare_base
  make_netns
  write_configs
  write_wrappers
  start_containerd
  import_pause_image
  make_pki
  start_etcd
  start_control_plane
  start_node
  wait_node_ready
  local node
  for node in $(extra_nodes); do
    CCSWEEP_NODE_CPU_MILLI=$(($(machine_cpu_milli) / NODES)) CCSWEEP_NODE_MEMORY_MI=$(($(machine_memory_mi) / NODES)) \
      "$(dirname "$0")/node.sh" add "$node" "$BASE" "$NS"
  done
  local took=$(($(date +%s) - _T0))
  echo "$took" > "$BASE/state/bringup-seconds"
  # shellcheck disable=SC2046
  log "$NODES node(s) Ready in ${took}s; the first node's daemons RSS $(rss_mb $(our_pids)) MB"
  log "use: $BASE/kubectl get pods -A   (or: source $BASE/env; nsenter --net=/run/netns/$NS kubectl ...)"
}
main
