#!/usr/bin/env bash
# MinIO server, pinned, built with `go install` from the Go module proxy:
#   $CCSWEEP_CACHE/tools/minio-<pseudo-version>/minio   (cold ~2.5 min / 1.5 GB; warm instant)
# The pin is MINIO_VERSION in versions.env, a module pseudo-version (the proxy refuses MinIO's
# RELEASE.* tags): bump it deliberately, the way that file says.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

main() {
  go_install_pinned minio "$MINIO_VERSION" "github.com/minio/minio@$MINIO_VERSION" minio
  "$REPO_BIN/minio" --version | head -1
  done_msg "minio $MINIO_VERSION"
}
main "$@"
