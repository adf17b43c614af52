"""A fresh `git clone` in an empty folder plans `make test` and builds Mahimahi from its own files.

The clone is of this repository's committed HEAD, into a folder with nothing beside it, as a new
user's. `make -n test` shows what `make test` would run (the Makefile, versions.env and every target
it needs resolve inside the clone), and hack/tools/mahimahi.sh, the step that used to need a tarball
beside the clone, builds Mahimahi from the clone's third_party/mahimahi/ with no MAHIMAHI_TARBALL
set. The build is installed into a prefix named after the tarball's SHA-256 in the tools cache, so
the script's own cache check (a complete prefix is kept) makes later runs instant while a different
tarball builds again; the default prefix that `make tools` fills is not used, so this test builds
at least once from the clone's file (cold 2-4 min on 2 cores).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from support.versions import read_versions

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("mm-delay", "mm-loss", "mm-link")

pytestmark = [pytest.mark.tools, pytest.mark.root]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    empty = tmp_path_factory.mktemp("fresh")
    target = empty / "ccsweep"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(target)], check=True, timeout=300)
    assert [p.name for p in empty.iterdir()] == ["ccsweep"]
    return target


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the variables that point a build elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAHIMAHI_", "CCSWEEP_BIN", "MAKE"))}
    return {**env, **extra}


def test_make_n_test_resolves_inside_the_clone(clone: Path):
    done = subprocess.run(["make", "-n", "test"], cwd=clone, env=clean_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    steps = ("hack/deps.sh", "hack/tools/kubernetes.sh", "hack/tools/mahimahi.sh", "pytest -q --durations=25 tests")
    for step in steps:
        assert step in done.stdout, done.stdout
    assert "shared" not in done.stdout + done.stderr


def test_mahimahi_builds_from_the_clones_vendored_tarball(clone: Path):
    commit = read_versions()["MAHIMAHI_COMMIT"]
    tarball = clone / f"third_party/mahimahi/mahimahi-{commit}.tar.gz"
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    cache = Path(os.environ.get("CCSWEEP_CACHE", Path.home() / ".cache/ccsweep"))
    prefix = cache / "tools/clone-check" / f"mahimahi-{commit}-{digest[:16]}"
    done = subprocess.run(["nice", "-n", "15", "hack/tools/mahimahi.sh"], cwd=clone,
                          env=clean_env(MAHIMAHI_PREFIX=str(prefix), CCSWEEP_CACHE=str(cache)),
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    if f"cached: {prefix}" not in done.stderr:  # this run built it: from the clone's own file
        assert f"building {tarball}" in done.stderr, done.stderr[-4000:]
    for name in BINARIES:
        binary = prefix / "bin" / name
        assert binary.read_bytes()[:4] == b"\x7fELF", binary
        assert binary.stat().st_mode & stat.S_ISUID, f"{binary} is not setuid"
        assert (clone / "bin" / name).resolve() == binary.resolve()
