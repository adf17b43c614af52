#!/usr/bin/env bash
# services.sh [BASE] [NS]: the sweep's services on the node of the cluster at BASE, inside NS:
#   MinIO        :9000  (result store; bucket `ccsweep`; data in BASE/minio)
#   Pushgateway  :9091  (cells push live metrics)
#   Prometheus   :9090  (scrapes the Pushgateway and the Argo controller every 2 s)
# Pods reach them at the node's address $NODE_IP; nothing listens outside NS. Writes
# $BASE/services.env (endpoints and the MinIO keys, mode 600) for tests and for the cluster
# Secret a workflow reads. Stopped by down.sh like every recorded daemon. Idempotent.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"
guard_base

BUCKET=ccsweep
ENV_FILE=$BASE/services.env

check_prerequisites() {
  [[ -x $BASE/kubectl ]] || die "no cluster at $BASE: run hack/cluster/up.sh first"
  ns_exists || die "netns $NS missing: run hack/cluster/up.sh first"
  [[ -x $REPO_BIN/minio ]] || die "$REPO_BIN/minio missing: run hack/tools/minio.sh"
  local b
  for b in prometheus prometheus-pushgateway; do
    command -v "$b" >/dev/null || die "$b missing: run hack/tools/apt.sh"
  done
}

# Keys are made once per BASE and reused, so a restarted MinIO keeps serving its old data.
write_env() {
  if [[ ! -s $ENV_FILE ]]; then
    local key secret
    key=ccsweep-$(openssl rand -hex 4)
    secret=$(openssl rand -hex 20)
    (umask 077; cat > "$ENV_FILE" <<EOT
CCSWEEP_S3_ENDPOINT=http://$NODE_IP:9000
CCSWEEP_S3_ACCESS_KEY=$key
CCSWEEP_S3_SECRET_KEY=$secret
CCSWEEP_S3_BUCKET=$BUCKET
CCSWEEP_PUSHGATEWAY=$NODE_IP:9091
CCSWEEP_PROMETHEUS=http://$NODE_IP:9090
EOT
    )
  fi
  # shellcheck disable=SC1090
  source "$ENV_FILE"
}

start_minio() {
  pid_of minio >/dev/null && return
  mkdir -p "$BASE/minio"
  # The keys go in the environment, never on a command line (any user can read argv in /proc).
  (export MINIO_ROOT_USER="$CCSWEEP_S3_ACCESS_KEY" MINIO_ROOT_PASSWORD="$CCSWEEP_S3_SECRET_KEY" \
          MINIO_BROWSER=off MINIO_UPDATE=off
   start_daemon minio "$REPO_BIN/minio" server --quiet "$BASE/minio" \
     --address ":9000" --console-address "127.0.0.1:9001")
  wait_for minio 30 "${IN_NS[@]}" curl -sf http://127.0.0.1:9000/minio/health/ready
}

# The bucket, with a signed S3 request (curl's SigV4): no client library needed here. curl reads
# the keys as a config file on stdin (-K -), so they never appear on its command line.
make_bucket() {
  local s3=("${IN_NS[@]}" curl -K - -s -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3)
  local user="user = \"$CCSWEEP_S3_ACCESS_KEY:$CCSWEEP_S3_SECRET_KEY\""
  [[ $("${s3[@]}" -I "http://127.0.0.1:9000/$BUCKET" <<<"$user") == 200 ]] && return
  local code
  code=$("${s3[@]}" -X PUT "http://127.0.0.1:9000/$BUCKET" <<<"$user")
  [[ $code == 200 ]] || die "creating bucket $BUCKET: HTTP $code"
  log "bucket $BUCKET created"
}

start_pushgateway() {
  pid_of prometheus-pushgateway >/dev/null && return
  # In memory: Debian's default persistence file (/var/lib/prometheus) is shared by the machine,
  # and metrics of an earlier cluster would pass for this one's.
  start_daemon prometheus-pushgateway prometheus-pushgateway --web.listen-address=:9091 --persistence.file=""
  wait_for prometheus-pushgateway 30 "${IN_NS[@]}" curl -sf http://127.0.0.1:9091/-/ready
}

start_prometheus() {
  pid_of prometheus >/dev/null && return
  mkdir -p "$BASE/prometheus/data"
  cat > "$BASE/prometheus/prometheus.yml" <<EOT
# Prometheus beside the test cluster (hack/cluster/services.sh).
global: {scrape_interval: 2s, evaluation_interval: 2s}
scrape_configs:
  - job_name: pushgateway
    honor_labels: true          # keep the cells' own job/instance labels
    static_configs: [{targets: ["127.0.0.1:9091"]}]
  - job_name: argo-workflow-controller
    static_configs: [{targets: ["127.0.0.1:9095"]}]
EOT
  start_daemon prometheus prometheus --config.file="$BASE/prometheus/prometheus.yml" \
    --storage.tsdb.path="$BASE/prometheus/data" --web.listen-address=:9090 --storage.tsdb.retention.time=1d
  wait_for prometheus 60 "${IN_NS[@]}" curl -sf http://127.0.0.1:9090/-/ready
}

main() {
  check_prerequisites
  mkdir -p "$BASE/logs" "$BASE/pids"
  write_env
  start_minio
  make_bucket
  start_pushgateway
  start_prometheus
  log "services ready in $(($(date +%s) - _T0))s: S3 $CCSWEEP_S3_ENDPOINT, Pushgateway $CCSWEEP_PUSHGATEWAY, Prometheus $CCSWEEP_PROMETHEUS (see $ENV_FILE)"
}
main
