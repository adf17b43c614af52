"""`make release` (hack/release.sh) builds everything a user installs, into one folder with SHA256SUMS.

Each file is checked as a user would use it: the checksums with sha256sum, the wheel installed
into a fresh venv (its dependencies from the project's venv through a .pth file, as
tests/packaging does, so the test needs no network after the build), the sdist's contents, the
packaged chart rendered by Helm, the SBOM read as CycloneDX, and the image archive pulled by
buildah into an empty storage of its own. The chart's install on the test cluster is
tests/e2e/test_release_chart.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest
import yaml

from ccsweep import __version__
from releaselib import Release, build_release, checksums_hold
from support.chartlib import KUBE_VERSION, run_helm
from support.versions import read_versions

pytestmark = pytest.mark.image  # buildah, root; Debian's packages, PyPI and crates.io on first build


@pytest.fixture(scope="module")
def release() -> Release:
    return build_release()


def test_the_folder_holds_every_artifact_with_its_checksum(release: Release, tmp_path: Path):
    listed = [line.split(maxsplit=1)[1] for line in (release.folder / "SHA256SUMS").read_text().splitlines()]
    files = sorted(p.name for p in release.folder.iterdir() if p.name != "SHA256SUMS")
    assert sorted(listed) == files
    identity = release.identity
    assert files == sorted([f"ccsweep-{__version__}-py3-none-any.whl", f"ccsweep-{__version__}.tar.gz",
                            f"ccsweep-{__version__}.tgz", f"ccsweep-cell-{identity}.oci.tar",
                            f"ccsweep-cell-{identity}.cdx.json"])
    assert checksums_hold(release.folder)
    # A changed byte is caught: a copy of the folder with one file altered fails the check.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("SHA256SUMS", *files):
        (copy / name).symlink_to(release.folder / name)
    sbom = copy / f"ccsweep-cell-{identity}.cdx.json"
    sbom.unlink()
    sbom.write_text((release.folder / sbom.name).read_text() + " ")
    assert not checksums_hold(copy)


def test_the_wheel_installs_in_a_fresh_venv_and_names_its_build(release: Release, tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin/python"
    wheel = release.one("ccsweep-*.whl")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "ccsweep-test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCSWEEP_")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    shown = subprocess.run(["ccsweep", "--version"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"ccsweep {release.identity}\n"
    where = subprocess.run([str(python), "-c", "import ccsweep; print(ccsweep.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where


def test_the_sdist_carries_the_commit_and_the_presets(release: Release):
    with tarfile.open(release.one("ccsweep-*.tar.gz")) as sdist:
        names = set(sdist.getnames())
        top = f"ccsweep-{__version__}"
        stamp = sdist.extractfile(f"{top}/src/ccsweep/COMMIT")
        assert stamp is not None and stamp.read().decode().strip() == release.commit
    assert f"{top}/src/ccsweep/presets/quick.yaml" in names
    assert f"{top}/pyproject.toml" in names


def test_the_packaged_chart_names_the_build_and_pins_the_image_by_digest(release: Release):
    digest = release.image_digest()
    with tarfile.open(release.chart) as chart:
        meta = yaml.safe_load(chart.extractfile("ccsweep/Chart.yaml").read())  # type: ignore[union-attr]
        values = yaml.safe_load(chart.extractfile("ccsweep/values.yaml").read())  # type: ignore[union-attr]
    assert meta["version"] == __version__ and meta["appVersion"] == release.identity
    assert values["image"]["digest"] == digest
    rendered = run_helm("template", "ccsweep", str(release.chart), "--kube-version", KUBE_VERSION).stdout
    images = {c["image"] for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {f"ccsweep/cell:{release.identity}@{digest}"}


def test_the_sbom_lists_the_cell_images_software(release: Release):
    sbom = json.loads(release.one("ccsweep-cell-*.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.5"
    assert sbom["metadata"]["component"]["version"] == release.identity
    assert sbom["metadata"]["component"]["hashes"] == [{"alg": "SHA-256",
                                                        "content": release.image_digest().removeprefix("sha256:")}]
    by_source: dict[str, dict[str, str]] = {}
    for component in sbom["components"]:
        by_source.setdefault(component["properties"][0]["value"], {})[component["name"]] = component["version"]
    assert {"python3", "iproute2", "iperf3", "libc6"} <= set(by_source["dpkg"])
    assert by_source["python"]["ccsweep"] == __version__
    assert {"kopf", "pydantic", "minio"} <= set(by_source["python"])
    assert by_source["mahimahi"] == {"mahimahi": read_versions()["MAHIMAHI_COMMIT"]}
    assert "ccsweep-link" in by_source["cargo"]
    refs = [c["bom-ref"] for c in sbom["components"]]
    assert len(refs) == len(set(refs))


def test_the_image_archive_imports_with_its_build_labels(release: Release, tmp_path: Path):
    """Pulled into an empty buildah storage of its own: the archive alone is a complete image.

    The overlay driver stores each layer once (vfs copies the whole tree per layer: 3.4 GB for this
    1 GB image, enough to fill a nearly full disk), and the storage is emptied even when the pull fails."""
    storage = ["--root", str(tmp_path / "root"), "--runroot", str(tmp_path / "run"), "--storage-driver", "overlay"]
    try:
        pulled = subprocess.run(["buildah", *storage, "pull", "--quiet", f"oci-archive:{release.image_archive}"],
                                capture_output=True, text=True, timeout=900)
        assert pulled.returncode == 0, pulled.stderr
        inspected = subprocess.run(["buildah", *storage, "inspect", "--type", "image", pulled.stdout.strip()],
                                   capture_output=True, text=True, check=True, timeout=120)
        image = json.loads(inspected.stdout)
        labels = image["OCIv1"]["config"]["Labels"]
        assert labels["org.opencontainers.image.version"] == release.identity
        assert labels["org.opencontainers.image.revision"] == release.commit
        assert image["FromImageDigest"] == release.image_digest()
    finally:
        subprocess.run(["buildah", *storage, "rmi", "--all", "--force"], capture_output=True, timeout=300)
        shutil.rmtree(tmp_path / "root", ignore_errors=True)  # the layers a failed pull left
