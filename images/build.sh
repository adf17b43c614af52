#!/usr/bin/env bash
# images/build.sh [--push REGISTRY] [--local-base] [--archive FILE]
# Builds the cell image from images/cell/Dockerfile with buildah, a standard OCI builder from
# Debian's packages (`apt-get install buildah`), as anyone building ccsweep for their own cluster
# does. The image is named REGISTRY/ccsweep/cell:VERSION (VERSION: the package's, which is the
# chart's appVersion), or localhost/ccsweep/cell:VERSION without --push. Prints the image's name.
#   --push REGISTRY  push it there (`buildah login REGISTRY` first where the registry needs it)
#   --local-base     no registry reachable: make the base images from a local root file system
#                    (images/local-base.sh) and never pull
#   --archive FILE   also write it as an OCI archive (what `ctr images import` takes)
# Mahimahi is built from the pinned commit (versions.env): from MAHIMAHI_TARBALL (default
# ../shared/vendor/mahimahi-COMMIT.tar.gz beside the clone) when that file exists, else the
# Dockerfile clones the commit from GitHub.
#   BUILDAH_ISOLATION  buildah's --isolation (default: chroot, which needs no user namespaces)
# `make image REGISTRY=...` runs this.
set -euo pipefail
shopt -s inherit_errexit

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../hack/versions.sh
source "$REPO_ROOT/hack/versions.sh"
usage() { echo "images/build.sh: $*" >&2; exit 2; }

registry="" archive="" pull=()
while (($#)); do
  case $1 in
    --push) registry=${2:-}; [[ -n $registry ]] || usage "--push needs a registry host, e.g. registry.example.org"; shift 2 ;;
    --archive) archive=${2:-}; [[ -n $archive ]] || usage "--archive needs a file name"; shift 2 ;;
    --local-base) pull=(--pull=never); shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown argument $1 (allowed: --push REGISTRY, --local-base, --archive FILE)" ;;
  esac
done
if [[ -n $registry && ! $registry =~ ^[A-Za-z0-9.-]+(:[0-9]+)?$ ]]; then
  usage "--push $registry: expected a registry host[:port], e.g. registry.example.org"
fi
command -v buildah >/dev/null || { echo "images/build.sh: buildah not found (apt-get install buildah)" >&2; exit 1; }
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO_ROOT/src/ccsweep/__init__.py")
image=${registry:-localhost}/ccsweep/cell:$version

((${#pull[@]} == 0)) || "$REPO_ROOT/images/local-base.sh"
tarball=${MAHIMAHI_TARBALL:-$REPO_ROOT/../shared/vendor/mahimahi-$MAHIMAHI_COMMIT.tar.gz}
vendored=$REPO_ROOT/images/cell/mahimahi/mahimahi-$MAHIMAHI_COMMIT.tar.gz
if [[ -f $tarball ]]; then
  cp "$tarball" "$vendored"
  trap 'rm -f "$vendored"' EXIT
  echo "images/build.sh: Mahimahi $MAHIMAHI_COMMIT from $tarball" >&2
fi

buildah bud --isolation "${BUILDAH_ISOLATION:-chroot}" --layers "${pull[@]}" \
  --file "$REPO_ROOT/images/cell/Dockerfile" --ignorefile "$REPO_ROOT/images/cell/Dockerfile.dockerignore" \
  --tag "$image" "$REPO_ROOT" >&2
[[ -z $registry ]] || buildah push "$image" "docker://$image" >&2
[[ -z $archive ]] || { rm -f "$archive"; buildah push "$image" "oci-archive:$archive:$image" >&2; }
echo "$image"
