#!/usr/bin/env bash
# KWOK's controller, pinned, built with `go install` from the Go module proxy:
#   $CCSWEEP_CACHE/tools/kwok-$KWOK_VERSION/kwok      (cold ~3 min; warm instant)
# It fakes Node heartbeats and Pod status against a real API server, so the control plane and
# Argo can be measured fanning out to hundreds of nodes this machine does not have
# (make bench-fanout). Not part of `make tools`: only that benchmark needs it.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

main() {
  go_install_pinned kwok "$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" kwok \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  "$REPO_BIN/kwok" --version 2>/dev/null | head -1 || true
  done_msg "kwok $KWOK_VERSION"
}
main "$@"
