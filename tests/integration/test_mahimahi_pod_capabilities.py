"""A `link: mahimahi` cell with no more privilege than its pod gets, on this host.

workflows/templates/ccsweep-cell.yaml's `cell-mahimahi` runs the cell as root with a few added
capabilities and no no_new_privs (allowPrivilegeEscalation: true). Here `ccsweep cell` starts as
root with exactly those capabilities as its bounding set (setpriv), so it, its children and every
setuid-root Mahimahi shell hold those and no others, as in the pod: no CAP_DAC_OVERRIDE, CAP_CHOWN,
CAP_FOWNER or CAP_SYS_PTRACE. The capabilities are read from the template itself. The cluster
test (tests/e2e/test_mahimahi_cell.py) runs the same through Argo.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from support.mahimahi_host import mahimahi_host, mahimahi_missing

REPO = Path(__file__).resolve().parents[2]
MISSING = mahimahi_missing()
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def pod_capabilities() -> list[str]:
    templates = yaml.safe_load((REPO / "workflows/templates/ccsweep-cell.yaml").read_text())["spec"]["templates"]
    security = next(t for t in templates if t["name"] == "cell-mahimahi")["container"]["securityContext"]
    assert security["allowPrivilegeEscalation"] is True and security["capabilities"]["drop"] == ["ALL"]
    return security["capabilities"]["add"]


def as_pod(capabilities: list[str]) -> tuple[str, ...]:
    """Start a command as root holding only `capabilities`, now and after any exec (setuid or not)."""
    return ("setpriv", "--bounding-set=-all," + ",".join(f"+{c.lower()}" for c in capabilities), "--inh-caps=-all")


@pytest.fixture
def nobody_in_a_namespace():
    """A process of nobody's in a network namespace of its own: what the sender is to the runner."""
    name = f"ccs-captest-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", name, *NOBODY, "sleep", "60"])
    try:
        yield sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()
        subprocess.run(["ip", "netns", "delete", name], check=False)


def test_the_runner_names_nobodys_namespace_with_the_pods_capabilities(nobody_in_a_namespace: int):
    """The runner names the Mahimahi sender's namespace to set its buffers there. `ip netns attach`
    needs CAP_SYS_PTRACE for another user's process, which the pod does not hold; the runner's own
    attach (nobody's file-system identity, then the bind mount) needs only what it holds."""
    pid, name = nobody_in_a_namespace, f"ccs-captest-{uuid.uuid4().hex[:6]}"
    caps = as_pod(pod_capabilities())
    refused = subprocess.run([*caps, "ip", "netns", "attach", name, str(pid)], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    assert refused.returncode != 0 and "Permission denied" in refused.stderr, refused
    attach = f"from ccsweep.runner.mahimahi_run import _attach_netns; _attach_netns({name!r}, {pid})"
    done = subprocess.run([*caps, sys.executable, "-c", attach], capture_output=True, text=True)
    try:
        assert done.returncode == 0, done.stderr
        assert os.stat(f"/run/netns/{name}").st_ino == os.stat(f"/proc/{pid}/ns/net").st_ino
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


@pytest.mark.skipif(MISSING is not None, reason=f"Mahimahi is not built ({MISSING})")
def test_a_mahimahi_cell_runs_with_the_pods_capabilities(cells):
    """One short real cell through the nested shells, with the pod's capabilities only."""
    (cell,) = cells.of({"name": "caps", "experiments": [
        {"name": "caps", "cc": ["bbr"], "loss": [0], "rtt_ms": [20], "bandwidth_mbps": [10], "duration_s": 5,
         "warmup_s": 1, "link": "mahimahi"}]})
    with mahimahi_host(("bbr",)):
        run = cells.run(cell, prefix=as_pod(pod_capabilities()))
    assert run.returncode == 0 and run.result is not None, run.describe()
    assert run.result.status == "ok" and run.result.link is not None, run.describe()
    assert run.result.link.backend == "mahimahi", run.result.link
    assert run.result.goodput_mbps is not None and run.result.goodput_mbps > 5, run.describe()  # of 10 Mbit/s
    assert run.result.link.uplink.out_packets > 0
    # Nothing left: namespaces, processes, scratch and log folders (nobody's own is removed by nobody).
    assert not set(run.namespaces) & cells.namespaces()
    assert not cells.processes_mentioning(*run.namespaces)
    assert not list(Path("/tmp").glob(f"ccsweep-mm-{cell.id[:8]}-*"))
