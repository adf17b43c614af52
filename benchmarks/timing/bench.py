"""Mahimahi's timing, measured from outside: validation against ccsweep-link, cost per cell, concurrency.

Run as root (`make bench-timing`). Three parts, each cell run by `ccsweep run` as a user would:

1. Validation. The same cell (BBR, 100 Mbit/s, 100 ms, 10 % loss) on three links: Mahimahi,
   ccsweep-link at its real-time priority, and ccsweep-link at normal priority (the scheduling
   class Mahimahi's shells run in). Each runs quiet and starved: 2 s into its flows, the link's
   processes (`--pin cell`: every process of the run) are pinned to one core and a SCHED_FIFO
   busy loop takes it for `--starve-s` seconds (tests/executor/starvation.py). Beside each run
   the bench samples the run-queue delay of the link's own processes (runner.runqueue, as the
   runner does), so for ccsweep-link it stands next to the emulator's own per-packet lateness.
2. Cost per cell: the CPU the whole `ccsweep run` process tree used (RUSAGE_CHILDREN) over its
   wall time, for the quiet runs of each link, and the link's own share (selfcheck.cpu_share).
3. The same `--seeds` seeds of one Mahimahi cell run at the executor's default concurrency and
   one at a time (`--jobs 1`), one attempt each (`--max-attempts 1`, so late ones stay in the
   sample, flagged), with a Mann-Whitney rank test on goodput.

Writes a JSON file of every run (`--out`, default benchmarks/results/<date>-timing.json) and
prints the tables the results page quotes. `--reps 1 --flow-s 6 --seeds 2 --seed-flow-s 6` checks
the bench works in about five minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml
from scipy.stats import mannwhitneyu

from ccsweep.expand import expand
from ccsweep.result import CellResult
from ccsweep.runner.runqueue import RunQueueDelay
from ccsweep.specload import parse_spec
from ccsweep.store import open_store
from ccsweep.store.base import ATTEMPT_STATUSES
from support.mahimahi_host import mahimahi_host, mahimahi_missing
from support.starvation import Starver

REPO = Path(__file__).resolve().parents[2]

#: name: (link, environment, the link's process names)
LINKS = {
    "mahimahi": ("mahimahi", {}, ("mm-",)),
    "ccsweep-link": ("ccsweep-link", {}, ("ccsweep-link",)),
    "ccsweep-link, normal priority": ("ccsweep-link", {"CCSWEEP_LINK_RT_PRIORITY": "0"}, ("ccsweep-link",)),
}
CELL = {"cc": ["bbr"], "loss_percent": [10], "rtt_ms": [100], "bandwidth_mbps": [100]}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Mahimahi's timing measured from outside (run as root).")
    parser.add_argument("--reps", type=int, default=3, help="runs per link and condition (default 3)")
    parser.add_argument("--flow-s", type=float, default=10, help="flow time of a validation cell (default 10)")
    parser.add_argument("--starve-s", type=float, default=3, help="length of the starvation (default 3)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds of the concurrency comparison (default 10)")
    parser.add_argument("--seed-flow-s", type=float, default=30, help="their flow time (default 30)")
    parser.add_argument("--parts", default="validate,seeds", help="validate, seeds or both (default)")
    parser.add_argument("--links", default=",".join(LINKS),
                        help=f"links to validate, comma-separated (default all: {', '.join(LINKS)})")
    parser.add_argument("--pin", choices=("link", "cell"), default="link",
                        help="starve the link's processes (default; the sender keeps sending) or the whole cell")
    parser.add_argument("--out", type=Path, default=None, help="JSON of every run")
    return parser.parse_args()


@dataclass
class Run:
    """One cell's attempt as the bench saw it."""

    part: str
    link: str
    starved: bool
    mode: str
    seed: int
    status: str
    goodput_mbps: float | None
    late: bool | None
    lateness_from: str | None
    lateness_p50_us: float | None
    lateness_p99_us: float | None
    threshold_us: float | None
    runqueue_p99_us: float | None  # the bench's own sampler on the link's processes
    record_runqueue_p99_us: float | None  # the runner's, as the record keeps it
    link_cpu_share: float | None
    run_cpu_cores: float | None  # the whole `ccsweep run` tree's CPU over its wall time
    wall_s: float


