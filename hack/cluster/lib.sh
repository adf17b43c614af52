# shellcheck shell=bash
# Shared by up.sh and down.sh (sourced). A cluster is a BASE folder (outside the clone) plus a
# network namespace NS. Layout of BASE:
#   pids/<daemon>.pid   one file per daemon we started (down.sh kills exactly these), add-ons too
#   state/              what up.sh created on the host (netns marker, cni netns list)
#   logs/<daemon>.log   daemon logs;  pki/  kubeconfigs  containerd/  etcd/  kubelet/
#   nodes/<name>/       each node beyond the first (node.sh): its own pids/, logs/, containerd/,
#                       kubelet/, cni/, certificate and state/, the same layout one level down
#   kubectl, ctr        wrappers that run inside NS with this cluster's credentials
#   env                 KUBECONFIG, CONTAINERD_ADDRESS, NS, ... for other scripts and tests
# shellcheck disable=SC2034  # the settings below are for the scripts that source this file

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CCSWEEP_CACHE=${CCSWEEP_CACHE:-$HOME/.cache/ccsweep}
REPO_BIN=${CCSWEEP_BIN:-$REPO_ROOT/bin}
# shellcheck source=../versions.sh
source "$REPO_ROOT/hack/versions.sh"
# Images the cluster runs, tagged with the release they carry: images/build.sh builds each from
# its Dockerfile with buildah (import_image, below).
PAUSE_IMAGE=localhost/ccsweep/pause:$KUBERNETES_VERSION
ARGOEXEC_IMAGE=localhost/ccsweep/argoexec:$ARGO_WORKFLOWS_VERSION

BASE=${1:-${CCSWEEP_CLUSTER_BASE:-$CCSWEEP_CACHE/cluster}}
NS=${2:-${CCSWEEP_CLUSTER_NS:-ccsweep-k8s}}
NODE_NAME=${CCSWEEP_NODE_NAME:-ccsweep-node}
NODE_IP=10.200.0.1          # only exists inside NS: a veth pair there carries it
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
NODES_DIR=$BASE/nodes       # the nodes node.sh adds, one folder each
# The kubelets' disk floor: below it a kubelet refuses pods.
EVICTION_DISK_MB=512
# Where start_daemon records PIDs and logs: the cluster's own; node.sh points them at its node's.
PIDS_DIR=$BASE/pids
LOGS_DIR=$BASE/logs
# The kubelet renews its node's Lease every quarter of this (4 s); the controller manager's
# --node-monitor-grace-period (up.sh) must see several renewals missed before it calls a node lost.
NODE_LEASE_SECONDS=16
# The cluster itself (up.sh starts these; all must run for the cluster to count as healthy).
DAEMONS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
# Add-ons started later beside the node (argo.sh, services.sh); down.sh stops them first.
ADDONS=(workflow-controller minio prometheus-pushgateway prometheus)
IN_NS=(nsenter "--net=/run/netns/$NS")   # not `ip netns exec`: it remounts /sys and hides cgroups
SOCK=$BASE/containerd/containerd.sock

