"""ReBBR's whole study at full length, on ccsweep-link and on Mahimahi, set beside ReBBR's numbers.

`make reproduce` runs this as root. For each link it runs the experiments of `full-sweep` (Figure 8
and the algorithms experiment first, so the two ReBBR figures people cite are complete before the
long RTT experiment), then `figure8-seeds` (Figure 8's chaotic cells, 10 seeds each, so the links
are compared there as distributions, not single runs) with `ccsweep run`, the embedded default:
local processes, a store folder, the admission control choosing how many cells run at once.
Before anything runs it prints what is left to run and an estimate of the wall time; while cells
run it prints one progress line a minute (cells stored per experiment), so a log shows how far a
run got. The store is content-addressed:
an interrupted run started again runs only the cells not stored yet, and a cell whose emulator ran
late is run again, never counted.

Then it writes to --out, from the store alone (the same step runs without running anything with
--report-only):
- `README.md`: the machine and the commands, wall time, cells per minute, cells at once, the link's
  CPU per cell for each link, late attempts; and per experiment a table of each cell on
  ccsweep-link, on Mahimahi and in ReBBR's published CSV, with the median and worst relative
  difference of each pair (ccsweep.results.study);
- `SWEEP/`: each sweep's figures (PNG), report and tidy tables (`cells.csv`, `flows.csv`: one row
  per stored cell and flow, every parameter and metric), as `ccsweep figures` builds them in the
  store; the report's per-cell pictures and the SVG copies stay in the store (megabytes, rebuilt
  by `ccsweep figures`);
- `compare-SWEEP.csv`: the two links' runs of each cell as distributions (`ccsweep compare
  ... --ignore link`); `compare-figure8-seeds.csv` holds the cells with 10 runs a side.

The sweeps are named as `ccsweep run --link` names them: `full-sweep` on ccsweep-link, and
`full-sweep-mahimahi` on Mahimahi; one store holds both (a cell's link is part of its id).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from ccsweep.result import CellResult
from ccsweep.results.data import SweepData, load_sweep
from ccsweep.results.study import compare_links, run_stats, table_markdown
from ccsweep.store import ResultStore, open_store
from ccsweep.store.base import ATTEMPT_STATUSES
from ccsweep.storedplan import get_manifest, with_cells

REPO = Path(__file__).resolve().parents[2]
CCSWEEP = [sys.executable, "-m", "ccsweep"]
#: The study's parts in the order they run: the two figures people cite first.
STUDY = ("figure8", "algorithms", "full-sweep")
#: Then Figure 8's chaotic cells with 10 seeds each (its run 0 is figure8's own cell).
SEEDS = "figure8-seeds"
PARTS = (*STUDY, SEEDS)
LINKS = ("ccsweep-link", "mahimahi")


def sweep_name(part: str, link: str) -> str:
    """The name `ccsweep run PART --link LINK` stores the sweep under."""
    return part if link == "ccsweep-link" else f"{part}-{link}"


def run_part(part: str, link: str, store_url: str) -> int:
    """`ccsweep run` of one part on one link, with a progress line a minute from the store."""
    command = [*CCSWEEP, "run", part, "--store", store_url, "--no-figures"]
    if link != "ccsweep-link":
        command += ["--link", link]
    print(f"$ {' '.join(command[2:])}", flush=True)
    done = threading.Event()
    watcher = threading.Thread(target=_progress, args=(open_store(store_url), sweep_name(part, link), done),
                               daemon=True)
    watcher.start()
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        done.set()
        watcher.join(timeout=5)


def _progress(store: ResultStore, sweep: str, done: threading.Event) -> None:
    started = time.monotonic()
    while not done.wait(60):
        manifest = get_manifest(store, sweep)
        if manifest is None:
            continue
        cells = with_cells(store, manifest).distinct_cells()
        stored = sum(store.has_result(c.id) for c in cells)
        print(f"[{(time.monotonic() - started) / 60:.0f} min] {sweep}: {stored}/{len(cells)} cells stored",
              flush=True)


def estimate(store: ResultStore, links: list[str]) -> None:
    """Print the cells left per link and the wall time the admission model expects for them here."""
    from ccsweep.estimate import estimate_wall, format_duration
    from ccsweep.expand import expand
    from ccsweep.runner.tcpinfo import unavailable_congestion_controls
    from ccsweep.specload import load_spec

    specs = [load_spec(part) for part in ("full-sweep", SEEDS)]
    cores = os.cpu_count() or 1
    for link in links:
        cells = {c.id: c for spec in specs for c in expand(spec.with_link(link))}
        runnable = [c for c in cells.values() if not unavailable_congestion_controls(f.cc for f in c.params.flows)]
        left = [c for c in runnable if not store.has_result(c.id)]
        wall = estimate_wall(left, cores)
        print(f"{link}: {len(cells)} distinct cells, {len(cells) - len(runnable)} need an algorithm this kernel "
              f"lacks, {len(runnable) - len(left)} stored, {len(left)} to run "
              f"({sum(c.params.duration_s for c in left) / 3600:.1f} h of flow time); estimated wall time on "
              f"{cores} cores: {format_duration(wall.wall_s)} (late re-runs not counted)", flush=True)


def _sweeps(store: ResultStore, known: set[str], link: str) -> list[SweepData]:
    """The study's sweeps on one link (of the store's `known` sweeps): full-sweep once planned (it
    holds every part), else the parts run."""
    names = [name for part in STUDY if (name := sweep_name(part, link)) in known]
    return [load_sweep(store, name) for name in (names[-1:] if sweep_name("full-sweep", link) in names else names)]


def _attempts(store: ResultStore, sweep: SweepData) -> list[CellResult]:
    """Every attempt of the sweep's cells that did not count (late, starved, failed): each was run again."""
    return [attempt for cell in sweep.manifest.distinct_cells() for status in ATTEMPT_STATUSES
            for attempt in store.attempts(cell.id, status)]


