"""BPF congestion controls on the embedded default: the local executor registers what a sweep
needs, runs it on ccsweep-link, and unregisters what it registered, whether the run finished, was
stopped with Ctrl-C or SIGTERM, or was killed (then the next start does it). Real registration
with bpftool, real cells; root. Needs `make bpf` and `make emulator`.

Registration is kernel-wide: each test checks the kernel's list ends as it began, and a fixture
unregisters any shipped algorithm a failing test left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccsweep.bpfcc import PROGRAMS, object_digest
from ccsweep.bpfregister import kernel_registered
from ccsweep.store import open_store
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from tinyspec import write_tiny_spec

pytestmark = pytest.mark.integration

SPEC = {"cc": ["bbr_unpaced", "bbr_bpf"], "loss_percent": [1]}


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The environment of a run with its own registration state file; the kernel's list is checked
    to end as it began, and what a failed test left registered is unregistered."""
    for name in PROGRAMS:
        try:
            object_digest(name)
        except FileNotFoundError as exc:
            pytest.skip(str(exc))
    before = kernel_registered()
    assert not before & set(PROGRAMS), "a shipped BPF algorithm is registered already: unregister it first"
    env = {**os.environ, "CCSWEEP_BPF_STATE": str(tmp_path / "bpf-state.json")}
    yield env
    after = kernel_registered()
    for name in after & set(PROGRAMS):
        subprocess.run(["bpftool", "struct_ops", "unregister", "name", name], capture_output=True, timeout=60)
    assert after == before, "the run left the kernel's algorithms changed"


def start(env: dict[str, str], spec: Path, store: Path, sigint: bool = True) -> subprocess.Popen[str]:
    # As from an interactive shell (SIGINT not ignored), in its own group so Ctrl-C can reach it all.
    handler = signal.SIG_DFL if sigint else signal.SIG_IGN
    return subprocess.Popen([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store),
                             "--no-figures", *BOOKKEEPING_THRESHOLD,
                             "--jobs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, handler))


def wait_registered(proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    """Until the run has registered both algorithms and its first cell is mid-flow."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not {"bbr_unpaced", "bbr_bpf"} <= kernel_registered():
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.2)
    assert {"bbr_unpaced", "bbr_bpf"} <= kernel_registered(), "the run should register both before its first cell"
    time.sleep(3)


def test_a_sweep_of_bbr_unpaced_and_bbr_bpf_runs_on_ccsweep_link_and_unregisters_both(machine, tmp_path: Path):
    spec = write_tiny_spec(tmp_path / "bpf.yaml", "bpf", **SPEC)
    store_dir = tmp_path / "store"
    done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir),
                           "--no-figures", *BOOKKEEPING_THRESHOLD],
                          capture_output=True, text=True, env=machine, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "registered BPF congestion control(s) bbr_unpaced, bbr_bpf for this run" in done.stderr
    assert not set(PROGRAMS) & kernel_registered()
    store = open_store(str(store_dir))
    results = [store.get_result(path.parent.name) for path in store_dir.rglob("result.json")]
    assert sorted(r.cell.params.flows[0].cc for r in results) == ["bbr_bpf", "bbr_unpaced"]
    for result in results:
        (program,) = result.cell.params.bpf_programs
        assert result.status == "ok" and 0 < (result.goodput_mbps or 0) <= 10.5
        assert result.environment.bpf_programs == [program] and program.sha256 == object_digest(program.name)
        assert result.not_measured == ["bbr_info"]
        assert program.name in result.environment.available_cc
    assert json.loads((tmp_path / "bpf-state.json").read_text()) == {"registrations": []}


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_run_unregisters_what_it_registered(machine, tmp_path: Path, stop: signal.Signals):
    spec = write_tiny_spec(tmp_path / "stop.yaml", "stop", **SPEC, duration_s=20)
    proc = start(machine, spec, tmp_path / "store", sigint=stop == signal.SIGINT)
    wait_registered(proc)
    if stop == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole group
    else:
        proc.terminate()  # `kill PID`: the executor alone
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert not set(PROGRAMS) & kernel_registered(), err


def test_a_killed_runs_registrations_are_unregistered_by_the_next_start(machine, tmp_path: Path):
    spec = write_tiny_spec(tmp_path / "killed.yaml", "killed", **SPEC, duration_s=20)
    proc = start(machine, spec, tmp_path / "store")
    wait_registered(proc)
    os.killpg(proc.pid, signal.SIGKILL)  # no finally runs: the registrations stay, with a dead owner
    proc.communicate(timeout=60)
    assert {"bbr_unpaced", "bbr_bpf"} <= kernel_registered()
    short = write_tiny_spec(tmp_path / "next.yaml", "next", cc=["aimd_bpf"], loss_percent=[0])
    done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(short), "--store", str(tmp_path / "store"),
                           "--no-figures", *BOOKKEEPING_THRESHOLD],
                          capture_output=True, text=True, env=machine, timeout=300)
    assert done.returncode == 0, done.stderr
    for name in ("bbr_unpaced", "bbr_bpf"):
        assert f"unregistered BPF congestion control {name}, left registered by a ccsweep run that died" in done.stderr
    assert not set(PROGRAMS) & kernel_registered()
    (aimd,) = [r for r in map(json.loads, map(Path.read_text, (tmp_path / "store").rglob("result.json")))
               if r["cell"]["params"]["flows"][0]["cc"] == "aimd_bpf"]
    assert aimd["status"] == "ok" and aimd["environment"]["bpf_programs"][0]["sha256"] == object_digest("aimd_bpf")


def test_an_algorithm_registered_before_the_run_is_neither_used_nor_unregistered(machine, tmp_path: Path):
    obj = PROGRAMS["bbr_unpaced"].object_path()
    subprocess.run(["bpftool", "struct_ops", "register", str(obj)], check=True, capture_output=True, timeout=60)
    try:
        spec = write_tiny_spec(tmp_path / "found.yaml", "found", **SPEC)
        done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(tmp_path / "store"),
                               "--no-figures", *BOOKKEEPING_THRESHOLD],
                              capture_output=True, text=True, env=machine, timeout=300)
        assert "congestion control bbr_unpaced is already registered on this machine, not by ccsweep" in done.stderr
        assert "bbr_unpaced" in kernel_registered(), "a registration the run did not make must stay"
        assert "bbr_bpf" not in kernel_registered()
        assert not list((tmp_path / "store").rglob("result.json")), "no cell runs an algorithm of unknown code"
    finally:
        subprocess.run(["bpftool", "struct_ops", "unregister", "name", "bbr_unpaced"], capture_output=True,
                       timeout=60)
