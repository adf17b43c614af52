#!/usr/bin/env bash
# Helm 3 CLI, pinned, built with `go install` from the Go module proxy:
#   $CCSWEEP_CACHE/tools/helm-v3.22.0/helm      (cold ~2 min / 1.1 GB; warm instant)
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

HELM_VERSION=${HELM_VERSION:-v3.22.0}

main() {
  # Without the -X flag `helm version` says only "v3.22" (the source's default).
  go_install_pinned helm "$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" helm \
    "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  "$REPO_BIN/helm" version --short
  done_msg "helm $HELM_VERSION"
}
main "$@"
