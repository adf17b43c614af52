"""Peak memory of a sweep's steps as the sweep grows: 400, 4,000 and 40,000 cells.

An Argo sweep's pods have memory limits of 128 Mi to 512 Mi, and a sweep may have 100,000 cells.
Each step below runs as the real command line in a process of its own, and its peak resident set
is the high-water mark the kernel keeps for it (VmHWM, read as it exits). No flow runs: the sweeps are planned for
real, and their results are fake records (status ok, a goodput drawn from the cell's loss) stored
through the store's own methods for every cell but those of the last chunk, which stay to run.

- plan: `ccsweep plan SPEC --chunks-file F` into an empty store (the first step of an Argo sweep)
- cell start: `ccsweep cell --sweep NAME --id ID` of a stored cell: it opens the store, finds its
  cell, imports the runner and stops where a cell to run would start its flows ("cached")
- plan --chunk: `ccsweep plan --sweep NAME --chunk LAST` (a chunk Workflow's first step)
- status: `ccsweep status --sweep NAME` (the verdict)
- figures: `ccsweep figures --sweep NAME` (figures, report and CSV from the stored results)

With --before SRC (a source tree of an earlier ccsweep, e.g. `git worktree add /tmp/old 5234046`)
the same steps run with that code too, in stores of its own, side by side in the report.

    python -m benchmarks.memory.bench --out benchmarks/results/DATE-memory.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ccsweep.plan import CHUNK_SIZE, planned_cells
from ccsweep.result import CellResult, Environment
from ccsweep.store import open_store
from support.procstat import machine

REPO = Path(__file__).resolve().parents[2]
#: Repetitions of every loss setting: 20, so 400 cells are 10 loss rates x 2 algorithms.
REPETITIONS = 20
STEPS = ("plan", "cell start", "plan --chunk", "status", "figures")


def spec_of(cells: int) -> dict:
    """A Figure-8-like sweep of `cells` cells: CUBIC and BBR at cells/40 loss rates, 20 runs each."""
    losses = [round(0.01 * (i + 1), 4) for i in range(cells // (2 * REPETITIONS))]
    return {"name": f"mem-{cells}", "description": "memory bench: planned, never run",
            "experiments": [{"name": "loss", "title": "Goodput vs loss (memory bench, fake results)",
                             "figure": "goodput-vs-loss", "cc": ["cubic", "bbr"], "loss_percent": losses,
                             "rtt_ms": [40], "bandwidth_mbps": [20], "duration_s": 8, "warmup_s": 2,
                             "repetitions": REPETITIONS}]}


@dataclass
class Step:
    peaks_mb: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def text(self) -> str:
        if not self.peaks_mb:
            return "–"
        low, high = min(self.peaks_mb), max(self.peaks_mb)
        spread = f" ({low:.0f}-{high:.0f})" if len(self.peaks_mb) > 1 else ""
        return f"{statistics.median(self.peaks_mb):.0f}{spread} MiB, {statistics.median(self.seconds):.1f} s"


#: Runs `ccsweep ARGS` and, as it exits, writes its peak resident set (VmHWM, kB) to $BENCH_PEAK_FILE.
#: Read inside the process: wait4's ru_maxrss would also count the bench's own peak, which a child
#: inherits through fork and keeps across exec.
PEAK_OF_CCSWEEP = """
import atexit, os, runpy, sys
def peak():
    status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
    open(os.environ["BENCH_PEAK_FILE"], "w").write(status)
