"""Mahimahi's timing from its processes' run-queue delay: the windows' quantiles and a real reading."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ccsweep.runner.runqueue import RunQueueDelay, RunQueueSummary, carries_packets, summarise, tasks_of

MS = 1_000_000


def test_a_long_window_counts_for_all_the_time_it_spans():
    # 990 quick 10 ms windows, then one of 500 ms (the sampler itself was kept waiting) at 40 ms a wake-up.
    windows = [(i * 10 * MS, 10 * MS, 5_000.0) for i in range(1, 991)] + [(10_400 * MS, 500 * MS, 40 * MS)]
    summary = summarise(windows, 0, 20_000 * MS)
    assert summary is not None and summary.windows == 991
    assert (summary.p50_us, summary.p99_us, summary.max_us) == (5.0, 40_000.0, 40_000.0)


def test_windows_outside_the_flow_time_are_left_out_and_none_is_unmeasured():
    windows = [(5 * MS, 10 * MS, 9 * MS), (15 * MS, 10 * MS, 1_000.0)]
    summary = summarise(windows, 10 * MS, 20 * MS)
    assert summary is not None and summary.max_us == 1.0
    assert summarise(windows, 100 * MS, 200 * MS) is None


@pytest.mark.root
def test_a_process_kept_off_its_core_by_a_real_time_loop_shows_the_wait():
    """Real schedstat: a 1 ms sleeper sharing one core with a higher SCHED_FIFO busy loop for 0.5 s waits for it."""
    core = max(os.sched_getaffinity(0))
    sleeper = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end:\n    time.sleep(0.001)\n"
    busy = "import time\nend = time.monotonic() + 0.5\nwhile time.monotonic() < end:\n    pass\n"

    def run(*hog: str) -> RunQueueSummary:
        # The sleeper at SCHED_FIFO 1: a busy machine's other work does not make it wait, the hog at 50 does.
        proc = subprocess.Popen(["chrt", "-f", "1", "taskset", "-c", str(core), sys.executable, "-c", sleeper])
        sampler = RunQueueDelay(proc.pid, ("python",))
        start = time.monotonic_ns()
        time.sleep(0.3)
        if hog:
            subprocess.run(["timeout", "-s", "KILL", "5", *hog, "taskset", "-c", str(core), sys.executable, "-c", busy],
                           check=True, timeout=10)
        proc.wait(10)
        sampler.stop()
        summary = sampler.summary(start, time.monotonic_ns())
        assert summary is not None
        return summary

    alone, starved = run(), run("chrt", "-f", "50")
    # Starved, it waits tens of ms a wake-up for 0.5 s of its 1.5 s: far above any lateness threshold (1 ms at
    # most), and far above what the same process shows unstarved.
    assert starved.p99_us > 10_000 and starved.p99_us > 10 * alone.p99_us, (alone, starved)


def test_a_log_writer_thread_is_left_out_and_the_packet_thread_kept():
    """A real process with a thread named as ccsweep-link names its log writers: the sampler reads
    the main thread, not that one (its wait delays no packet)."""
    code = ("import ctypes, threading, time\n"
            "def named():\n"
            "    ctypes.CDLL(None).prctl(15, b'log-uplink', 0, 0, 0)\n"
            "    time.sleep(30)\n"
            "threading.Thread(target=named, daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 5
        while len(tasks_of(child.pid)) < 2 or not any(
                (t / "comm").read_text().startswith("log-") for t in tasks_of(child.pid)):
            assert time.monotonic() < deadline, "the thread never took its name"
            time.sleep(0.05)
        kept = [t for t in tasks_of(child.pid) if carries_packets(t)]
        assert [t.name for t in kept] == [str(child.pid)]
    finally:
        child.kill()
        child.wait(timeout=10)
