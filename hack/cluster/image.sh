#!/usr/bin/env bash
# image.sh [BASE] [NS] [cell|argoexec|pause]: build an image from its Dockerfile with buildah
# (images/build.sh --local-base; default: the cell image) and import it into the containerd of the
# cluster up.sh started at BASE, so pods run it with imagePullPolicy: Never. Prints its name.
# up.sh imports the pause image and argo.sh the executor's the same way.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/lib.sh"
guard_base

[[ -S $SOCK ]] || die "no containerd at $SOCK: run hack/cluster/up.sh first"
import_image "${3:-cell}"
