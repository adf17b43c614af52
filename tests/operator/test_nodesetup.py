"""The node-setup step: which algorithms it allows, and that it refuses a module name before modprobe.

Loading modules needs a privileged pod on a node with /lib/modules; this machine's kernel has
neither modules nor a way to load them, so only the decisions and the refusal run here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ccsweep_operator.nodesetup import allowed_after


def test_loaded_algorithms_are_appended_to_the_allowed_list_once():
    assert allowed_after(["reno", "bbr"], ["reno", "bbr", "cubic", "vegas"], ["tcp_bbr", "tcp_vegas", "tcp_cubic"]) \
        == ["reno", "bbr", "vegas", "cubic"]


def test_an_algorithm_the_kernel_still_lacks_is_not_allowed():
    assert allowed_after(["reno"], ["reno", "cubic"], ["tcp_westwood"]) == ["reno"]


@pytest.mark.parametrize("module", ["bbr", "tcp_bbr;reboot", "-r", "tcp_BBR", "../tcp_bbr"])
def test_a_bad_module_name_is_refused_with_exit_2(module: str):
    done = subprocess.run([sys.executable, "-m", "ccsweep_operator.nodesetup", "--", "tcp_cubic", module],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(f"module {module!r}: expected tcp_ and 1-32 of a-z, 0-9, _ "
                                                          "(e.g. tcp_bbr)")
    assert "loaded" not in done.stdout  # nothing was tried