atexit.register(peak)
sys.argv = ["ccsweep", *sys.argv[1:]]
runpy.run_module("ccsweep", run_name="__main__")
"""


def measured(args: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,), says: str = "") -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of `ccsweep ARGS` run to its end, which must exit with one of
    `ok` and print `says`."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak_file:   # files: a pipe would fill and block the step
        code = subprocess.run([sys.executable, "-c", PEAK_OF_CCSWEEP, *args], stdout=out, stderr=err,
                              env={**env, "BENCH_PEAK_FILE": peak_file.name}, timeout=3600).returncode
        out.seek(0)
        if code not in ok or says.encode() not in out.read():
            err.seek(0)
            raise SystemExit(f"ccsweep {' '.join(args[:3])}...: exit {code}: {err.read().decode()[-2000:]}")
        peak_kb = int(peak_file.read())
    return peak_kb / 1024, time.monotonic() - started


def fake_results(store_url: str, sweep: str) -> int:
    """Store a record for every planned cell but the last chunk's (a quarter in a one-chunk sweep);
    returns how many."""
    store = open_store(store_url)
    cells = planned_cells(store, sweep)
    env = Environment(hostname="bench", kernel="none", available_cc=["cubic", "bbr"], ccsweep_version="bench",
                      python="3")
    stored = cells[:len(cells) - min(CHUNK_SIZE, len(cells) // 4)]
    for cell in stored:
        loss = cell.params.loss
        goodput = 20 * (1 - min(loss * 20, 0.95)) * (0.9 + 0.01 * cell.params.repetition)
        store.put_cell(CellResult(cell=cell, status="ok", started_at="2026-01-01T00:00:00+00:00",
                                  finished_at="2026-01-01T00:00:08+00:00", goodput_mbps=goodput,
                                  goodput_steady_mbps=goodput, bottleneck_throughput_mbps=goodput,
                                  capacity_mbps=20.0, environment=env))
    return len(stored)


def run_size(cells: int, reps: int, work: Path, code: str, env: dict[str, str], log) -> dict[str, Step]:
    """Every step at one sweep size with one code tree; `reps` runs of each."""
    steps = {name: Step() for name in STEPS}
    spec_path = work / f"mem-{cells}.yaml"
    spec_path.write_text(yaml.safe_dump(spec_of(cells), sort_keys=False))
    ccsweep: list[str] = []
    store = ""
    for rep in range(reps):
        store = str(work / f"store-{code}-{cells}-{rep}")
        shutil.rmtree(store, ignore_errors=True)
        peak, took = measured([*ccsweep, "plan", str(spec_path), "--store", store, "--chunks-file",
                               str(work / "chunks.json"), "--chunk-size", str(CHUNK_SIZE)], env)
        steps["plan"].peaks_mb.append(peak)
        steps["plan"].seconds.append(took)
        if rep:
            shutil.rmtree(store)
    store = str(work / f"store-{code}-{cells}-0")
    sweep = f"mem-{cells}"
    log(f"  {code} {cells} cells: planned; storing fake results")
    stored = fake_results(store, sweep)
    last_stored = planned_cells(open_store(store), sweep)[stored - 1].id
    last_chunk = (cells - 1) // CHUNK_SIZE
    commands = {
        # a stored cell: it stops where it would start flows ("cached"); a flow never runs here
        "cell start": ([*ccsweep, "cell", "--store", store, "--sweep", sweep, "--id", last_stored], (0,), '"cached"'),
        "plan --chunk": ([*ccsweep, "plan", "--store", store, "--sweep", sweep, "--chunk", str(last_chunk),
                          "--chunk-size", str(CHUNK_SIZE)], (0,), '"id"'),
        # the last cells are not stored, so the verdict says 1 and lists them
        "status": ([*ccsweep, "status", "--store", store, "--sweep", sweep], (1,), f"{stored} stored"),
        "figures": ([*ccsweep, "figures", "--store", store, "--sweep", sweep], (0,), ""),
    }
    for rep in range(reps):
        for name, (args, ok, says) in commands.items():
            peak, took = measured(args, env, ok, says)
            steps[name].peaks_mb.append(peak)
            steps[name].seconds.append(took)
        log(f"  {code} {cells} cells: repetition {rep + 1} of {reps} done")
    shutil.rmtree(store)
    return steps


def report(results: dict[str, dict[int, dict[str, Step]]], sizes: list[int], reps: int, command: str,
           before: str | None, started: str) -> str:
    lines = [f"# Peak memory of a sweep's steps at {', '.join(f'{n:,}' for n in sizes)} cells", "",
             f"Run {started} UTC on {machine()}.", "",
             f"Command: `{command}`", "",
             "Each cell is the peak resident set (VmHWM, read by the process as it exits) of the step's command, "
             "median of "
             f"{reps} runs (range in brackets), then its median wall time. Sweeps are planned for real; "
             "results are fake records stored for every cell but the last chunk's (a quarter of a one-chunk "
             "sweep); no flow runs. The store "
             "is a file store on tmpfs, so disk speed does not enter the times.", ""]
    for code, by_size in results.items():
        title = "this ccsweep" if code == "now" else f"the code before ({before})"
        lines += [f"## {title}", "", "| step | " + " | ".join(f"{n:,} cells" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        for step in STEPS:
            lines.append(f"| {step} | " + " | ".join(by_size[n][step].text() for n in sizes) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="400,4000,40000", help="sweep sizes in cells (multiples of 40)")
    parser.add_argument("--reps", type=int, default=3, help="runs of every step at every size")
    parser.add_argument("--before", type=Path, help="a source tree of an earlier ccsweep to run the same steps with")
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                        help="where the stores go (default: /dev/shm)")
    parser.add_argument("--out", type=Path, help="write the report here (else print it)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    if any(n % (2 * REPETITIONS) or n < 2 * REPETITIONS for n in sizes):
        parser.error(f"--sizes: each a multiple of {2 * REPETITIONS} (2 algorithms x {REPETITIONS} runs)")
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    codes = {"now": str(REPO / "src")} | ({"before": str(args.before.resolve() / "src")} if args.before else {})
    results: dict[str, dict[int, dict[str, Step]]] = {code: {} for code in codes}
    with tempfile.TemporaryDirectory(prefix="ccsweep-memory-", dir=args.workdir) as scratch:
        for cells in sizes:
            for code, src in codes.items():
                env = {**os.environ, "PYTHONPATH": src, "MPLBACKEND": "Agg"}
                print(f"{cells:,} cells with {code}'s code", file=sys.stderr, flush=True)
                results[code][cells] = run_size(cells, args.reps, Path(scratch), code, env,
                                                lambda line: print(line, file=sys.stderr, flush=True))
    command = "python -m benchmarks.memory.bench" + (f" --sizes {args.sizes}" if args.sizes != "400,4000,40000"
                                                      else "") + (f" --reps {args.reps}" if args.reps != 3 else "") + (
        " --before OLD" if args.before else "")
    text = report(results, sizes, args.reps, command, str(args.before) if args.before else None, started)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(json.dumps({code: {n: {s: v.peaks_mb for s, v in by.items()} for n, by in r.items()}
                      for code, r in results.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
