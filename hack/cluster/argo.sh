#!/usr/bin/env bash
# argo.sh [BASE] [NS]: Argo Workflows on the cluster that up.sh started at BASE:
#   - the CRDs (the module's minimal ones, from hack/tools/argo.sh),
#   - namespace `argo` with the controller's ConfigMap (executor image, metrics port),
#   - the executor image (images/argoexec/Dockerfile, built with buildah) in the node's containerd,
#   - workflow-controller itself, on the node inside NS (like the control plane: recorded PID,
#     stopped by down.sh), talking to the API server with the admin kubeconfig,
#   - $BASE/argo: the argo CLI wired to this cluster.
# On a real cluster install upstream's manifests instead (docs/kubernetes.md); the controller
# and its configuration are the same, but for the requeue time the e2e tests shorten (REQUEUE_S
# below). Idempotent: a running controller is left alone.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"
guard_base

ARGO_NAMESPACE=argo
METRICS_PORT=9095   # not 9090, Prometheus' port on the node (services.sh)
# How often the controller looks at a running Workflow again unprompted (its DEFAULT_REQUEUE_TIME,
# upstream's default 10 s). The end of a step is often seen only then, so every step of a sweep
# (plan, cells, figures, verdict) can wait that long. CCSWEEP_ARGO_REQUEUE_S: 1-60 s; the e2e tests
# ask for 1 (many short Workflows), the benchmarks keep upstream's 10, as a real install has.
REQUEUE_S=${CCSWEEP_ARGO_REQUEUE_S:-10}
if [[ ! $REQUEUE_S =~ ^[0-9]{1,2}$ ]] || ((10#$REQUEUE_S < 1 || 10#$REQUEUE_S > 60)); then
  echo "argo.sh: CCSWEEP_ARGO_REQUEUE_S must be 1-60 seconds, got '$REQUEUE_S'" >&2
  exit 2
fi

check_prerequisites() {
  { [[ -x $BASE/kubectl ]] && pid_of kube-apiserver >/dev/null; } || die "no cluster at $BASE: run hack/cluster/up.sh first"
  local b
  for b in argo workflow-controller argoexec; do
    [[ -x $REPO_BIN/$b ]] || die "$REPO_BIN/$b missing: run hack/tools/argo.sh"
  done
  CRDS=$(dirname "$(readlink -f "$REPO_BIN/argo")")/crds
  [[ -d $CRDS ]] || die "$CRDS missing: rerun hack/tools/argo.sh"
}

write_cli_wrapper() {
  cat > "$BASE/argo" <<EOT
#!/bin/sh
# argo CLI for the cluster at $BASE (the API server only listens inside netns $NS).
exec nsenter --net=/run/netns/$NS $REPO_BIN/argo --kubeconfig=$BASE/admin.kubeconfig "\$@"
EOT
  chmod +x "$BASE/argo"
}

install_crds_and_config() {
  "$BASE/kubectl" apply --server-side -f "$CRDS" >/dev/null
  "$BASE/kubectl" wait --for=condition=Established --timeout=60s -f "$CRDS" >/dev/null
  local crds=("$CRDS"/*.yaml)
  log "Argo CRDs established (${#crds[@]})"
  "$BASE/kubectl" apply -f - >/dev/null <<EOT
apiVersion: v1
kind: Namespace
metadata: {name: $ARGO_NAMESPACE}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: workflow-controller-configmap, namespace: $ARGO_NAMESPACE}
data:
  # The wait container (and init, where a template gives it nothing of its own). It asks for 10m:
  # the emissary only waits while a cell runs (1.6m median over a pod's life, 7.1m p90:
  # benchmarks/results/2026-12-01-argo-deadline), and each pod's request counts whole against the
  # node, so at 100m it held a 2-core node to 8 cell pods whatever the cells carried. Its limit
  # stays at 100m, so the work it does when the cell ends goes no slower than in the runs before.
  executor: |
    imagePullPolicy: Never
    resources:
      requests: {cpu: 10m, memory: 128Mi}
      limits: {cpu: 100m, memory: 128Mi}
  # Plain http: Argo 3.7 serves metrics over TLS by default, which Prometheus beside the
  # cluster (services.sh) and the readiness check below would not speak.
  metricsConfig: |
    enabled: true
    port: $METRICS_PORT
    secure: false
  # As docs/install.md sets it up: only Workflows that reference a WorkflowTemplate run, with no
  # pod fields of their own (the controller's env below adds parallelism to what they may set).
  workflowRestrictions: |
    templateReferencing: Strict
EOT
}

import_executor_image() {
  [[ $(import_image argoexec) == "$ARGOEXEC_IMAGE" ]] || die "images/build.sh argoexec did not build $ARGOEXEC_IMAGE"
}

start_controller() {
  if pid_of workflow-controller >/dev/null; then
    log "workflow-controller already running (pid $(pid_of workflow-controller))"
    return
  fi
  mkdir -p "$BASE/logs" "$BASE/pids"
  # One controller, no leader election; it watches every namespace. Under Strict a Workflow may
  # set its own spec.parallelism (a Sweep's run.parallelism, chunk Workflows) only with this.
  start_daemon workflow-controller env LEADER_ELECTION_DISABLE=true WORKFLOW_USER_OVERRIDE_ALLOWLIST=parallelism \
    DEFAULT_REQUEUE_TIME="$((10#$REQUEUE_S))s" \
    "$REPO_BIN/workflow-controller" \
    --kubeconfig="$BASE/admin.kubeconfig" --namespace="$ARGO_NAMESPACE" \
    --executor-image="$ARGOEXEC_IMAGE" --executor-image-pull-policy=Never --loglevel=info
  # Its metrics server starts once it has read its configuration and begun to work.
  wait_for workflow-controller 60 "${IN_NS[@]}" curl -sf "http://127.0.0.1:$METRICS_PORT/metrics"
}

main() {
  check_prerequisites
  write_cli_wrapper
  install_crds_and_config
  import_executor_image
  start_controller
  log "Argo $("$REPO_BIN/argo" version --short 2>/dev/null | awk '{print $2}') ready in $(($(date +%s) - _T0))s; submit with $BASE/argo submit ..."
}
main
