"""The README of a shared-loop folder (benchmarks/sharedloop/bench.py), from its CSVs alone, with the decision.

`python -m benchmarks.sharedloop.report DIR [--check]` writes DIR/README.md (with --check: exits 1
if the README differs from what the CSVs give). Every number in it, and the decision, is computed
here from `links.csv`, `runs.csv`, `machine.csv` and `command.txt`.

The decision, per number of links: the shared loop is adopted where
- it is cheaper: the emulators' CPU lower than the processes' in every interleaved pair of runs,
  and the cells' CPU (emulators and iperf3 endpoints) lower at the median (the cost did not move to
  the endpoints): cells per core rise. The machine's busy cores are reported beside, not used: they
  count whatever else the shared machine ran (machine.csv);
- timing holds: no more of its links above the cells' lateness threshold than with one process per
  link, and its links' median p99 within that threshold;
- it carried the same traffic: the heavy links' goodput within GOODPUT_TOLERANCE of the processes'
  (a loop that falls behind would look cheap because it moves less).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from benchmarks.readme import readme_main

ARMS = ("processes", "shared")
#: The cells' lateness threshold at 100 ms RTT (ccsweep.linkrules.lateness_threshold_us: 1 % of the RTT).
THRESHOLD_US = 1000.0
GOODPUT_TOLERANCE = 0.05


def spread(values: pd.Series, digits: int = 0) -> str:
    """median [min-max] of `values`, rounded to `digits`."""
    values = values.dropna()
    if values.empty:
        return "-"
    fmt = f"{{:,.{digits}f}}"
    return f"{fmt.format(values.median())} [{fmt.format(values.min())}-{fmt.format(values.max())}]"


def per_link_cpu(runs: pd.DataFrame) -> pd.Series:
    """Each run's emulator CPU per link (cores)."""
    return runs["emulator_cpu_cores"] / runs["links"]


def cells_cpu(runs: pd.DataFrame) -> pd.Series:
    """Each run's CPU of its cells: the emulators and the iperf3 endpoints (cores)."""
    return runs["emulator_cpu_cores"] + runs["endpoints_cpu_cores"]


