"""Mahimahi's unprivileged sender imports only the copy of its modules made for it (runner.endpoint_copy).

A clone in root's mode-700 home is out of nobody's reach; the copy is not, and holds every ccsweep
module the sender imports, so a new import in the sender is never missed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ccsweep.runner.endpoint_copy import copy_sender_modules, sender_modules
from ccsweep.runner.mahimahi_run import NOBODY, unprivileged_interpreter


def test_the_sender_needs_its_module_what_it_imports_and_their_packages_only():
    modules = sender_modules()
    assert {"ccsweep", "ccsweep.runner", "ccsweep.runner.flow", "ccsweep.runner.tcpinfo",
            "ccsweep.exitcodes"} <= modules
    # The runner's own modules (pydantic, the result schema) stay out: the sender must start quickly.
    assert not modules & {"ccsweep.cell", "ccsweep.result", "ccsweep.runner.run", "ccsweep.runner.api"}


@pytest.fixture
def scratch():
    """A cell's scratch folder as MahimahiLink.prepare makes it: in /tmp, mode 711."""
    folder = Path(tempfile.mkdtemp(prefix="ccsweep-mm-test-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder)


def test_the_copy_alone_imports_the_sender(scratch):
    copy = copy_sender_modules(scratch / "endpoints")
    # -S: no site-packages, so the installed ccsweep cannot stand in for a module the copy lacks.
    done = subprocess.run([sys.executable, "-S", "-c", "import ccsweep.runner.flow as f; print(f.__file__)"],
                          env={"PYTHONPATH": str(copy)}, cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(copy)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the sender as nobody (setpriv needs root)")
def test_nobody_runs_the_sender_from_the_copy_whatever_folder_ccsweep_is_in(scratch):
    copy = copy_sender_modules(scratch / "endpoints")
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                           "env", f"PYTHONPATH={copy}", str(unprivileged_interpreter()), "-m", "ccsweep.runner.flow",
                           "--help"], cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "sender" in done.stdout
