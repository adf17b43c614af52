# shellcheck shell=bash
# Shared by up.sh and down.sh (sourced). A cluster is a BASE folder (outside the clone) plus a
# network namespace NS. Layout of BASE:
#   pids/<daemon>.pid   one file per daemon we started (down.sh kills exactly these), add-ons too
#   state/              what up.sh created on the host (netns marker, cni netns list)
#   logs/<daemon>.log   daemon logs;  pki/  kubeconfigs  containerd/  etcd/  kubelet/
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

pidfile() { echo "$BASE/pids/$1.pid"; }

# import_image cell|argoexec|pause: build it with buildah from its Dockerfile (images/build.sh,
# base images made locally: no registry here), as an OCI archive in $CCSWEEP_CACHE/images, and
# import that into the node's containerd (namespace k8s.io), where pods run it with
# imagePullPolicy: Never. Prints the image's name. Older builds of the same image (other tags) are
# removed from containerd: its content store outlives the cluster, and one build per commit fills it.
import_image() {
  local archive=$CCSWEEP_CACHE/images/$1.oci image tagged
  mkdir -p "$CCSWEEP_CACHE/images"
  image=$("$REPO_ROOT/images/build.sh" --local-base --archive "$archive" "$1")
  ctr -a "$SOCK" -n k8s.io images import "$archive" >&2
  for tagged in $(ctr -a "$SOCK" -n k8s.io images ls -q | grep -F "${image%:*}:" || true); do
    [[ $tagged == "$image" ]] || ctr -a "$SOCK" -n k8s.io images rm "$tagged" >&2
  done
  log "imported $image"
  echo "$image"
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
our_shim_pids() {
  local d
  for d in /proc/[0-9]*; do
    [[ -r $d/cmdline ]] || continue
    if tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q -- "containerd-shim.*-address $SOCK"; then
      echo "${d#/proc/}"
    fi
  done
}

our_pids() {
  local d
  for d in "${ADDONS[@]}" "${DAEMONS[@]}"; do pid_of "$d" || true; done
  our_shim_pids
}

# Start DAEMON (name) inside NS, detached in its own session, and record its PID.
start_daemon() {
  local name=$1; shift
  setsid "${IN_NS[@]}" "$@" > "$BASE/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$name")"
  log "started $name (pid $!), log: $BASE/logs/$name.log"
}

# wait_for WHAT TIMEOUT CMD...: poll CMD every 0.3 s; on timeout show the daemon log tail.
wait_for() {
  local what=$1 timeout=$2 end; shift 2
  end=$(($(date +%s) + timeout))
  until "$@" >/dev/null 2>&1; do
    if (($(date +%s) > end)); then
      tail -n 20 "$BASE/logs/$what.log" >&2 || true
      die "$what not ready after ${timeout}s"
    fi
    pid_of "$what" >/dev/null || { tail -n 20 "$BASE/logs/$what.log" >&2; die "$what exited"; }
    sleep 0.3
  done
}

