"""The other images the test cluster runs, built from their Dockerfiles with buildah (images/build.sh).

images/pause/Dockerfile: the pod sandbox, the static pause binary alone FROM scratch.
images/argoexec/Dockerfile: Argo's executor, the static binary hack/tools/argo.sh built, on
distroless/static (made locally with --local-base where no registry is reached).
The e2e cluster imports both (hack/cluster/up.sh, argo.sh); here, what is in them.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from support.versions import ARGO_WORKFLOWS_VERSION, KUBERNETES_VERSION

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.image


def build(name: str, archive: Path) -> tuple[str, dict]:
    """The image's name and its OCI config, from its archive (what `ctr images import` reads)."""
    done = subprocess.run([str(REPO / "images/build.sh"), "--local-base", "--archive", str(archive), name],
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-4000:]
    with tarfile.open(archive) as tar:
        index = json.loads(tar.extractfile("index.json").read())
        (manifest,) = index["manifests"]
        blob = tar.extractfile(f"blobs/sha256/{manifest['digest'].split(':')[1]}").read()
        config_digest = json.loads(blob)["config"]["digest"].split(":")[1]
        config = json.loads(tar.extractfile(f"blobs/sha256/{config_digest}").read())
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == done.stdout.strip()
    return done.stdout.strip(), config


def test_pause_image_is_the_static_binary_alone(tmp_path: Path):
    name, config = build("pause", tmp_path / "pause.oci")
    assert name == f"localhost/ccsweep/pause:{KUBERNETES_VERSION}"
    assert config["config"]["Entrypoint"] == ["/pause"] and config["config"]["User"] == "65535:65535"
    assert len(config["rootfs"]["diff_ids"]) == 1  # FROM scratch: one layer, the binary


def top_layer_file(archive: Path, member: str) -> bytes:
    """A file of the image's top layer (the Dockerfile's last COPY), read from its OCI archive."""
    with tarfile.open(archive) as tar:
        (manifest,) = json.loads(tar.extractfile("index.json").read())["manifests"]
        blob = json.loads(tar.extractfile(f"blobs/sha256/{manifest['digest'].split(':')[1]}").read())
        layer = tar.extractfile(f"blobs/sha256/{blob['layers'][-1]['digest'].split(':')[1]}")
        with tarfile.open(fileobj=layer, mode="r:*") as files:
            return files.extractfile(member).read()


def test_argoexec_image_runs_the_pinned_release(tmp_path: Path):
    name, config = build("argoexec", tmp_path / "argoexec.oci")
    # The very binary hack/tools/argo.sh built for the local tools: Argo is compiled once.
    built = (REPO / "bin/argoexec").resolve().read_bytes()
    assert hashlib.sha256(top_layer_file(tmp_path / "argoexec.oci", "bin/argoexec")).digest() == \
        hashlib.sha256(built).digest()
    assert name == f"localhost/ccsweep/argoexec:{ARGO_WORKFLOWS_VERSION}"
    assert config["config"]["Entrypoint"] == ["argoexec"]
    container = subprocess.run(["buildah", "from", "--pull=never", name], capture_output=True, text=True,
                               check=True).stdout.strip()
    try:
        done = subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", "argoexec", "version",
                               "--short"], capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert ARGO_WORKFLOWS_VERSION in done.stdout, done.stdout
