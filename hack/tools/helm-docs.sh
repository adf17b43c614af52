#!/usr/bin/env bash
# helm-docs, pinned, built with `go install` from the Go module proxy: it writes the chart's
# README values table from the `# --` comments in values.yaml (`make chart-readme`).
#   $CCSWEEP_CACHE/tools/helm-docs-$HELM_DOCS_VERSION/helm-docs   (cold ~1 min; warm instant)
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"

main() {
  go_install_pinned helm-docs "$HELM_DOCS_VERSION" "github.com/norwoodj/helm-docs/cmd/helm-docs@$HELM_DOCS_VERSION" helm-docs
  done_msg "helm-docs $HELM_DOCS_VERSION"
}
main "$@"
