# shellcheck shell=bash
# Loads versions.env (at the repo root), the one home of the pinned releases, into the
# environment. A variable already set wins: an image build's ARG, or a one-off trial such as
# `KUBERNETES_VERSION=v1.34.1 hack/tools/kubernetes.sh`, needs no edit of the file.
# Sourced, never run: by hack/tools/lib.sh, hack/cluster/lib.sh and images/build.sh.

_versions_file=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/versions.env
while IFS='=' read -r _key _value; do
  if [[ $_key =~ ^[A-Z][A-Z0-9_]*$ && -z ${!_key:-} ]]; then
    export "$_key=$_value"
  fi
done < "$_versions_file"
unset _key _value _versions_file
