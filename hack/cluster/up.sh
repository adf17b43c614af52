#!/usr/bin/env bash
# up.sh [BASE] [NS]: a single-node Kubernetes cluster (versions.env) inside its own network namespace.
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
# The kubelet's disk floor, and the free space the cluster needs to start: images, etcd and pod logs.
EVICTION_DISK_MB=512
MIN_FREE_MB=3072

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

cluster_healthy() {
  local d
  for d in "${DAEMONS[@]}"; do pid_of "$d" >/dev/null || return 1; done
  "$BASE/kubectl" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
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
  cat > "$BASE/containerd/config.toml" <<EOT
# containerd for the ccsweep test cluster (everything under $BASE).
version = 2
root = "$BASE/containerd/root"
state = "$BASE/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$BASE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The bounding set lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$BASE/cni/net.d"
EOT
  cat > "$BASE/cni/net.d/10-ccsweep-bridge.conflist" <<EOT
{"cniVersion": "0.4.0", "name": "ccsweep-bridge", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$BASE/cni/ipam",
            "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOT
  cat > "$BASE/kubelet-config.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: $BASE/pki/ca.crt}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs          # PID 1 is not systemd; cgroups v1
containerRuntimeEndpoint: unix://$SOCK
failSwapOn: false
address: $NODE_IP
tlsCertFile: $BASE/pki/kubelet.crt
tlsPrivateKeyFile: $BASE/pki/kubelet.key
podCIDR: $POD_CIDR
podLogsDir: $BASE/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute floors, not shares of the disk: 1 % of a large, mostly full disk is GBs, and under disk
# pressure the kubelet refuses pods and deletes unused images (those imported for imagePullPolicy Never).
evictionHard: {memory.available: "100Mi", nodefs.available: "${EVICTION_DISK_MB}Mi", imagefs.available: "${EVICTION_DISK_MB}Mi"}
EOT
}

start_containerd() {
  start_daemon containerd containerd --config "$BASE/containerd/config.toml"
  wait_for containerd 30 ctr -a "$SOCK" version
}

import_pause_image() {
  [[ $(import_image pause) == "$PAUSE_IMAGE" ]] || die "images/build.sh pause did not build $PAUSE_IMAGE"
}

# sign NAME SUBJECT EXTENSIONS: a key and a CA-signed certificate in pki/, unless present.
sign() {
  local name=$1 subject=$2 ext=$3 p=$BASE/pki
  [[ -s $p/$name.crt ]] && return
  openssl genrsa -out "$p/$name.key" 2048 2>/dev/null
  openssl req -new -key "$p/$name.key" -subj "$subject" -out "$p/$name.csr"
  printf '%b' "$ext" > "$p/$name.ext"
  openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -days 365 -extfile "$p/$name.ext" -out "$p/$name.crt" 2>/dev/null
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
  sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth,serverAuth\nsubjectAltName=IP:$NODE_IP,DNS:$NODE_NAME\n"
  [[ -s $p/sa.key ]] || { openssl genrsa -out "$p/sa.key" 2048 2>/dev/null; openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null; }
  local user kc
  for user in admin kubelet; do
    kc=("$REPO_BIN/kubectl" --kubeconfig="$BASE/$user.kubeconfig" config)
    "${kc[@]}" set-cluster ccsweep --server=https://127.0.0.1:6443 --certificate-authority="$p/ca.crt" --embed-certs >/dev/null
    "${kc[@]}" set-credentials "$user" --client-certificate="$p/$user.crt" --client-key="$p/$user.key" --embed-certs >/dev/null
    "${kc[@]}" set-context ccsweep --cluster=ccsweep --user="$user" >/dev/null
    "${kc[@]}" use-context ccsweep >/dev/null
  done
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
  start_daemon kube-controller-manager "$REPO_BIN/kube-controller-manager" "${auth[@]}" \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
    --use-service-account-credentials=true --service-cluster-ip-range="$SERVICE_CIDR"
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
  if ns_exists || [[ -n $(our_pids) ]] || grep -q " $BASE/" /proc/mounts; then
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
  local took=$(($(date +%s) - _T0))
  echo "$took" > "$BASE/state/bringup-seconds"
  # shellcheck disable=SC2046
  log "node $NODE_NAME Ready in ${took}s; daemons RSS $(rss_mb $(our_pids)) MB"
  log "use: $BASE/kubectl get pods -A   (or: source $BASE/env; nsenter --net=/run/netns/$NS kubectl ...)"
}
main