_T0=$(date +%s)
log() { printf '[%s %3ss] %s\n' "$(basename "$0" .sh)" "$(($(date +%s) - _T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'log "ERROR: line $LINENO: $BASH_COMMAND exited $?"' ERR

guard_base() {
  BASE=$(realpath -m "$BASE")
  case "$BASE/" in
    "$REPO_ROOT"/*) die "BASE ($BASE) must be outside the clone ($REPO_ROOT)";;
    /|//) die "BASE must not be /";;
  esac
  [[ $NS =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad netns name: $NS"
}

pidfile() { echo "$PIDS_DIR/$1.pid"; }

# import_image cell|argoexec|pause: build it with buildah from its Dockerfile (images/build.sh,
# base images made locally: no registry here), as an OCI archive in $CCSWEEP_CACHE/images, and
# import that into every node's containerd (namespace k8s.io), where pods run it with
# imagePullPolicy: Never. Prints the image's name. Older builds of the same image (other tags) are
# removed from containerd: its content store outlives the cluster, and one build per commit fills it.
import_image() {
  local archive=$CCSWEEP_CACHE/images/$1.oci image tagged sock
  mkdir -p "$CCSWEEP_CACHE/images"
  image=$("$REPO_ROOT/images/build.sh" --local-base --archive "$archive" "$1")
  for sock in $(node_sockets); do
    ctr -a "$sock" -n k8s.io images import "$archive" >&2
    for tagged in $(ctr -a "$sock" -n k8s.io images ls -q | grep -F "${image%:*}:" || true); do
      [[ $tagged == "$image" ]] || ctr -a "$sock" -n k8s.io images rm "$tagged" >&2
    done
  done
  log "imported $image"
  echo "$image"
}

# node_sockets: the containerd socket of the first node, and of every added node whose containerd
# answers (a node lost or being added gets its images when node.sh adds it).
node_sockets() {
  echo "$SOCK"
  local sock
  for sock in "$NODES_DIR"/*/containerd/containerd.sock; do
    [[ -S $sock ]] && ctr -a "$sock" version >/dev/null 2>&1 && echo "$sock"
  done
  return 0
}

# pid_of DAEMON: its recorded PID if that process is still alive AND still that program.
pid_of() {
  local f pid
  f=$(pidfile "$1")
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$1" || return 1
  echo "$pid"
}

ns_exists() { [[ -e /run/netns/$NS ]]; }

# rss_mb PID...: summed resident memory in MB.
rss_mb() {
  local total=0 p kb
  for p in "$@"; do
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    total=$((total + ${kb:-0}))
  done
  echo $((total / 1024))
}

# Shims are not our children (they daemonize); they are ours when they serve our socket.
# shim_pids_of SOCK: those of the containerd at SOCK (the first node's, or an added node's).
shim_pids_of() {
  local d
  for d in /proc/[0-9]*; do
    [[ -r $d/cmdline ]] || continue
    if tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q -- "containerd-shim.*-address $1 "; then
      echo "${d#/proc/}"
    fi
  done
}

our_shim_pids() { shim_pids_of "$SOCK"; }

our_pids() {
  local d
  for d in "${ADDONS[@]}" "${DAEMONS[@]}"; do pid_of "$d" || true; done
  our_shim_pids
}

# Start DAEMON (name) inside NS, detached in its own session, and record its PID.
start_daemon() {
  local name=$1; shift
  setsid "${IN_NS[@]}" "$@" > "$LOGS_DIR/$name.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$name")"
  log "started $name (pid $!), log: $LOGS_DIR/$name.log"
}

# wait_for WHAT TIMEOUT CMD...: poll CMD every 0.3 s; on timeout show the daemon log tail.
wait_for() {
  local what=$1 timeout=$2 end; shift 2
  end=$(($(date +%s) + timeout))
  until "$@" >/dev/null 2>&1; do
    if (($(date +%s) > end)); then
      tail -n 20 "$LOGS_DIR/$what.log" >&2 || true
      die "$what not ready after ${timeout}s"
    fi
    pid_of "$what" >/dev/null || { tail -n 20 "$LOGS_DIR/$what.log" >&2; die "$what exited"; }
    sleep 0.3
  done
}


# -- what every node has, the first (up.sh) and those node.sh adds ---------------------------------

# write_containerd_config DIR SOCK CNI_CONF_DIR [RUNC_ROOT]: DIR/config.toml for a node's containerd,
# everything under DIR. Each node has a containerd of its own: two kubelets on one would each
# garbage-collect the other's pod sandboxes as unknown to it. RUNC_ROOT keeps runc's container
# state beside the node (default /run/containerd/runc, the host's), so a lost node's is removed with it.
write_containerd_config() {
  local dir=$1 sock=$2 cni=$3 runc_root=${4:-}
  cat > "$dir/config.toml" <<EOT
# containerd for a node of the ccsweep test cluster (everything under $dir).
version = 2
root = "$dir/root"
state = "$dir/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The bounding set lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$cni"
EOT
  [[ -z $runc_root ]] || cat >> "$dir/config.toml" <<EOT
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    Root = "$runc_root"
EOT
}

