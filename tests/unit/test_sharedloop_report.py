"""The shared-loop result's README is made from its CSVs, the decision with it: regenerating it gives
the committed text, and the decision follows the rule on made-up runs."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from benchmarks.sharedloop.report import main, readme, verdict


def write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def made_up(folder: Path, shared_cpu: float, shared_p99: float, shared_heavy_mbps: float = 90.0,
            shared_endpoints: float = 0.2) -> Path:
    """Three pairs of runs of 4 links (one heavy): processes at 0.05 cores per link, p99 400 us, the
    endpoints at 0.2 cores."""
    runs, links, machine = [], [], []
    for rep in (1, 2, 3):
        for arm, cpu, p99, heavy, ends in (("processes", 0.05, 400.0, 90.0, 0.2),
                                           ("shared", shared_cpu, shared_p99, shared_heavy_mbps, shared_endpoints)):
            runs.append({"rep": rep, "links": 4, "arm": arm, "started": 0.0, "steady_s": 19.0,
                         "emulator_cpu_cores": 4 * cpu, "endpoints_cpu_cores": ends,
                         "machine_busy_cores": 0.5 + 4 * cpu, "load1": 1.0,
                         "timed_wakeups_per_s": 3000.0, "sched": "fifo:10"})
            for link in range(4):
                links.append({"rep": rep, "links": 4, "arm": arm, "link": link,
                              "kind": "heavy" if link == 0 else "light", "lateness_p50_us": 50.0,
                              "lateness_p99_us": p99, "lateness_max_us": 2 * p99, "packets": 1000,
                              "goodput_mbps": heavy if link == 0 else 1.0,
                              "cpu_cores": cpu if arm == "processes" else None})
            machine.append({"run": len(runs), "label": f"{arm} 4", "time": 0.0, "load1": 1.0, "steal_pct": 1.0,
                            "softirq_pct": 2.0})
    write(folder / "runs.csv", runs)
    write(folder / "links.csv", links)
    write(folder / "machine.csv", machine)
    (folder / "command.txt").write_text("python -m benchmarks.sharedloop.bench --links 4 --reps 3 --out X\n"
                                        "machine: 2 CPUs (test), Linux test\n")
    return folder


def decide(folder: Path) -> tuple[bool, list[str]]:
    return verdict(pd.read_csv(folder / "links.csv"), pd.read_csv(folder / "runs.csv"), 4)


def test_cheaper_and_on_time_is_adopted(tmp_path: Path):
    adopt, reasons = decide(made_up(tmp_path, shared_cpu=0.03, shared_p99=420.0))
    assert adopt, reasons
    assert "0.60, 0.60, 0.60" in reasons[0] and "cells per core rise" in reasons[0]
    assert "**4 links: adopt.**" in readme(tmp_path)


def test_late_links_are_not_adopted_however_cheap(tmp_path: Path):
    adopt, reasons = decide(made_up(tmp_path, shared_cpu=0.01, shared_p99=1500.0))
    assert not adopt
    assert "links over 1,000 us: 0 with processes, 12 shared" in reasons[1] and "does not hold" in reasons[1]
    assert "one process per link stays" in readme(tmp_path)


def test_a_loop_that_carries_less_is_not_cheaper_for_it(tmp_path: Path):
    adopt, reasons = decide(made_up(tmp_path, shared_cpu=0.03, shared_p99=420.0, shared_heavy_mbps=60.0))
    assert not adopt
    assert "-33.3%" in reasons[2] and "not the same traffic" in reasons[2]


def test_the_check_catches_a_readme_edited_by_hand(tmp_path: Path):
    made_up(tmp_path, shared_cpu=0.03, shared_p99=420.0)
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path), "--check"]) == 0
    text = (tmp_path / "README.md").read_text()
    (tmp_path / "README.md").write_text(text.replace("**4 links: adopt.**", "**4 links: do not adopt.**"))
    assert main([str(tmp_path), "--check"]) == 1


def test_cost_moved_to_the_endpoints_is_no_saving(tmp_path: Path):
    adopt, reasons = decide(made_up(tmp_path, shared_cpu=0.03, shared_p99=420.0, shared_endpoints=0.3))
    assert not adopt
    assert "0.400 cores with processes, 0.420 shared (-5% cells per core): cells per core do not rise" in reasons[0]


FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "2026-11-30-shared-loop"


def test_the_committed_readme_is_what_the_committed_data_gives():
    assert (FOLDER / "README.md").read_text() == readme(FOLDER)
    assert main([str(FOLDER), "--check"]) == 0
