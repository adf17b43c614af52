#!/usr/bin/env bash
# images/build.sh [--push REGISTRY]
# Builds the cell image from images/cell/Dockerfile with buildah, a standard OCI builder from
# Debian's packages (`apt-get install buildah`), as anyone building ccsweep for their own cluster
# does. The image is named REGISTRY/ccsweep/cell:VERSION (VERSION: the package's, which is the
# chart's appVersion), or localhost/ccsweep/cell:VERSION without --push. With --push it is pushed
# there (`buildah login REGISTRY` first for a registry that needs it). Prints the image's name.
# `make image REGISTRY=...` runs this.
#   BUILDAH_ISOLATION  buildah's --isolation (default: chroot, which needs no user namespaces)
set -euo pipefail
shopt -s inherit_errexit

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
registry=""
while (($#)); do
  case $1 in
    --push) registry=${2:?--push needs a registry host, e.g. registry.example.org}; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "images/build.sh: unknown argument $1 (allowed: --push REGISTRY)" >&2; exit 2 ;;
  esac
done
if [[ -n $registry && ! $registry =~ ^[A-Za-z0-9.-]+(:[0-9]+)?$ ]]; then
  echo "images/build.sh: --push $registry: expected a registry host[:port], e.g. registry.example.org" >&2
  exit 2
fi
command -v buildah >/dev/null || { echo "images/build.sh: buildah not found (apt-get install buildah)" >&2; exit 1; }
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO_ROOT/src/ccsweep/__init__.py")
image=${registry:-localhost}/ccsweep/cell:$version

buildah bud --isolation "${BUILDAH_ISOLATION:-chroot}" --layers \
  --file "$REPO_ROOT/images/cell/Dockerfile" --ignorefile "$REPO_ROOT/images/cell/Dockerfile.dockerignore" \
  --tag "$image" "$REPO_ROOT" >&2
if [[ -n $registry ]]; then
  buildah push "$image" "docker://$image" >&2
fi
echo "$image"