# write_cni_config CONF_DIR BRIDGE SUBNET IPAM_DIR: the node's pod network, a bridge of its own in
# NS with the node's pod CIDR. Bridges of several nodes share NS, so pods of any node reach each
# other and the node addresses by plain routing.
write_cni_config() {
  cat > "$1/10-ccsweep-bridge.conflist" <<EOT
{"cniVersion": "0.4.0", "name": "ccsweep-bridge", "plugins": [
  {"type": "bridge", "bridge": "$2", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$4",
            "ranges": [[{"subnet": "$3"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOT
}

# write_kubelet_config FILE IP POD_CIDR SOCK PKI_PREFIX POD_LOGS CGROUP_ROOT RESERVED_CPU_MILLI RESERVED_MEMORY_MI
# CGROUP_ROOT: "/" for the first node; an added node's pods live under a cgroup of its own, or each
# kubelet would remove the other's pod cgroups as orphans (and kill what runs in them).
# RESERVED_*: held back from the node's allocatable (systemReserved), so that nodes on one machine
# split its cores and memory between them instead of each offering all of it; 0 reserves nothing.
write_kubelet_config() {
  local file=$1 ip=$2 cidr=$3 sock=$4 pki=$5 logs=$6 cgroup_root=$7 cpu=$8 memory=$9
  cat > "$file" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: $BASE/pki/ca.crt}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs          # PID 1 is not systemd; cgroups v1
cgroupRoot: $cgroup_root
containerRuntimeEndpoint: unix://$sock
failSwapOn: false
address: $ip
healthzBindAddress: $ip         # several kubelets share NS: each listens on its own node's address
nodeLeaseDurationSeconds: $NODE_LEASE_SECONDS
tlsCertFile: $pki.crt
tlsPrivateKeyFile: $pki.key
podCIDR: $cidr
podLogsDir: $logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute floors, not shares of the disk: 1 % of a large, mostly full disk is GBs, and under disk
# pressure the kubelet refuses pods and deletes unused images (those imported for imagePullPolicy Never).
evictionHard: {memory.available: "100Mi", nodefs.available: "${EVICTION_DISK_MB}Mi", imagefs.available: "${EVICTION_DISK_MB}Mi"}
EOT
  if ((cpu > 0 || memory > 0)); then
    echo "systemReserved: {cpu: \"${cpu}m\", memory: \"${memory}Mi\"}" >> "$file"
  fi
}

# The machine's cores (millicores) and memory (MiB) as each kubelet counts its node's capacity.
machine_cpu_milli() { echo $(($(getconf _NPROCESSORS_ONLN) * 1000)); }
machine_memory_mi() { awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo; }

# sign NAME SUBJECT EXTENSIONS [DIR]: a key and a CA-signed certificate DIR/NAME.{key,crt} (DIR
# default: the cluster's pki/), unless present.
sign() {
  local name=$1 subject=$2 ext=$3 out=${4:-$BASE/pki} p=$BASE/pki
  [[ -s $out/$name.crt ]] && return
  openssl genrsa -out "$out/$name.key" 2048 2>/dev/null
  openssl req -new -key "$out/$name.key" -subj "$subject" -out "$out/$name.csr"
  printf '%b' "$ext" > "$out/$name.ext"
  openssl x509 -req -in "$out/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -days 365 -extfile "$out/$name.ext" -out "$out/$name.crt" 2>/dev/null
}

# write_kubeconfig FILE USER CERT_PREFIX: a kubeconfig for the API server inside NS, with the
# certificate CERT_PREFIX.crt and key CERT_PREFIX.key embedded.
write_kubeconfig() {
  local kc=("$REPO_BIN/kubectl" --kubeconfig="$1" config)
  "${kc[@]}" set-cluster ccsweep --server=https://127.0.0.1:6443 --certificate-authority="$BASE/pki/ca.crt" --embed-certs >/dev/null
  "${kc[@]}" set-credentials "$2" --client-certificate="$3.crt" --client-key="$3.key" --embed-certs >/dev/null
  "${kc[@]}" set-context ccsweep --cluster=ccsweep --user="$2" >/dev/null
  "${kc[@]}" use-context ccsweep >/dev/null
}

# sign_kubelet NAME IP DIR: the kubelet's certificate for node NAME (user system:node:NAME, group
# system:nodes, as the API server's Node authorizer and NodeRestriction expect), serving at IP.
sign_kubelet() {
  sign kubelet "/O=system:nodes/CN=system:node:$1" "extendedKeyUsage=clientAuth,serverAuth\nsubjectAltName=IP:$2,DNS:$1\n" "$3"
}

# -- stopping: down.sh for the cluster, node.sh for a node --------------------------------------

# record_cni_netns SOCK FILE: append to FILE the pod network namespaces the containerd at SOCK made,
# read from its sandboxes' specs (nothing when it does not answer).
record_cni_netns() {
  ctr -a "$1" version >/dev/null 2>&1 || return 0
  local id
  for id in $(ctr -a "$1" -n k8s.io containers ls -q 2>/dev/null); do
    ctr -a "$1" -n k8s.io containers info "$id" 2>/dev/null \
      | grep -o '"/var/run/netns/cni-[^"]*"\|"/run/netns/cni-[^"]*"' | tr -d '"' | xargs -r -n1 basename || true
  done | sort -u >> "$2"
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

# kill_containers SOCK: every container task of the containerd at SOCK killed and removed.
kill_containers() {
  ctr -a "$1" version >/dev/null 2>&1 || return 0
  local t
  for t in $(ctr -a "$1" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$1" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
  done
  sleep 0.5
  for t in $(ctr -a "$1" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$1" -n k8s.io tasks rm -f "$t" >/dev/null 2>&1 || true
  done
}

# unmount_under DIR: every mount below DIR, deepest first.
unmount_under() {
  local m n=0
  # Mount points are octal-escaped in /proc/mounts (\040 for a space).
  while read -r m; do
    m=$(printf '%b' "$m")
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    n=$((n + 1))
  done < <(awk -v b="$1/" 'index($2, b) == 1 {print $2}' /proc/mounts | sort -r)
  ((n == 0)) || log "unmounted $n mounts under $1"
}