def arm_rows(links: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    rows = ["| links | arm | runs | emulator CPU per link (cores) | emulators in all (cores) "
            "| cells in all: emulators + endpoints (cores) | links per core of the cells' CPU | machine busy (cores) "
            "| timed wake-ups/s | link p99 lateness (us) | links over 1,000 us "
            "| heavy goodput (Mbit/s) | light goodput (Mbit/s) | load, 1 min |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for count in sorted(runs["links"].unique()):
        for arm in ARMS:
            r = runs[(runs["links"] == count) & (runs["arm"] == arm)]
            lk = links[(links["links"] == count) & (links["arm"] == arm)]
            over = int((lk["lateness_p99_us"] > THRESHOLD_US).sum())
            heavy, light = lk[lk["kind"] == "heavy"], lk[lk["kind"] == "light"]
            rows.append(f"| {count} | {arm} | {len(r)} | {spread(per_link_cpu(r), 4)} "
                        f"| {spread(r['emulator_cpu_cores'], 3)} | {spread(cells_cpu(r), 3)} "
                        f"| {spread(count / cells_cpu(r), 1)} | {spread(r['machine_busy_cores'], 2)} "
                        f"| {spread(r['timed_wakeups_per_s'])} "
                        f"| {spread(lk['lateness_p99_us'])} | {over} of {len(lk)} "
                        f"| {spread(heavy['goodput_mbps'], 1)} | {spread(light['goodput_mbps'], 2)} "
                        f"| {spread(r['load1'], 2)} |")
    return rows


def pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """The two arms' runs of each repetition and number of links side by side."""
    keyed = runs.assign(cpu_per_link=per_link_cpu(runs), cells_cpu=cells_cpu(runs))
    wide = keyed.pivot_table(index=["links", "rep"], columns="arm",
                             values=["cpu_per_link", "cells_cpu", "machine_busy_cores", "timed_wakeups_per_s"])
    return wide.dropna()


def pair_rows(runs: pd.DataFrame) -> list[str]:
    rows = ["| links | rep | emulator CPU per link, processes / shared (cores) | shared / processes "
            "| cells' CPU, processes / shared (cores) | machine busy, processes / shared (cores) "
            "| timed wake-ups/s, processes / shared |",
            "|---|---|---|---|---|---|---|"]
    for (count, rep), pair in pairs(runs).iterrows():
        cpu, cells = pair["cpu_per_link"], pair["cells_cpu"]
        busy = pair["machine_busy_cores"]
        wake = pair["timed_wakeups_per_s"]
        rows.append(f"| {count} | {rep} | {cpu['processes']:.4f} / {cpu['shared']:.4f} "
                    f"| {cpu['shared'] / cpu['processes']:.2f} | {cells['processes']:.3f} / {cells['shared']:.3f} "
                    f"| {busy['processes']:.2f} / {busy['shared']:.2f} "
                    f"| {wake['processes']:,.0f} / {wake['shared']:,.0f} |")
    return rows


def kind_rows(links: pd.DataFrame) -> list[str]:
    """Each kind of link in each arm: its lateness and goodput, and with one process per link its own CPU."""
    rows = ["| links | arm | kind | links measured | emulator CPU per link (cores) | goodput (Mbit/s) "
            "| p99 lateness (us) | max lateness (us) |", "|---|---|---|---|---|---|---|---|"]
    for (count, arm, kind), lk in links.groupby(["links", "arm", "kind"]):
        rows.append(f"| {count} | {arm} | {kind} | {len(lk)} | {spread(lk['cpu_cores'], 4)} "
                    f"| {spread(lk['goodput_mbps'], 2)} | {spread(lk['lateness_p99_us'])} "
                    f"| {spread(lk['lateness_max_us'])} |")
    return rows


def machine_rows(machine: pd.DataFrame) -> list[str]:
    rows = ["| running | seconds | load, 1 min: mean (max) | steal, busiest CPU (%): mean (max) "
            "| softirq, busiest CPU (%): mean (max) |", "|---|---|---|---|---|"]
    for label, m in machine[machine["label"].fillna("") != ""].groupby("label", sort=True):
        rows.append(f"| {label} | {len(m)} | {m['load1'].mean():.2f} ({m['load1'].max():.2f}) "
                    f"| {m['steal_pct'].mean():.1f} ({m['steal_pct'].max():.1f}) "
                    f"| {m['softirq_pct'].mean():.1f} ({m['softirq_pct'].max():.1f}) |")
    return rows


def verdict(links: pd.DataFrame, runs: pd.DataFrame, count: int) -> tuple[bool, list[str]]:
    """Whether the shared loop is adopted at `count` links, and what decided it (one reason a line)."""
    paired = pairs(runs).loc[count]
    cpu = paired["cpu_per_link"]
    ratios = cpu["shared"] / cpu["processes"]
    cells = paired["cells_cpu"]
    lk = links[links["links"] == count]
    over = {arm: int((lk[lk["arm"] == arm]["lateness_p99_us"] > THRESHOLD_US).sum()) for arm in ARMS}
    shared_p99 = float(lk[lk["arm"] == "shared"]["lateness_p99_us"].median())
    own_p99 = float(lk[lk["arm"] == "processes"]["lateness_p99_us"].median())
    rise = cells["processes"].median() / cells["shared"].median() - 1
    heavy = lk[lk["kind"] == "heavy"].groupby("arm")["goodput_mbps"].median()
    goodput_change = heavy["shared"] / heavy["processes"] - 1
    cheaper = bool((ratios < 1).all()) and cells["shared"].median() < cells["processes"].median()
    timing = over["shared"] <= over["processes"] and shared_p99 <= THRESHOLD_US
    same_traffic = abs(goodput_change) <= GOODPUT_TOLERANCE
    reasons = [
        f"emulator CPU per link, shared / processes, pair by pair: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"the cells' CPU, medians: {cells['processes'].median():.3f} cores with processes, "
        f"{cells['shared'].median():.3f} shared ({rise:+.0%} cells per core): cells per core "
        + ("rise" if cheaper else "do not rise"),
        f"links over {THRESHOLD_US:,.0f} us: {over['processes']} with processes, {over['shared']} shared; the links' "
        f"median p99 {own_p99:,.0f} us with processes, {shared_p99:,.0f} us shared: "
        + ("timing holds" if timing else "timing does not hold"),
        f"heavy links' goodput, shared against processes: {goodput_change:+.1%}: "
        + ("the same traffic" if same_traffic else "not the same traffic"),
    ]
    return cheaper and timing and same_traffic, reasons


def decision_lines(links: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    lines = []
    adopted = []
    for count in sorted(runs["links"].unique()):
        adopt, reasons = verdict(links, runs, int(count))
        adopted.append(adopt)
        lines.append(f"- **{count} links: {'adopt' if adopt else 'do not adopt'}.** " + "; ".join(reasons) + ".")
    overall = ("The shared loop is adopted at every number of links measured." if all(adopted) else
               "The shared loop is adopted only where every condition held." if any(adopted) else
               "The shared loop is not adopted: one process per link stays.")
    return [*lines, "", overall]


def readme(folder: Path) -> str:
    links = pd.read_csv(folder / "links.csv")
    runs = pd.read_csv(folder / "runs.csv")
    machine = pd.read_csv(folder / "machine.csv")
    command = (folder / "command.txt").read_text().splitlines()
    first = links[(links["rep"] == 1) & (links["arm"] == ARMS[0])]
    heavy = first[first["kind"] == "heavy"].groupby("links")["link"].count()
    mix = ", ".join(f"{heavy.get(count, 0)} heavy of {count}" for count in sorted(runs["links"].unique()))
    reps = int(runs["rep"].max())
    return "\n".join([
        "# One event loop for several links against one process per link",
        "",
        f"Command: `{command[0]}`",
        "",
        f"Machine: {command[1].removeprefix('machine: ')}; shared with other work while it ran (its load, "
        "steal and softirq each second are in `machine.csv`, summed up below).",
        "",
        "Each run started N links of the study's 100 ms cells (100 Mbit/s each way, 50 ms each way, 250 us "
        "release windows, SCHED_FIFO 10) either as N `ccsweep-link` processes (`processes`) or as one "
        "`emulator/examples/shared_loop.rs` process serving all N from one thread (`shared`), with one "
        f"iperf3 CUBIC flow per link ({mix}): heavy links have no loss and a 1-BDP drop-tail queue and run "
        "near line rate, light links lose 1 % of their data packets and carry ~1 Mbit/s, as the study's "
        f"lossy cells do. {reps} repetitions, the arms alternating which goes first. CPU is over the "
        "steady window (5 s after the flows start to 1 s before they end): the emulator processes' and "
        "the iperf3 endpoints' (schedstat), and the machine's busy cores (/proc/stat, every CPU, whatever "
        "else the machine ran included); lateness is each link's own "
        "self-check over its whole run. Values are median [min-max] over runs (CPU) or over links of "
        "every run (lateness, goodput).",
        "",
        *arm_rows(links, runs),
        "",
        "Pair by pair (the same repetition, back to back):",
        "",
        *pair_rows(runs),
        "",
        "Each kind of link (its own CPU only where it had a process of its own):",
        "",
        *kind_rows(links),
        "",
        "The machine while each arm ran:",
        "",
        *machine_rows(machine),
        "",
        "## Decision",
        "",
        "Adopt where cells per core rise (the emulators' CPU lower in every pair, the cells' CPU, emulators "
        "and endpoints, lower at the median; the machine's busy cores do not decide, other work shared the "
        "machine), timing holds (no more links above the cells' 1,000 us threshold than with "
        f"processes, and the shared links' median p99 within it) and the heavy links carry the same "
        f"(goodput within {GOODPUT_TOLERANCE:.0%}).",
        "",
        *decision_lines(links, runs),
        "",
        "The decision is the measurement's; the production path is not changed by it: each cell's runner "
        "still starts a `ccsweep-link` of its own. Serving cells' links from one loop needs a link service "
        "per machine that the cells' runners hand their links to (their namespaces, options and summary), "
        "and that loop runs on one core, which the heaviest mix must leave room on.",
        "",
        "Generated by `python -m benchmarks.sharedloop.report` from the CSVs beside it.",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    return readme_main(__doc__.splitlines()[0], readme, argv)


if __name__ == "__main__":
    sys.exit(main())
