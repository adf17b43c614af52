"""BPF congestion controls on Kubernetes nodes, without a cluster: what the chart's node setup
publishes for cell pods (the held file and its flock), `ccsweep bpf hold`'s refusals, and planning
that sets aside a BPF cell no node offers, saying who registers it.

The holder here is a real second process holding the real lock; registering with the kernel is
tests/e2e/test_bpf_nodes.py's (the node setup on a real cluster).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep import bpfregister
from ccsweep.bpfcc import OBJECTS_ENV, PROGRAMS
from ccsweep.expand import expand
from ccsweep.placement import Node, unplaceable_cells
from ccsweep.spec import SweepSpec

DIGEST = "ab" * 32
#: Holds an exclusive flock on argv[1] until its stdin closes: a node setup, as far as a reader sees.
HOLDER = ("import fcntl, sys\nf = open(sys.argv[1], 'rb')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
          "print('held', flush=True)\nsys.stdin.read()\n")


@pytest.fixture
def held_file(tmp_path: Path) -> Path:
    path = tmp_path / "node" / "bpf-held.json"
    path.parent.mkdir()
    path.write_text(bpfregister.HeldPrograms(programs={"bbr_bpf": DIGEST}).model_dump_json())
    return path


def hold(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_held_file_counts_only_while_its_holder_lives(held_file: Path, monkeypatch: pytest.MonkeyPatch):
    """A cell pod sees no pid of the node setup's; the flock says whether it is alive."""
    monkeypatch.setattr(bpfregister, "kernel_registered", lambda: {"cubic", "bbr_bpf"})
    no_state = held_file.parent / "absent-state.json"
    assert bpfregister.held_digests(held_file) == {}  # written, but no one holds it: left by a dead one
    holder = hold(held_file)
    try:
        assert bpfregister.held_digests(held_file) == {"bbr_bpf": DIGEST}
        assert bpfregister.registered_digests(no_state, held_file) == {"bbr_bpf": DIGEST}
        # What the kernel no longer lists is not registered, whatever the file says.
        monkeypatch.setattr(bpfregister, "kernel_registered", lambda: {"cubic"})
        assert bpfregister.registered_digests(no_state, held_file) == {}
    finally:
        holder.communicate("")
    assert bpfregister.held_digests(held_file) == {}
    assert bpfregister.held_digests(held_file.parent / "none.json") == {}


def test_a_garbled_held_file_of_a_live_holder_is_refused_in_one_line(held_file: Path):
    held_file.write_text('{"programs": {"bbr_bpf": "not a digest"}}')
    holder = hold(held_file)
    try:
        with pytest.raises(bpfregister.BpfUnavailable) as refused:
            bpfregister.held_digests(held_file)
    finally:
        holder.communicate("")
    assert str(refused.value).startswith(f"{held_file}: not a ccsweep held-programs file")
    assert "\n" not in str(refused.value)


def test_a_second_holder_on_the_machine_is_refused_before_registering_anything(held_file: Path, tmp_path: Path):
    holder = hold(held_file)
    try:
        with pytest.raises(bpfregister.BpfUnavailable, match="another ccsweep process holds"):
            with bpfregister.holding(["bbr_bpf"], tmp_path / "state.json", held_file):
                pytest.fail("held twice")
    finally:
        holder.communicate("")
    assert not (tmp_path / "state.json").exists()  # it never reached the state, let alone bpftool


def test_a_local_run_leaves_what_a_node_setup_holds_on_the_same_kernel_saying_so(
        held_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One kernel, two owners' state files: `ccsweep run` neither registers over nor unregisters the
    node setup's bbr_bpf, and says whose it is."""
    for name in PROGRAMS:
        (tmp_path / f"{name}.bpf.o").write_bytes(f"object of {name}".encode())
    monkeypatch.setenv(OBJECTS_ENV, str(tmp_path))
    monkeypatch.setenv(bpfregister.HELD_ENV, str(held_file))
    monkeypatch.setattr(bpfregister, "missing_support", lambda names: None)
    monkeypatch.setattr(bpfregister, "kernel_registered", lambda: {"cubic", "bbr_bpf"})
    holder = hold(held_file)
    try:
        with pytest.raises(bpfregister.BpfUnavailable) as refused:
            with bpfregister.registered(["bbr_bpf"], tmp_path / "state.json"):
                pytest.fail("registered over the node setup's")
    finally:
        holder.communicate("")
    assert str(refused.value).startswith("congestion control bbr_bpf is held on this machine by `ccsweep bpf hold`")
    assert bpfregister.RegistrationState.model_validate_json((tmp_path / "state.json").read_text()).registrations == []


@pytest.mark.parametrize("args, message", [
    ([], "ccsweep: error: NAME: give one or more of aimd_bpf, bbr_bpf, bbr_unpaced"),
    (["bbr_bpf", "/tmp/evil.o"], "ccsweep: error: NAME '/tmp/evil.o': expected one of aimd_bpf, bbr_bpf, bbr_unpaced"),
    (["--", "bbr"], "ccsweep: error: NAME 'bbr': expected one of aimd_bpf, bbr_bpf, bbr_unpaced"),
])
def test_bpf_hold_takes_only_names_ccsweep_ships_in_one_line_exit_2(args: list[str], message: str, tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "ccsweep", "bpf", "hold", *args], capture_output=True, text=True,
                          timeout=60, env={"CCSWEEP_BPF_STATE": str(tmp_path / "state.json"),
                                           "CCSWEEP_BPF_HELD": str(tmp_path / "held.json"), "PATH": "/usr/bin:/bin",
                                           "PYTHONPATH": ":".join(sys.path)})
    assert (done.returncode, done.stderr.strip()) == (2, message)
    assert not (tmp_path / "state.json").exists() and not (tmp_path / "held.json").exists()


def test_a_bpf_cell_runs_only_where_a_node_offers_it_and_else_says_who_registers_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in PROGRAMS:
        (tmp_path / f"{name}.bpf.o").write_bytes(f"object of {name}".encode())
    monkeypatch.setenv(OBJECTS_ENV, str(tmp_path))
    spec = SweepSpec.model_validate({"name": "bpf", "experiments": [{
        "name": "e", "cc": ["bbr_bpf", "cubic"], "loss_percent": [1], "rtt_ms": [20], "bandwidth_mbps": [10],
        "duration_s": 3}]})
    cells = {c.params.flows[0].cc: c for c in expand(spec)}
    kernel = {"ccsweep.io/kernel": "6.18.44", "ccsweep.io/cc-cubic": "true", "ccsweep.io/cc-bbr": "true"}
    plain = Node("node-1", kernel)
    assert unplaceable_cells(cells.values(), [plain]) == {cells["bbr_bpf"].id: (
        "no node offers congestion control bbr_bpf; nodes: node-1 6.18.44 - BPF congestion controls are the "
        "admin's to register: the chart's nodeSetup.enabled=true with bbr_bpf in nodeSetup.bpfAlgorithms")}
    registered = Node("node-2", {**kernel, "ccsweep.io/cc-bbr_bpf": "true"})
    assert unplaceable_cells(cells.values(), [plain, registered]) == {}


def test_the_charts_schema_offers_exactly_the_programs_ccsweep_ships():
    schema = json.loads((Path(__file__).resolve().parents[2] / "charts/ccsweep/values.schema.json").read_text())
    listed = schema["properties"]["nodeSetup"]["properties"]["bpfAlgorithms"]
    assert listed["items"]["enum"] == sorted(PROGRAMS) and listed["uniqueItems"] is True
