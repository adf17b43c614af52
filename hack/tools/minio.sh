#!/usr/bin/env bash
# MinIO server, pinned, built with `go install` from the Go module proxy:
#   $CCSWEEP_CACHE/tools/minio-<pseudo-version>/minio   (cold ~2.5 min / 1.5 GB; warm instant)
# The proxy refuses MinIO's RELEASE.* tags, so the pin is the module pseudo-version that
# `go mod download -json github.com/minio/minio@latest` resolved on 2026-11-22:
# commit 7aac2a2c5b7c of 2026-02-12. Bump it deliberately, the same way.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

MINIO_VERSION=${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}

main() {
  go_install_pinned minio "$MINIO_VERSION" "github.com/minio/minio@$MINIO_VERSION" minio
  "$REPO_BIN/minio" --version | head -1
  done_msg "minio $MINIO_VERSION"
}
main "$@"