def _runs_table(store: ResultStore, sweeps: list[tuple[str, SweepData]]) -> list[str]:
    lines = ["| sweep | link | cells stored | attempts run again | busy wall time | cells/min | "
             "cells at once (max, mean) | link CPU per cell (median, cores) |", "|---|---|---:|---|---:|---:|---:|---|"]
    for link, sweep in sweeps:
        stats = run_stats(sweep.distinct_results(), _attempts(store, sweep))
        again = ", ".join(f"{n} {kind}" for kind, n in sorted(stats.attempts.items())) or "none"
        cpu = ", ".join(f"{label}: {share:.3f}" for label, share in stats.link_cpu_median.items())
        lines.append(f"| {sweep.name} | {link} | {stats.cells} | {again} | {stats.wall_s / 60:.1f} min | "
                     f"{stats.cells_per_minute:.1f} | {stats.max_at_once}, {stats.mean_at_once:.1f} | {cpu} |")
    return lines


def report(store_url: str, out: Path, commands: list[str]) -> None:
    """comparison.md, and each sweep's figures, report and tables (cells.csv, flows.csv), from the store."""
    store = open_store(store_url)
    out.mkdir(parents=True, exist_ok=True)
    known = set(store.list_sweeps())
    link_sweeps, mm_sweeps = _sweeps(store, known, "ccsweep-link"), _sweeps(store, known, "mahimahi")
    seeds = [(link, load_sweep(store, name)) for link in LINKS if (name := sweep_name(SEEDS, link)) in known]
    if not link_sweeps:
        sys.exit(f"no ccsweep-link sweep of the study in {store_url}")
    everything = link_sweeps[-1]  # full-sweep once planned: every experiment; else the last part run
    experiments = {e.name: e for s in link_sweeps for e in s.experiments}
    experiments.update({e.name: e for e in everything.experiments})
    mm_results = [r for s in mm_sweeps for r in s.distinct_results()]
    tables = compare_links([(e.experiment, e.results) for e in experiments.values()], mm_results)
    lines = [f"# ReBBR's study at full length: ccsweep-link, Mahimahi and ReBBR ({datetime.now(UTC):%Y-%m-%d})", "",
             f"Machine: {platform.node()}, {os.cpu_count()} cores, kernel {platform.release()}.", "",
             "Commands:", "", "```sh", *commands, "```", "", "## Runs", "",
             *_runs_table(store, [("ccsweep-link", s) for s in link_sweeps] + [("mahimahi", s) for s in mm_sweeps]
                          + seeds),
             "", "## Per experiment", "", *[table_markdown(t) for t in tables]]
    (out / "comparison.md").write_text("\n".join(lines) + "\n")
    for sweep in [*link_sweeps, *mm_sweeps, *(s for _, s in seeds)]:
        subprocess.run([*CCSWEEP, "figures", "--store", store_url, "--sweep", sweep.name], check=True)
        for name in store.sweep_file_names(sweep.name):
            if name.startswith("cells/") or name.endswith(".svg"):
                continue  # per-cell pictures and vector copies: megabytes that `ccsweep figures` rebuilds
            data = store.get_sweep_file(sweep.name, name)
            if data is not None:
                (out / sweep.name / name).parent.mkdir(parents=True, exist_ok=True)
                (out / sweep.name / name).write_bytes(data)
    for link_sweep in [*link_sweeps, *(s for link, s in seeds if link == "ccsweep-link")]:
        # each link's runs of the same cells, as distributions (one run: not settled)
        twin = sweep_name(link_sweep.name, "mahimahi")
        if twin in known:
            csv = out / f"compare-{link_sweep.name}.csv"
            subprocess.run([*CCSWEEP, "compare", "--store", store_url, link_sweep.name, twin, "--ignore", "link",
                            "--quantity", "bottleneck-throughput", "--csv", str(csv)], check=True)
    print(f"wrote {out}/comparison.md and each sweep's figures, report and tables", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=str(Path.home() / ".cache/ccsweep/rebbr-full"),
                        help="result store (a folder, file:// or s3://); outside the clone so a new clone resumes it")
    parser.add_argument("--links", default=",".join(LINKS), help="comma-separated: ccsweep-link,mahimahi")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="the sweeps to run in order (default: figure8, algorithms, the rest of full-sweep, then "
                             "figure8-seeds)")
    parser.add_argument("--out", type=Path,
                        default=REPO / "benchmarks/results" / f"{datetime.now(UTC):%Y-%m-%d}-rebbr-full")
    parser.add_argument("--report-only", action="store_true", help="build --out from the store, run nothing")
    args = parser.parse_args()
    links = [link for link in args.links.split(",") if link]
    if unknown := set(links) - set(LINKS):
        parser.error(f"--links: {', '.join(sorted(unknown))} is not one of {', '.join(LINKS)}")
    commands = [f"ccsweep run {part} --store STORE{'' if link == 'ccsweep-link' else f' --link {link}'}"
                for link in links for part in args.parts.split(",")]
    if not args.report_only:
        if os.geteuid() != 0:
            sys.exit("run as root (network namespaces and TUN devices)")
        estimate(open_store(args.store), links)
        for link in links:
            for part in args.parts.split(","):
                run_part(part, link, args.store)
    report(args.store, args.out, commands)


if __name__ == "__main__":
    main()
