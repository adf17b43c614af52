#!/usr/bin/env bash
# images/build.sh [--push REGISTRY] [--local-base] [--archive FILE] [cell|argoexec|pause]
# Builds an image from its Dockerfile with buildah, a standard OCI builder from Debian's packages
# (`apt-get install buildah`), as anyone building ccsweep for their own cluster does. Prints the
# image's name, REGISTRY/ccsweep/NAME:TAG, or localhost/ccsweep/NAME:TAG without --push:
#   cell      images/cell/Dockerfile (the default): cells, operator and node probe; TAG is the
#             build identity VERSION-gCOMMIT (ccsweep/buildinfo.py; -dirty: uncommitted changes),
#             so every build has a tag of its own, and the commit is stamped into the package
#   argoexec  images/argoexec/Dockerfile: Argo's executor, TAG its release (ARGO_WORKFLOWS_VERSION);
#             its context is the static argoexec hack/tools/argo.sh built (bin/argoexec)
#   pause     images/pause/Dockerfile: the test cluster's pod sandbox, TAG KUBERNETES_VERSION; its
#             context is the static pause binary hack/tools/kubernetes.sh built (bin/pause)
#   --push REGISTRY  push it there (`buildah login REGISTRY` first where the registry needs it)
#   --local-base     no registry reachable: make the base images from a local root file system
#                    (images/local-base.sh) and never pull
#   --archive FILE   also write it as an OCI archive (what `ctr -n k8s.io images import` takes)
# The cell's Mahimahi is built from the pinned commit (versions.env), from its unmodified source
# tarball vendored in third_party/mahimahi/; nothing is fetched from GitHub unless the build arg
# MAHIMAHI_COMMIT asks for a commit that is not vendored (images/cell/Dockerfile).
#   BUILDAH_ISOLATION  buildah's --isolation (default: chroot, which needs no user namespaces)
# Layers are cached in buildah's own storage (`buildah info`: /var/lib/containers/storage for
# root), outside the clone and shared by every clone on the machine; an unchanged rebuild takes
# seconds (buildah's CONTAINERS_STORAGE_CONF moves that storage, e.g. into a cache a CI keeps).
# A build removes the older builds of the same image from that storage (its other tags: a cell
# image per commit would otherwise pile up, and a full disk stops a cluster's pods); the registry
# or the archive keeps what was pushed or written.
# `make image REGISTRY=...` runs this for the cell image.
set -euo pipefail
shopt -s inherit_errexit

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../hack/versions.sh
source "$REPO_ROOT/hack/versions.sh"
usage() { echo "images/build.sh: $*" >&2; exit 2; }

registry="" archive="" pull=() name=cell
while (($#)); do
  case $1 in
    --push) registry=${2:-}; [[ -n $registry ]] || usage "--push needs a registry host, e.g. registry.example.org"; shift 2 ;;
    --archive) archive=${2:-}; [[ -n $archive ]] || usage "--archive needs a file name"; shift 2 ;;
    --local-base) pull=(--pull=never); shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    cell|argoexec|pause) name=$1; shift ;;
    *) usage "unknown argument $1 (allowed: --push REGISTRY, --local-base, --archive FILE, cell|argoexec|pause)" ;;
  esac
done
if [[ -n $registry && ! $registry =~ ^[A-Za-z0-9.-]+(:[0-9]+)?$ ]]; then
  usage "--push $registry: expected a registry host[:port], e.g. registry.example.org"
fi
command -v buildah >/dev/null || { echo "images/build.sh: buildah not found (apt-get install buildah)" >&2; exit 1; }

# built_binary_folder NAME SCRIPT: the folder SCRIPT built the static binary NAME into (./bin links
# it), the whole build context of the argoexec and pause images.
built_binary_folder() {
  local binary
  binary=$(readlink -f "${CCSWEEP_BIN:-$REPO_ROOT/bin}/$1") || usage "no $1 in ${CCSWEEP_BIN:-$REPO_ROOT/bin}: run $2"
  [[ -x $binary ]] || usage "$binary missing: run $2"
  dirname "$binary"
}

context=$REPO_ROOT
build_args=()
case $name in
  cell)
    buildinfo() { PYTHONPATH=$REPO_ROOT/src python3 -m ccsweep.buildinfo "$@"; }
    tag=$(buildinfo)
    build_args=(--build-arg "CCSWEEP_COMMIT=$(buildinfo --commit)" --build-arg "CCSWEEP_BUILD=$tag") ;;
  argoexec) tag=$ARGO_WORKFLOWS_VERSION; context=$(built_binary_folder argoexec hack/tools/argo.sh) ;;
  pause) tag=$KUBERNETES_VERSION; context=$(built_binary_folder pause hack/tools/kubernetes.sh) ;;
esac
image=${registry:-localhost}/ccsweep/$name:$tag

((${#pull[@]} == 0)) || "$REPO_ROOT/images/local-base.sh" "$name" >&2

buildah bud --isolation "${BUILDAH_ISOLATION:-chroot}" --layers "${pull[@]}" "${build_args[@]}" \
  --file "$REPO_ROOT/images/$name/Dockerfile" --ignorefile "$REPO_ROOT/images/$name/Dockerfile.dockerignore" \
  --tag "$image" "$context" >&2
old=$(buildah images --format '{{.Name}}:{{.Tag}}' --filter "reference=${image%:*}")
for tagged in $old; do
  [[ $tagged == "$image" ]] || buildah rmi "$tagged" >&2 || echo "images/build.sh: kept $tagged (in use)" >&2
done
[[ -z $registry ]] || buildah push "$image" "docker://$image" >&2
if [[ -n $archive ]]; then
  # An archive written from this very image (its ID beside it, in FILE.id) is kept as it is.
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "$image")
  if [[ ! -s $archive || $(cat "$archive.id" 2>/dev/null) != "$id" ]]; then
    rm -f "$archive" "$archive.id"
    buildah push "$image" "oci-archive:$archive:$image" >&2
    echo "$id" > "$archive.id"
  fi
fi
echo "$image"
