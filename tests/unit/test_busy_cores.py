"""The machine's busy cores, which admission reads in place of its model for settled cells (runner.hostcpu.BusyCores).

The stat files below are shaped as the kernel writes /proc/stat (proc(5): user nice system idle
iowait irq softirq steal guest guest_nice); only the sum line's columns count, and the `cpuN`
lines only in number.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ccsweep.runner.hostcpu import BusyCores, busy_and_total_ticks


def stat(user: int, idle: int, iowait: int = 0, steal: int = 0, cpus: int = 2) -> str:
    lines = [f"cpu  {user} 0 0 {idle} {iowait} 0 0 {steal} 0 0"]
    lines += [f"cpu{i} 1 0 0 1 0 0 0 0 0 0" for i in range(cpus)]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 4"]) + "\n"


def test_idle_and_iowait_are_not_busy_and_steal_is():
    assert busy_and_total_ticks(stat(user=30, idle=50, iowait=10, steal=10)) == (40, 100, 2)


def test_busy_cores_over_the_window(tmp_path: Path):
    path = tmp_path / "stat"
    busy = BusyCores(window_s=3.0, stat=path)
    path.write_text(stat(user=0, idle=0))
    assert busy.read(0.0) is None, "one sample spans nothing"
    # Two CPUs, 200 ticks a second: one second later, 150 busy and 50 idle ticks are 1.5 cores.
    path.write_text(stat(user=150, idle=50))
    assert busy.read(1.0) is None, "less than half the window"
    path.write_text(stat(user=300, idle=100))
    assert busy.read(2.0) == pytest.approx(1.5)
    # The window slides: at t=4 it starts at t=1 (190 of 600 ticks busy since), at t=5 at t=2 (60
    # of 600): the busy first second leaves the reading.
    path.write_text(stat(user=340, idle=460))
    assert busy.read(4.0) == pytest.approx(2 * 190 / 600)
    path.write_text(stat(user=360, idle=640))
    assert busy.read(5.0) == pytest.approx(2 * 60 / 600)


def test_an_unreadable_stat_measures_nothing(tmp_path: Path):
    assert BusyCores(stat=tmp_path / "absent").read(0.0) is None


def test_this_machines_proc_stat_reads_within_its_cores():
    busy = BusyCores(window_s=0.2)
    busy.read(0.0)
    time.sleep(0.25)
    reading = busy.read(0.25)
    assert reading is not None and 0.0 <= reading <= (os.cpu_count() or 1) + 0.01
