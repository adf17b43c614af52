#!/usr/bin/env bash
# hack/release.sh OUT [--local-base]: everything a user installs, built from this clone's HEAD, into
# the folder OUT (`make release`, default dist/), with SHA256SUMS listing every file:
#   ccsweep-VERSION-py3-none-any.whl, ccsweep-VERSION.tar.gz   the package (python -m build)
#   ccsweep-cell-IDENTITY.oci.tar     the cell image as an OCI archive (`ctr images import` takes
#                                     it; `buildah push oci-archive:FILE docker://REGISTRY/...`
#                                     puts it into a registry)
#   ccsweep-cell-IDENTITY.cdx.json    that image's SBOM, CycloneDX 1.5 (hack/sbom.py)
#   ccsweep-VERSION.tgz               the Helm chart, appVersion IDENTITY, the image pinned by digest
# IDENTITY is VERSION-gCOMMIT (ccsweep/buildinfo.py). Only committed files go in: the build runs
# in a fresh clone of HEAD, with the commit stamped into the package; uncommitted changes are
# left out (and named). --local-base: no registry reachable, base images made locally
# (images/local-base.sh). Needs buildah, bin/helm (hack/tools/helm.sh) and the venv (`make venv`).
set -euo pipefail
shopt -s inherit_errexit

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "hack/release.sh: $*" >&2; exit 2; }
log() { echo "hack/release.sh: $*" >&2; }

out="" local_base=()
while (($#)); do
  case $1 in
    --local-base) local_base=(--local-base); shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) usage "unknown option $1 (allowed: --local-base)" ;;
    *) [[ -z $out ]] || usage "one OUT folder, not $out and $1"; out=$1; shift ;;
  esac
done
[[ -n $out ]] || usage "missing OUT, the folder to write the release into"
PYTHON=${PYTHON:-$REPO_ROOT/.venv/bin/python}
HELM=${HELM:-$REPO_ROOT/bin/helm}
[[ -x $PYTHON ]] || usage "no $PYTHON: run make venv"
[[ -x $HELM ]] || usage "no $HELM: run hack/tools/helm.sh"
command -v buildah >/dev/null || usage "buildah not found (apt-get install buildah)"

work=$(mktemp -d)
container=""
cleanup() {
  [[ -z $container ]] || { buildah umount "$container" >/dev/null; buildah rm "$container" >/dev/null; } || true
  rm -rf "$work"
}
trap cleanup EXIT

# The source: a fresh clone of HEAD, its commit stamped into the package (what buildinfo reads).
commit=$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD)
if [[ -n $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no) ]]; then
  log "uncommitted changes are not in the release (it is built from HEAD, $commit):"
  git -C "$REPO_ROOT" status --short --untracked-files=no >&2
fi
src=$work/ccsweep
git clone -q --no-hardlinks "$REPO_ROOT" "$src"
git -C "$src" checkout -q --detach "$(git -C "$REPO_ROOT" rev-parse HEAD)"
echo "$commit" > "$src/src/ccsweep/COMMIT"
identity=$(PYTHONPATH=$src/src python3 -m ccsweep.buildinfo)
version=$(PYTHONPATH=$src/src python3 -c 'import ccsweep; print(ccsweep.__version__)')
[[ $identity == "$version-g$commit" ]] || usage "build identity $identity, expected $version-g$commit"
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/ccsweep-* "$out/SHA256SUMS"
log "release $identity into $out"

# 1. The Python package: the sdist, then the wheel built from that sdist (so the sdist is complete).
"$PYTHON" -m build --outdir "$out" "$src" >&2

# 2. The cell image, as an OCI archive; its manifest digest is what the chart pins.
image=$("$src/images/build.sh" "${local_base[@]}" --archive "$work/cell.oci.tar" cell)
[[ $image == */ccsweep/cell:$identity ]] || usage "images/build.sh built $image, expected tag $identity"
archive=$out/ccsweep-cell-$identity.oci.tar
mv "$work/cell.oci.tar" "$archive"
digest=$(tar -xOf "$archive" index.json | python3 -c 'import json, sys; print(json.load(sys.stdin)["manifests"][0]["digest"])')
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || usage "no manifest digest in $archive (index.json says $digest)"
log "image $image@$digest"

# 3. Its SBOM, from the image's own package databases (nothing in it is run).
container=$(buildah from --pull=never "$image")
root=$(buildah mount "$container")
"$PYTHON" "$REPO_ROOT/hack/sbom.py" --root "$root" --image "$image" --digest "$digest" --version "$identity" \
  --cargo-lock "$src/emulator/Cargo.lock" --out "$out/ccsweep-cell-$identity.cdx.json"

# 4. The chart: appVersion is the build identity (the image's tag), and the digest pins the image.
# Edited in the throwaway clone itself: its files/ symlinks point into the clone (workflows,
# dashboards, monitoring), which a copy elsewhere would break.
chart=$src/charts/ccsweep
python3 - "$chart/values.yaml" "$digest" <<'EOF'
import pathlib, sys
path, digest = pathlib.Path(sys.argv[1]), sys.argv[2]
text = path.read_text()
unpinned = '\n  digest: ""\n'  # image.digest, the only key of that name at that depth
if text.count(unpinned) != 1:
    sys.exit(f"{path}: expected one image.digest line to pin")
path.write_text(text.replace(unpinned, f'\n  digest: "{digest}"\n'))
EOF
"$HELM" package --version "$version" --app-version "$identity" --destination "$out" "$chart" >&2

(cd "$out" && sha256sum -- ccsweep-* > SHA256SUMS)
log "done: $out"
cat "$out/SHA256SUMS"
