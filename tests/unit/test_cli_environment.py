"""--store and --pushgateway also come from CCSWEEP_STORE and CCSWEEP_PUSHGATEWAY, set once for a shell
or a cluster; an option given on the command line still wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def ccsweep(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("CCSWEEP_STORE", "CCSWEEP_PUSHGATEWAY")}
    return subprocess.run([sys.executable, "-m", "ccsweep", *args], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def test_store_comes_from_the_environment_unless_given(tmp_path: Path):
    done = ccsweep("plan", "quick", cwd=tmp_path, CCSWEEP_STORE=f"file://{tmp_path}/from-env")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-env/sweeps/quick/manifest.json").is_file()
    done = ccsweep("plan", "quick", "--store", str(tmp_path / "given"), cwd=tmp_path,
                   CCSWEEP_STORE=f"file://{tmp_path}/from-env-2")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "given/sweeps/quick/manifest.json").is_file() and not (tmp_path / "from-env-2").exists()


def test_pushgateway_comes_from_the_environment(tmp_path: Path):
    # Port 9 on loopback: nothing listens, so the push fails and the warning names the address used.
    done = ccsweep("plan", "quick", "--store", str(tmp_path / "s"), cwd=tmp_path, CCSWEEP_PUSHGATEWAY="127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert "cannot push metrics to 127.0.0.1:9" in done.stderr
    quiet = ccsweep("plan", "quick", "--store", str(tmp_path / "s"), cwd=tmp_path)
    assert "push" not in quiet.stderr


def test_help_names_the_variables(tmp_path: Path):
    shown = ccsweep("run", "--help", cwd=tmp_path).stdout
    assert "env var: CCSWEEP_STORE" in shown and "CCSWEEP_PUSHGATEWAY" in shown
