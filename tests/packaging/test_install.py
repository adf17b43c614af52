"""`pip install` of the built wheel into a fresh venv, used from a folder outside the clone.

The wheel is built from a fresh `git clone` of this repository's committed HEAD, in a folder with
nothing beside it (as a new user's clone), with its build backend from PyPI. It is installed with
--no-deps into a new venv, and the dependencies come from the project's .venv through a .pth
file: that keeps the test fast and offline after the build, while ccsweep itself is only the
wheel's (the .venv's editable ccsweep is not on that path). Then, from an empty folder: the
presets, every one of them valid (cellular and full-sweep need the packaged traces; rebbr-pacing
the BPF objects, which are built on the machine and named by CCSWEEP_BPF_DIR outside a clone), the
emulator found through CCSWEEP_LINK or PATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.packaging


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a fresh venv holding only the wheel's ccsweep."""
    root = tmp_path_factory.mktemp("install")
    source = root / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(source)], check=True, timeout=300)
    assert not (root / "shared").exists()
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"),
                            str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    (wheel,) = (root / "dist").glob("ccsweep-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin/python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (site / "ccsweep-test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv / "bin"


def run(bin_dir: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CCSWEEP_")}
    clean["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    return subprocess.run([*args], cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=300)


def test_installed_ccsweep_is_the_wheels(installed: Path, tmp_path: Path):
    done = run(installed, str(installed / "python"), "-c", "import ccsweep, ccsweep_operator; print(ccsweep.__file__)",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(installed.parent)), done.stdout


def test_presets_are_found_and_valid_outside_the_clone(installed: Path, tmp_path: Path):
    done = run(installed, "ccsweep", "presets", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    presets = sorted(p.stem for p in (installed.parents[1] / "clone/sweeps").glob("*.yaml"))
    assert presets
    for name in presets:
        assert name in done.stdout, done.stdout
    assert str(REPO) not in done.stdout  # the wheel's own copies, not the clone's
    for name in presets:
        checked = run(installed, "ccsweep", "validate", name, cwd=tmp_path, CCSWEEP_BPF_DIR=str(REPO / "bin/bpf"))
        assert checked.returncode == 0, f"{name}: {checked.stderr}"
    # Without them a preset naming a BPF algorithm cannot pin its cells: one line says how to build them.
    bare = run(installed, "ccsweep", "validate", "rebbr-pacing", cwd=tmp_path)
    assert bare.returncode == 2 and len(bare.stderr.strip().splitlines()) == 1, bare.stderr
    assert "make bpf" in bare.stderr and "CCSWEEP_BPF_DIR" in bare.stderr, bare.stderr


def test_emulator_found_through_ccsweep_link_or_path(installed: Path, tmp_path: Path):
    find = "from ccsweep.runner.link import find_link_binary as f; print(f())"
    fake = tmp_path / "tools/ccsweep-link"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    by_env = run(installed, str(installed / "python"), "-c", find, cwd=tmp_path, CCSWEEP_LINK=str(fake))
    assert by_env.stdout.strip() == str(fake), by_env.stderr
    by_path = run(installed, str(installed / "python"), "-c", find, cwd=tmp_path,
                  PATH=f"{installed}:{fake.parent}:/usr/bin:/bin")
    assert by_path.stdout.strip() == str(fake), by_path.stderr
    missing = run(installed, str(installed / "python"), "-c", find, cwd=tmp_path)
    assert "ccsweep-link not found" in missing.stderr and "CCSWEEP_LINK" in missing.stderr


def test_published_numbers_ship_in_the_wheel_with_their_license(installed: Path, tmp_path: Path):
    """ReBBR's CSVs load from the wheel (each checked against its pinned hash), beside its LICENSE."""
    code = ("from ccsweep.results.published_sets import DATA, SETS, load; "
            f"print(sum(len(load(s)) for s in SETS.values()), str(DATA).startswith({str(installed.parent)!r}), "
            "(DATA / 'LICENSE').read_text().splitlines()[0])")
    done = run(installed, str(installed / "python"), "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(None, 2) == ["390", "True", "BSD 2-Clause License\n"], done.stdout