def spec_file(folder: Path, name: str, link: str, flow_s: float, seed: int, repetitions: int = 1) -> Path:
    spec = {"name": name, "experiments": [{"name": "timing", **CELL, "duration_s": flow_s, "link": link,
                                           "seed": seed, "repetitions": repetitions}]}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def attempts(store_url: str, cell_ids: list[str]) -> list[CellResult]:
    """Every stored record of the cells: counted results, then each kept attempt (late, starved, failed)."""
    store = open_store(store_url)
    found = []
    for cell_id in cell_ids:
        result = store.get_result(cell_id)
        found += [result] if result is not None else []
        for status in ATTEMPT_STATUSES:
            for key in store.list_keys(f"cells/{cell_id}/{status}/"):
                data = store.read_bytes(key)
                if key.endswith(".json") and data is not None:
                    found.append(CellResult.model_validate_json(data))
    return found


def run_sweep(spec: Path, store: Path, env: dict[str, str], *args: str,
              names: tuple[str, ...] = (), starve: tuple[str, float] | None = None, pinned: tuple[str, ...] = ("",)
              ) -> tuple[float, float, RunQueueDelay | None, float]:
    """`ccsweep run` of a spec; its CPU cores, wall seconds, the link sampler and the monotonic-wall offset."""
    with mahimahi_host():  # again for each run: another test's host settings may have been undone meanwhile
        return _run_sweep(spec, store, env, *args, names=names, starve=starve, pinned=pinned)


def _run_sweep(spec: Path, store: Path, env: dict[str, str], *args: str, names: tuple[str, ...],
               starve: tuple[str, float] | None, pinned: tuple[str, ...]
               ) -> tuple[float, float, RunQueueDelay | None, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store),
                                "--no-figures", *args], env={**os.environ, **env},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = RunQueueDelay(process.pid, names) if names else None
    starver = Starver(process.pid, starve[0], starve[1], after_s=2.0, names=pinned) if starve else None
    process.wait(timeout=1800)
    if sampler:
        sampler.stop()
    if starver:
        starver.join(30)
        if starver.error or starver.started_at is None:
            raise SystemExit(f"bench-timing: the starvation did not happen: {starver.error}")
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu / wall, wall, sampler, time.time() - time.monotonic()


def as_run(result: CellResult, part: str, link: str, starved: bool, mode: str, cores: float | None, wall: float,
           sampler: RunQueueDelay | None, wall_offset: float) -> Run:
    check = result.link.selfcheck if result.link else None
    runqueue = None
    if sampler is not None and result.flows_started_at:
        t0 = datetime.fromisoformat(result.flows_started_at).timestamp() - wall_offset
        summary = sampler.summary(round(t0 * 1e9), round((t0 + result.cell.params.duration_s) * 1e9))
        runqueue = summary.p99_us if summary else None
    return Run(part=part, link=link, starved=starved, mode=mode, seed=result.cell.params.seed,
               status=result.status, goodput_mbps=result.goodput_mbps, late=result.late,
               lateness_from=check.lateness_from if check else None,
               lateness_p50_us=check.lateness_p50_us if check else None,
               lateness_p99_us=check.lateness_p99_us if check else None,
               threshold_us=check.threshold_us if check else None, runqueue_p99_us=runqueue,
               record_runqueue_p99_us=check.runqueue_p99_us if check else None,
               link_cpu_share=check.cpu_share if check else None, run_cpu_cores=cores, wall_s=round(wall, 1))


def validate(args: argparse.Namespace, folder: Path) -> list[Run]:
    runs = []
    for name, (link, env, names) in LINKS.items():
        if name not in args.links.split(","):
            continue
        for starved in (False, True):
            for rep in range(args.reps):
                sweep = f"v-{link}-{'rt' if not env else 'nice'}-{'s' if starved else 'q'}-{rep}"
                spec = spec_file(folder, sweep, link, args.flow_s, seed=100 + rep)
                (cell,) = expand(parse_spec(yaml.safe_load(spec.read_text())))
                store = folder / sweep  # a store per run: the quiet and starved runs are the same cell
                cores, wall, sampler, offset = run_sweep(
                    spec, store, env, "--max-attempts", "1", "--jobs", "1", names=names,
                    starve=(cell.id, args.starve_s) if starved else None, pinned=names if args.pin == "link" else ("",))
                for result in attempts(str(store), [cell.id]):
                    run = as_run(result, "validate", name, starved, "alone", cores, wall, sampler, offset)
                    runs.append(run)
                    print(json.dumps(asdict(run)), flush=True)
    return runs


