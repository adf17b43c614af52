"""images/cell/Dockerfile, built with buildah as a user builds it (images/build.sh), and what is in it.

The build is the real one: Debian's packages, PyPI and crates.io in its RUN steps, Mahimahi from
the pinned commit's unmodified upstream tarball, the base images from a local root file system
where no registry is reachable (--local-base). Minutes the first time; buildah's layer cache makes
a rebuild of unchanged sources quick. The container runs with buildah's chroot isolation; running
a cell from the image on the test cluster is the e2e's part.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccsweep.buildinfo import build_identity
from support.versions import read_versions

REPO = Path(__file__).resolve().parents[2]
MAHIMAHI_COMMIT = read_versions()["MAHIMAHI_COMMIT"]

pytestmark = pytest.mark.image


def buildah(*args: str, timeout: float = 300) -> str:
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The image's name and its OCI archive."""
    archive = tmp_path_factory.mktemp("image") / "cell.oci"
    done = subprocess.run([str(REPO / "images/build.sh"), "--local-base", "--archive", str(archive)],
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip().splitlines()[-1], archive


@pytest.fixture(scope="module")
def container(built: tuple[str, Path]) -> Iterator[str]:
    name = buildah("from", "--pull=never", built[0]).strip()
    yield name
    buildah("rm", name)


def run(container: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", *argv],
                          capture_output=True, text=True, timeout=300)


def test_image_is_named_for_the_chart(built: tuple[str, Path]):
    # The build identity (VERSION-gCOMMIT), as the chart's appVersion names it: a rebuilt image is a new tag.
    assert built[0] == f"localhost/ccsweep/cell:{build_identity()}"
    with tarfile.open(built[1]) as archive:
        index = json.loads(archive.extractfile("index.json").read())
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == built[0]


def test_the_package_in_the_image_is_the_build_it_is_tagged_as(built: tuple[str, Path], container: str):
    # The package is a layer of its own over the dependencies' (images/cell/Dockerfile): a cached layer
    # from an earlier commit would carry that commit, and every result the cell stores would name it.
    shown = run(container, "ccsweep", "--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"ccsweep {built[0].rsplit(':', 1)[1]}"


def test_ccsweep_in_the_image_finds_its_presets_and_traces(container: str):
    done = run(container, "ccsweep", "validate", "cellular")
    assert done.returncode == 0, done.stderr
    versions = run(container, "python3", "-c",
                   "import kopf, ccsweep_operator.nodesetup, numpy; print(numpy.__version__)")
    assert versions.returncode == 0, versions.stderr
    pinned = dict(line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines()
                  if "==" in line and not line.startswith("#"))
    assert versions.stdout.strip() == pinned["numpy"]  # installed with -c constraints.txt


def test_emulator_mahimahi_and_modprobe_are_there(container: str):
    assert run(container, "ccsweep-link", "--help").returncode == 0
    shells = run(container, "stat", "-c", "%U %A %n", "/opt/ccsweep/mahimahi/bin/mm-link",
                 "/opt/ccsweep/mahimahi/bin/mm-delay", "/opt/ccsweep/mahimahi/bin/mm-loss")
    assert shells.returncode == 0, shells.stderr
    for line in shells.stdout.splitlines():
        owner, mode, _ = line.split()
        assert owner == "root" and mode[3] == "s", line  # setuid root: they refuse to run as root
    target = run(container, "readlink", "/opt/ccsweep/mahimahi")
    assert target.stdout.strip() == f"mahimahi-{MAHIMAHI_COMMIT}"
    assert run(container, "modprobe", "--version").returncode == 0  # the chart's node setup


def test_node_setup_reports_a_module_the_kernel_lacks_in_one_line(container: str):
    """The node setup's modprobe call, for real: a module that cannot load is a one-line report, not a crash."""
    done = run(container, "python3", "-c",
               "from ccsweep_operator.nodesetup import load; print(load('tcp_no_such_algorithm'))")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert "tcp_no_such_algorithm" in line and line != "None", line


def test_the_image_carries_the_bpf_congestion_controls_it_built_and_bpftool(container: str):
    """Built in the image from bpf/cc/ (its `make bpf` stage), never fetched: the node setup registers
    these with the image's bpftool, and planning in the image pins cells to these very files."""
    names = ("aimd_bpf", "bbr_bpf", "bbr_unpaced")
    listed = run(container, "sha256sum", *(f"/opt/ccsweep/bpf/{name}.bpf.o" for name in names))
    assert listed.returncode == 0, listed.stderr
    on_disk = {Path(path).name.removesuffix(".bpf.o"): digest
               for digest, path in (line.split() for line in listed.stdout.splitlines())}
    pinned = run(container, "python3", "-c", "import json; from ccsweep.bpfcc import PROGRAMS, object_digest; "
                 "print(json.dumps({n: object_digest(n) for n in PROGRAMS}))")
    assert pinned.returncode == 0, pinned.stderr
    assert json.loads(pinned.stdout) == on_disk and sorted(on_disk) == list(names)
    assert run(container, "bpftool", "version").returncode == 0  # the chart's node setup registers with it
