"""A cell always cleans up: an unavailable algorithm fails fast, a dying endpoint fails the cell,
SIGTERM (a pod deleted, an executor stopping, or `kill -- -PGID` on its whole process group)
interrupts it; none leaves a namespace or a process.

Cells here are light (10 Mbit/s, 20 ms RTT, 6 s) and run side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ccsweep.runner.netns import namespace_names
from ccsweep.store import open_store
from support.mahimahi_host import mahimahi_host, mahimahi_missing

MAHIMAHI_MISSING = mahimahi_missing()


def light(cc: str = "bbr", loss: float = 0.0, seed: int = 1) -> dict:
    return {"name": "lifecycle", "experiments": [{
        "name": "lifecycle", "cc": [cc], "loss_percent": [loss], "rtt_ms": [20], "bandwidth_mbps": [10],
        "duration_s": 6, "warmup_s": 1, "seed": seed}]}


def wait_for_process(cells, word: str, timeout: float = 30) -> int:
    """PID of the process whose command line names `word` (a cell's namespace), once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [line for line in cells.processes_mentioning(word) if "ccsweep.runner.flow" in line]
        if found:
            return int(found[0].split(":")[0])
        time.sleep(0.1)
    pytest.fail(f"no flow process for {word} within {timeout} s")


def assert_clean(cells, names: tuple[str, ...]) -> None:
    assert not set(names) & cells.namespaces(), f"namespaces left: {set(names) & cells.namespaces()}"
    assert not cells.processes_mentioning(*names)


def test_an_unavailable_algorithm_fails_fast_with_exit_3(cells):
    (cell,) = cells.of(light(cc="vegas"))
    started = time.monotonic()
    run = cells.run(cell, timeout=60)
    elapsed = time.monotonic() - started
    assert run.returncode == 3, run.describe()
    assert run.report["status"] == "unavailable"
    assert "'vegas'" in run.report["error"] and "bbr" in run.report["error"], run.report
    assert elapsed < 10, f"took {elapsed:.1f} s: the check must come before any setup"
    assert run.result is None
    assert_clean(cells, run.namespaces)


def test_a_dying_receiver_fails_the_cell_and_everything_is_removed(cells):
    (cell,) = cells.of(light(seed=2))
    process = cells.start(cell)
    names = namespace_names(cell.id, process.pid)
    receiver = wait_for_process(cells, names.receiver)
    time.sleep(1.5)  # mid-flow
    os.kill(receiver, signal.SIGKILL)  # a process this test's cell started; a real crash, not a mock
    run = cells.finish(cell, process)
    assert run.returncode == 1, run.describe()
    assert run.report["status"] == "failed"
    error = run.report["error"]
    assert error.startswith("receiver was killed by signal 9 without 'done'"), run.report
    assert "\n" not in error and "(waits: ccsweep-link ready " in error and "receiver ready" in error, error
    assert run.result is None  # not marked done: a re-run will run it
    store = open_store(str(cells.store))
    (failed,) = store.list_keys(f"cells/{cell.id}/failed/")
    record = json.loads(store.read_bytes(failed))
    assert record["status"] == "failed" and record["error"] == error
    # What it measured before the receiver died is kept: the sender's samples, the link's logs.
    assert record["flows"] and record["flows"][0]["rtt_mean_ms"] is not None, record["flows"]
    assert record["link"]["uplink"]["out_packets"] > 0, record["link"]
    assert set(record["artifacts"]) == {"timeseries.json.gz", "uplink.log.gz", "downlink.log.gz"}
    files = store.attempt_files(failed)
    assert len(files["uplink.log.gz"]) > 100 and len(files["timeseries.json.gz"]) > 100
    assert_clean(cells, (names.sender, names.receiver))


def test_sigterm_interrupts_the_cell_cleanly(cells):
    (cell,) = cells.of(light(seed=3))
    process = cells.start(cell)
    names = namespace_names(cell.id, process.pid)
    wait_for_process(cells, names.sender)
    time.sleep(1.5)
    process.send_signal(signal.SIGTERM)
    run = cells.finish(cell, process)
    assert run.returncode == 130, run.describe()
    assert run.report["status"] == "interrupted"
    assert run.result is None
    assert_clean(cells, (names.sender, names.receiver))


#: An `ip` first on PATH: the real one, with the window a signal must not split held open for a
#: second and announced by a file: after `netns add` made a receiver namespace (before the runner
#: has it listed), and before `netns delete` removes a sender namespace.
SLOW_IP = """#!/bin/sh
case "$1 $2 $3" in
  "netns add "*-r) "{ip}" "$@"; done=$?; : > "{marks}/added"; sleep 1; exit $done ;;
  "netns delete "*-s) : > "{marks}/deleting"; sleep 1; exec "{ip}" "$@" ;;
esac
exec "{ip}" "$@"
"""


def start_in_own_group(cells, cell, folder: Path) -> subprocess.Popen[str]:
    """`ccsweep cell` as the leader of its own process group, finding SLOW_IP's `ip` first."""
    real_ip = shutil.which("ip")
    assert real_ip is not None
    bin_dir, marks = folder / "bin", folder / "marks"
    bin_dir.mkdir(parents=True)
    marks.mkdir()
    (bin_dir / "ip").write_text(SLOW_IP.format(ip=real_ip, marks=marks))
    (bin_dir / "ip").chmod(0o755)
    workdir = cells.scratch / cell.id
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen([sys.executable, "-m", "ccsweep", "cell", "--cell", cell.model_dump_json(), "--store",
                             str(cells.store), "--workdir", str(workdir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def wait_for_file(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout} s"
        time.sleep(0.01)


def test_sigterm_to_the_cells_group_while_a_namespace_is_made_leaves_none(cells, tmp_path: Path):
    """The group's SIGTERM reaches `ip netns add` and the runner at once, after the add made the
    namespace and before the runner listed it: that namespace was left behind (seen with
    `kill -- -PGID`). The slowed `ip` holds the window open so the signal lands in it every run."""
    (cell,) = cells.of(light(seed=6))
    process = start_in_own_group(cells, cell, tmp_path)
    names = namespace_names(cell.id, process.pid)
    wait_for_file(tmp_path / "marks" / "added")
    assert names.receiver in cells.namespaces()
    os.killpg(process.pid, signal.SIGTERM)  # the group this test started
    run = cells.finish(cell, process)
    assert run.returncode == 130 and run.report["status"] == "interrupted", run.describe()
    assert_clean(cells, (names.sender, names.receiver))


def test_sigterm_to_the_cells_group_while_its_namespaces_are_deleted_leaves_none(cells, tmp_path: Path):
    """A cell interrupted mid-flow deletes its namespaces; the group's SIGTERM then (a second
    signal, as when a terminal's Ctrl-C and the executor both send one) used to kill the `ip netns
    delete` under way, leaving that namespace."""
    (cell,) = cells.of(light(seed=7))
    process = start_in_own_group(cells, cell, tmp_path)
    names = namespace_names(cell.id, process.pid)
    wait_for_process(cells, names.sender)
    process.send_signal(signal.SIGTERM)  # the runner alone: it stops the cell and deletes the namespaces
    wait_for_file(tmp_path / "marks" / "deleting")
    os.killpg(process.pid, signal.SIGTERM)
    run = cells.finish(cell, process)
    assert run.returncode == 130 and run.report["status"] == "interrupted", run.describe()
    assert_clean(cells, (names.sender, names.receiver))


def test_cells_side_by_side_do_not_disturb_each_other(cells):
    """Two 10 Mbit/s cells at once, each in its own namespaces: each gets its own link's goodput."""
    a, b = cells.of(light(seed=4)) + cells.of(light(cc="cubic", seed=4))
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(cells.run, [a, b]))
    for run in runs:
        assert run.returncode == 0, run.describe()
        # 10 Mbit/s of IP packets carry at most 9.65 Mbit/s of data; 8 leaves room for a busy machine.
        assert 8.0 <= run.result.goodput_steady_mbps <= 9.7, run.describe()
        assert_clean(cells, run.namespaces)


@pytest.mark.skipif(MAHIMAHI_MISSING is not None, reason=f"Mahimahi is not built ({MAHIMAHI_MISSING})")
def test_a_failed_mahimahi_attempt_keeps_its_flows_and_link_logs(cells):
    """The same rule and the same record on the other link: a dying receiver, the logs Mahimahi wrote kept."""
    spec = light(seed=5)
    spec["experiments"][0]["link"] = "mahimahi"
    (cell,) = cells.of(spec)
    with mahimahi_host(("bbr",)):
        process = cells.start(cell)
        names = namespace_names(cell.id, process.pid)
        receiver = wait_for_process(cells, f"--label {names.sender}")  # Mahimahi's outside: the sender namespace
        time.sleep(2.5)  # mid-flow
        os.kill(receiver, signal.SIGKILL)  # a process this test's cell started
        run = cells.finish(cell, process)
    assert run.returncode == 1, run.describe()
    assert run.report["error"].startswith("receiver was killed by signal 9 without 'done'"), run.report
    store = open_store(str(cells.store))
    (failed,) = store.list_keys(f"cells/{cell.id}/failed/")
    record = json.loads(store.read_bytes(failed))
    assert record["flows"] and record["flows"][0]["rtt_mean_ms"] is not None, record["flows"]
    assert set(record["artifacts"]) == {"timeseries.json.gz", "uplink.log.gz", "downlink.log.gz"}
    assert len(store.attempt_files(failed)["uplink.log.gz"]) > 100
    assert_clean(cells, (names.sender, names.receiver))