def seeds(args: argparse.Namespace, folder: Path) -> list[Run]:
    runs = []
    for mode, extra in (("default concurrency", ()), ("one at a time", ("--jobs", "1"))):
        sweep = "seeds-" + ("default" if not extra else "alone")
        spec = spec_file(folder, sweep, "mahimahi", args.seed_flow_s, seed=1, repetitions=args.seeds)
        cells = expand(parse_spec(yaml.safe_load(spec.read_text())))
        store = folder / sweep
        _, wall, _, _ = run_sweep(spec, store, {}, "--max-attempts", "1", *extra)
        for result in attempts(str(store), [c.id for c in cells]):
            run = as_run(result, "seeds", "mahimahi", False, mode, None, wall, None, 0.0)
            runs.append(run)
            print(json.dumps(asdict(run)), flush=True)
    return runs


def tables(runs: list[Run]) -> list[str]:
    lines = ["| link | starved | runs | late (flagged) | p99 lateness, the record's (us) | p99 run-queue delay of "
             "the link's processes (us) | goodput (Mbit/s) |", "|---|---|---|---|---|---|---|"]
    for name in LINKS:
        for starved in (False, True):
            mine = [r for r in runs if r.part == "validate" and r.link == name and r.starved == starved]
            if not mine:
                continue
            late = sum(r.late is True for r in mine)
            lines.append(f"| {name} | {'yes' if starved else 'no'} | {len(mine)} | {late} | "
                         f"{_values([r.lateness_p99_us for r in mine])} | "
                         f"{_values([r.runqueue_p99_us for r in mine])} | "
                         f"{_values([r.goodput_mbps for r in mine], 1)} |")
    lines += ["", "| link | runs | CPU of the whole `ccsweep run` (cores) | link's own CPU share |",
              "|---|---|---|---|"]
    for name in LINKS:
        quiet = [r for r in runs if r.part == "validate" and r.link == name and not r.starved]
        if quiet:
            lines.append(f"| {name} | {len(quiet)} | {_values([r.run_cpu_cores for r in quiet], 2)} | "
                         f"{_values([r.link_cpu_share for r in quiet], 2)} |")
    by_mode = {mode: [r for r in runs if r.part == "seeds" and r.mode == mode]
               for mode in ("default concurrency", "one at a time")}
    if all(by_mode.values()):
        lines += ["", "| mode | cells | late (flagged) | goodput median (Mbit/s) | goodput range | "
                  "median, on-time cells only |", "|---|---|---|---|---|---|"]
        for mode, mine in by_mode.items():
            good = [r.goodput_mbps for r in mine if r.goodput_mbps is not None]
            on_time = [r.goodput_mbps for r in mine if r.goodput_mbps is not None and r.late is False]
            lines.append(f"| {mode} | {len(mine)} | {sum(r.late is True for r in mine)} | "
                         f"{statistics.median(good):.1f} | {min(good):.1f}-{max(good):.1f} | "
                         f"{statistics.median(on_time) if on_time else float('nan'):.1f} (n={len(on_time)}) |")
        a, b = ([r.goodput_mbps for r in mine if r.goodput_mbps is not None] for mine in by_mode.values())
        lines.append(f"\nMann-Whitney U (two-sided), all attempts: p = {mannwhitneyu(a, b).pvalue:.3f}")
    return lines


def _values(values: list[float | None], digits: int = 0) -> str:
    kept = sorted(v for v in values if v is not None)
    return ", ".join(f"{v:,.{digits}f}" for v in kept) if kept else "–"


def main() -> None:
    args = arguments()
    missing = mahimahi_missing()
    if missing:
        sys.exit(f"bench-timing: {missing}")
    out = args.out or REPO / "benchmarks" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-mahimahi-timing.json"
    parts = set(args.parts.split(","))
    load_before = os.getloadavg()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="ccsweep-bench-timing-") as tmp, mahimahi_host():
        if "validate" in parts:
            runs += validate(args, Path(tmp))
        if "seeds" in parts:
            runs += seeds(args, Path(tmp))
    load_after = os.getloadavg()
    out.write_text(json.dumps({"arguments": {k: str(v) for k, v in vars(args).items()},
                               "load_average_before": load_before, "load_average_after": load_after,
                               "runs": [asdict(r) for r in runs]}, indent=1) + "\n")
    print("\n".join([f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after", *tables(runs)]))


if __name__ == "__main__":
    main()
