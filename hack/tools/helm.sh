#!/usr/bin/env bash
# Helm 3 CLI, pinned, built with `go install` from the Go module proxy:
#   $CCSWEEP_CACHE/tools/helm-$HELM_VERSION/helm      (cold ~2 min / 1.1 GB; warm instant)
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

main() {
  # Without the -X flag `helm version` says only the minor version (the source's default).
  go_install_pinned helm "$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" helm \
    "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  "$REPO_BIN/helm" version --short
  done_msg "helm $HELM_VERSION"
}
main "$@"
