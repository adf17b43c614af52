"""Peak memory of a sweep's steps as the sweep grows: 400, 4,000 and 40,000 cells.

An Argo sweep's pods have memory limits of 128 Mi to 512 Mi, and a sweep may have 100,000 cells.
Each step below runs as the real command line in a process of its own, and its peak resident set
is the high-water mark the kernel keeps for it (VmHWM, read as it exits). No flow runs: the sweeps are planned for
real, and their results are fake records stored through the store's own methods for every cell but
those of the last chunk, which stay to run. A fake record is shaped like a real 60 s cell's (its flow
with 60 per-second throughputs, the link's counters and self-check), so what a step holds per record
is measured at a real record's size; no time series is stored, so no per-cell series image is drawn.

- plan: `ccsweep plan SPEC --chunks-file F` into an empty store (the first step of an Argo sweep)
- cell start: `ccsweep cell --sweep NAME --id ID` of a stored cell: it opens the store, finds its
  cell, imports the runner and stops where a cell to run would start its flows ("cached")
- plan --chunk: `ccsweep plan --sweep NAME --chunk LAST` (a chunk Workflow's first step)
- status: `ccsweep status --sweep NAME` (the verdict)
- figures: `ccsweep figures --sweep NAME` (figures, report and CSV from the stored results)
- run: `ccsweep run SPEC --cpu-budget 0.1 --no-figures` over the planned sweep before any result is
  stored: the local executor refuses every cell (a cell of this grid is priced at 0.11 cores), all
  at once, as no flow starts
- plan, plan --chunk, status and figures again for the same cells planned with adaptive repetitions
  (min 3, max 20 runs a setting), which every step judges whole: every setting from its runs' values
- run, adaptive: `ccsweep run SPEC --cpu-budget 0.1 --no-figures`, the local executor over the
  adaptive sweep: it judges and counts the cells to run, then refuses each as needing more than
  0.1 cores (a cell of this grid is priced at 0.11), so no flow starts
- operator plan (and adaptive): the operator's planning child (`python -m ccsweep_operator.planworker
  512`, its default address-space bound) planning the sweep as a new Sweep into an empty store, as
  the operator runs it for each Sweep; its row also gives the peak address space (VmPeak), which
  the bound limits

With --repetitions N the grid has N runs a setting (cells / N settings), so a sweep's cells can grow
with its settings fixed; --step measures some of the steps only (plan is always run, to make the
store).

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

from ccsweep.cell import Cell
from ccsweep.plan import CHUNK_SIZE, planned_cells
from ccsweep.result import CellResult, DirectionCounters, Environment, FlowResult, LinkSummary, SelfCheck
from ccsweep.store import open_store
from support.procstat import machine

REPO = Path(__file__).resolve().parents[2]
#: Repetitions of every loss setting: 20, so 400 cells are 10 loss rates x 2 algorithms (--repetitions).
REPETITIONS = 20
#: Figure 8's flow time: each fake record carries a flow's per-second throughput for it, as a real one does.
DURATION_S = 60
#: The steps reading a stored sweep: fake results are stored for them first.
STORED_STEPS = ("cell start", "plan --chunk", "status", "figures")
STEPS = ("plan", *STORED_STEPS, "run")
#: The operator's planning child planning the sweep as a new Sweep: its memory is bounded by address space.
OPERATOR_STEPS = ("operator plan", "operator plan, adaptive")
#: The same sweep with adaptive repetitions (min 3, max the repetitions): judged whole by every step.
ADAPTIVE_STEPS = ("plan, adaptive", "plan --chunk, adaptive", "status, adaptive", "figures, adaptive",
                  "run, adaptive")
#: The fewest runs an adaptive setting has: its rule's min.
ADAPTIVE_MIN = 3
#: `ccsweep run --cpu-budget`: the least it takes, below what a cell of the grid is priced at, so the
#: local executor refuses every cell to run and no flow starts.
REFUSING_CPU_BUDGET = 0.1
ALL_STEPS = (*STEPS, *ADAPTIVE_STEPS, *OPERATOR_STEPS)


def sweep_name(cells: int, adaptive: bool = False) -> str:
    return f"mem-{'adaptive-' if adaptive else ''}{cells}"


def spec_of(cells: int, adaptive: bool = False, repetitions: int = REPETITIONS) -> dict:
    """A Figure-8-like sweep of `cells` cells: CUBIC and BBR at cells/(2 x repetitions) loss rates,
    `repetitions` runs each (with `adaptive`, up to as many by an adaptive rule: the same cells planned)."""
    losses = [round(0.01 * (i + 1), 4) for i in range(cells // (2 * repetitions))]
    rule = {"min": ADAPTIVE_MIN, "max": repetitions, "target": {"ci_relative": 0.05}}
    return {"name": sweep_name(cells, adaptive), "description": "memory bench: planned, never run",
            "experiments": [{"name": "loss", "title": "Goodput vs loss (memory bench, fake results)",
                             "figure": "goodput-vs-loss", "cc": ["cubic", "bbr"], "loss_percent": losses,
                             "rtt_ms": [40], "bandwidth_mbps": [20], "duration_s": DURATION_S, "warmup_s": 5,
                             "repetitions": rule if adaptive else repetitions}]}


@dataclass
class Step:
    peaks_mb: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    #: Peak address space (VmPeak), shown for the steps whose bound is on it (OPERATOR_STEPS).
    address_mb: list[float] = field(default_factory=list)

    def add(self, peak: Peak) -> None:
        self.peaks_mb.append(peak.resident_mb)
        self.address_mb.append(peak.address_mb)
        self.seconds.append(peak.seconds)

    def text(self, address_space: bool = False) -> str:
        if not self.peaks_mb:
            return "–"
        low, high = min(self.peaks_mb), max(self.peaks_mb)
        spread = f" ({low:.0f}-{high:.0f})" if len(self.peaks_mb) > 1 else ""
        address = f" (address space {statistics.median(self.address_mb):.0f})" if address_space else ""
        return (f"{statistics.median(self.peaks_mb):.0f}{spread}{address} MiB, "
                f"{statistics.median(self.seconds):.1f} s")


@dataclass(frozen=True)
class Peak:
    """A step's run: its peak resident set and address space (MiB), and its wall time."""

    resident_mb: float
    address_mb: float
    seconds: float


#: Runs module ARGV[1] with the arguments after it and, as it exits, writes its peak resident set and
#: address space (VmHWM and VmPeak, kB) to $BENCH_PEAK_FILE. Read inside the process: wait4's
#: ru_maxrss would also count the bench's own peak, which a child inherits through fork and keeps
#: across exec.
PEAK_OF_MODULE = """
import atexit, os, runpy, sys
def peak():
    status = open("/proc/self/status").read()
    kb = [status.split(key)[1].split()[0] for key in ("VmHWM:", "VmPeak:")]
    open(os.environ["BENCH_PEAK_FILE"], "w").write(" ".join(kb))
atexit.register(peak)
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__")
"""


def measured(args: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,), says: str = "",
             module: str = "ccsweep", stdin: str = "") -> Peak:
    """The peaks and wall time of `ccsweep ARGS` (or of `python -m MODULE ARGS`, given `stdin`) run to
    its end, which must exit with one of `ok` and print `says`."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak_file:   # files: a pipe would fill and block the step
        code = subprocess.run([sys.executable, "-c", PEAK_OF_MODULE, module, *args], stdout=out, stderr=err,
                              input=stdin.encode(), env={**env, "BENCH_PEAK_FILE": peak_file.name},
                              timeout=3600).returncode
        out.seek(0)
        err.seek(0)
        if code not in ok or says.encode() not in out.read() + err.read():
            err.seek(0)
            raise SystemExit(f"ccsweep {' '.join(args[:3])}...: exit {code}: {err.read().decode()[-2000:]}")
        resident_kb, address_kb = (int(kb) for kb in peak_file.read().split())
    return Peak(resident_kb / 1024, address_kb / 1024, time.monotonic() - started)


def fake_record(cell: Cell, env: Environment) -> CellResult:
    """A record shaped like a real 60 s cell's: status ok, its flow with a number for every second,
    the link's counters and timing self-check, and the names of the files a real cell stores beside it.
    The goodput is drawn from the cell's loss; every number differs from cell to cell, as measured ones do."""
    params = cell.params
    goodput = 20 * (1 - min(params.loss * 20, 0.95)) * (0.9 + 0.001 * params.repetition)
    per_second = [round(goodput * (1 + 0.01 * ((k * 7 + params.repetition) % 11 - 5)), 4) for k in range(DURATION_S)]
    sent = int(goodput * 1e6 / 8 * DURATION_S)
    flow = FlowResult(index=0, cc=params.flows[0].cc, start_s=0.0, bytes_received=sent, goodput_mbps=goodput,
                      goodput_steady_mbps=goodput * 1.01, throughput_per_s_mbps=per_second,
                      retransmits=int(sent / 1448 * params.loss), rtt_mean_ms=41.5 + params.repetition / 10,
                      rtt_p50_ms=41.0 + params.repetition / 10, rtt_p95_ms=48.2 + params.repetition / 10,
                      min_rtt_ms=40.0, rwnd_limited_fraction=0.01 * (params.repetition % 3),
                      sndbuf_limited_fraction=0.0)
    packets = sent // 1448
    uplink = DirectionCounters(in_packets=packets + 90, in_bytes=sent + 90 * 1500, out_packets=packets,
                               out_bytes=sent + packets * 52, bottleneck_packets=packets + 90,
                               bottleneck_bytes=sent + 90 * 1500, capacity_bytes=int(20e6 / 8 * DURATION_S),
                               drops_loss=int(packets * params.loss), queue_bytes_max=60_000 + params.repetition)
    downlink = DirectionCounters(in_packets=packets // 2, in_bytes=packets * 26, out_packets=packets // 2,
                                 out_bytes=packets * 26, bottleneck_packets=packets // 2, bottleneck_bytes=packets * 26,
                                 capacity_bytes=int(20e6 / 8 * DURATION_S), queue_bytes_max=224)
    selfcheck = SelfCheck(lateness_p50_us=130.0 + params.repetition, lateness_p99_us=300.0 + params.repetition,
                          lateness_max_us=3700.5 + params.repetition, cpu_share=0.05 + params.repetition / 1000,
                          late=False, threshold_us=1000.0, sched="fifo:10", release_window_us=250.0,
                          runqueue_p99_us=50.0 + params.repetition, lateness_from="packets")
    link = LinkSummary(version="bench", order="queue>bottleneck>loss>delay", uplink=uplink, downlink=downlink,
                       selfcheck=selfcheck)
    return CellResult(cell=cell, status="ok", started_at="2026-01-01T00:00:00.000+00:00",
                      finished_at="2026-01-01T00:01:02.000+00:00", flows_started_at="2026-01-01T00:00:01.000+00:00",
                      goodput_mbps=goodput, goodput_steady_mbps=goodput * 1.01,
                      bottleneck_throughput_mbps=goodput * 1.02, capacity_mbps=20.0, flows=[flow], link=link,
                      environment=env, artifacts=["uplink.log.gz", "downlink.log.gz"])


def fake_results(store_url: str, sweep: str) -> int:
    """Store a record for every planned cell but the last chunk's (a quarter in a one-chunk sweep);
    returns how many."""
    store = open_store(store_url)
    cells = planned_cells(store, sweep)
    env = Environment(hostname="bench", kernel="none", available_cc=["cubic", "bbr"], ccsweep_version="bench",
                      python="3")
    stored = cells[:len(cells) - min(CHUNK_SIZE, len(cells) // 4)]
    for cell in stored:
        store.put_cell(fake_record(cell, env))
    return len(stored)


def planned(cells: int, reps: int, work: Path, code: str, env: dict[str, str], step: Step,
            adaptive: bool = False, repetitions: int = REPETITIONS) -> str:
    """Plan the sweep `reps` times into empty stores, measuring each; returns the first store."""
    sweep = sweep_name(cells, adaptive)
    spec_path = work / f"{sweep}.yaml"
    spec_path.write_text(yaml.safe_dump(spec_of(cells, adaptive, repetitions), sort_keys=False))
    for rep in range(reps):
        store = str(work / f"store-{code}-{sweep}-{rep}")
        shutil.rmtree(store, ignore_errors=True)
        step.add(measured(["plan", str(spec_path), "--store", store, "--chunks-file", str(work / "chunks.json"),
                           "--chunk-size", str(CHUNK_SIZE)], env))
        if rep:
            shutil.rmtree(store)
    return str(work / f"store-{code}-{sweep}-0")


def run_size(cells: int, reps: int, work: Path, code: str, env: dict[str, str], log,
             steps_wanted: tuple[str, ...] = ALL_STEPS, repetitions: int = REPETITIONS) -> dict[str, Step]:
    """The steps `steps_wanted` at one sweep size with one code tree; `reps` runs of each."""
    steps = {name: Step() for name in ALL_STEPS}
    if any(name in steps_wanted for name in STEPS):
        store = planned(cells, reps, work, code, env, steps["plan"], repetitions=repetitions)
        sweep = sweep_name(cells)
        if "run" in steps_wanted:  # before any result is stored: every cell of the sweep is refused
            measure_each({"run": refusing_run(work / f"{sweep}.yaml", store, work)}, reps, env, steps,
                         lambda rep: log(f"  {code} {cells} cells: run, repetition {rep} of {reps} done"))
        if any(name in steps_wanted for name in STORED_STEPS):
            measure_stored(cells, reps, code, store, sweep, env, steps, steps_wanted, log)
        shutil.rmtree(store)
    if any(name in steps_wanted for name in ADAPTIVE_STEPS):
        # The same cells with adaptive repetitions: every step judges every setting first.
        store = planned(cells, reps, work, code, env, steps["plan, adaptive"], adaptive=True, repetitions=repetitions)
        sweep = sweep_name(cells, adaptive=True)
        fake_results(store, sweep)
        adaptive: Commands = {
            "plan --chunk, adaptive": (["plan", "--store", store, "--sweep", sweep, "--chunk",
                                        str((cells - 1) // CHUNK_SIZE), "--chunk-size", str(CHUNK_SIZE)], (0,), '"id"'),
            "status, adaptive": (["status", "--store", store, "--sweep", sweep], (0, 1), "stored"),
            "figures, adaptive": (["figures", "--store", store, "--sweep", sweep], (0,), ""),
            # every cell to run refused, so none starts; says how many it judged and counted
            "run, adaptive": refusing_run(work / f"{sweep}.yaml", store, work),
        }
        measure_each({k: v for k, v in adaptive.items() if k in steps_wanted}, reps, env, steps,
                     lambda rep: log(f"  {code} {cells} cells, adaptive: repetition {rep} of {reps} done"))
        shutil.rmtree(store)
    for name in (step for step in OPERATOR_STEPS if step in steps_wanted):
        for _ in range(reps):
            steps[name].add(operator_planned(cells, name.endswith("adaptive"), repetitions, work, env))
        log(f"  {code} {cells} cells: {name} done")
    return steps


def measure_stored(cells: int, reps: int, code: str, store: str, sweep: str, env: dict[str, str],
                   steps: dict[str, Step], steps_wanted: tuple[str, ...], log) -> None:
    """The steps that read a stored sweep (cell start, plan --chunk, status, figures): fake results are
    stored for every cell but the last chunk's first."""
    log(f"  {code} {cells} cells: planned; storing fake results")
    stored = fake_results(store, sweep)
    last_stored = planned_cells(open_store(store), sweep)[stored - 1].id
    last_chunk = (cells - 1) // CHUNK_SIZE
    commands: Commands = {
        # a stored cell: it stops where it would start flows ("cached"); a flow never runs here
        "cell start": (["cell", "--store", store, "--sweep", sweep, "--id", last_stored], (0,), '"cached"'),
        "plan --chunk": (["plan", "--store", store, "--sweep", sweep, "--chunk", str(last_chunk),
                          "--chunk-size", str(CHUNK_SIZE)], (0,), '"id"'),
        # the last cells are not stored, so the verdict says 1 and lists them
        "status": (["status", "--store", store, "--sweep", sweep], (1,), f"{stored} stored"),
        "figures": (["figures", "--store", store, "--sweep", sweep], (0,), ""),
    }
    measure_each({k: v for k, v in commands.items() if k in steps_wanted}, reps, env, steps,
                 lambda rep: log(f"  {code} {cells} cells: repetition {rep} of {reps} done"))


def refusing_run(spec_path: Path, store: str, work: Path) -> tuple[list[str], tuple[int, ...], str]:
    """`ccsweep run` with a CPU budget no cell fits in: it counts and refuses every cell to run, so none
    starts; it says how many it counted."""
    return (["run", str(spec_path), "--store", store, "--cpu-budget", str(REFUSING_CPU_BUDGET), "--no-figures",
             "--workdir", str(work / "run")], (0,), " 0 to run")


def operator_planned(cells: int, adaptive: bool, repetitions: int, work: Path, env: dict[str, str]) -> Peak:
    """The operator's planning child planning the sweep as a new Sweep into an empty store, within
    its default address-space bound; its Decision must say the Sweep was planned."""
    from ccsweep_operator.planworker import DEFAULT_MEMORY_MIB

    spec = spec_of(cells, adaptive, repetitions)
    name = spec.pop("name")
    request = {"sweep": {"name": name, "namespace": "bench", "uid": f"uid-{name}", "generation": 1, "spec": spec,
                         "status": {}}, "nodes": None}
    store = work / "operator-store"
    shutil.rmtree(store, ignore_errors=True)
    try:
        return measured([str(DEFAULT_MEMORY_MIB)], {**env, "CCSWEEP_STORE": f"file://{store}"},
                        says='"reason": "Planned"', module="ccsweep_operator.planworker", stdin=json.dumps(request))
    finally:
        shutil.rmtree(store, ignore_errors=True)


#: Per step: its arguments, the exit codes it may end with, and what it must print.
Commands = dict[str, tuple[list[str], tuple[int, ...], str]]


def measure_each(commands: Commands, reps: int, env: dict[str, str], steps: dict[str, Step], done) -> None:
    """Run every command `reps` times over, one of each in turn; `done(rep)` after each round."""
    for rep in range(reps):
        for name, (args, ok, says) in commands.items():
            steps[name].add(measured(args, env, ok, says))
        done(rep + 1)


def report(results: dict[str, dict[int, dict[str, Step]]], sizes: list[int], reps: int, command: str,
           before: str | None, started: str, repetitions: int = REPETITIONS) -> str:
    lines = [f"# Peak memory of a sweep's steps at {', '.join(f'{n:,}' for n in sizes)} cells", "",
             f"Run {started} UTC on {machine()}.", "",
             f"Command: `{command}`", "",
             "Each cell is the peak resident set (VmHWM, read by the process as it exits) of the step's command, "
             "median of "
             f"{reps} runs (range in brackets), then its median wall time. Sweeps are planned for real; "
             "results are fake records stored for every cell but the last chunk's (a quarter of a one-chunk "
             "sweep); no flow runs. `run` is the local executor over the planned sweep before any result is "
             f"stored, refusing every cell (--cpu-budget {REFUSING_CPU_BUDGET}). The store "
             f"is a file store on tmpfs, so disk speed does not enter the times. Each setting has {repetitions} "
             "runs. The adaptive rows plan the same "
             f"cells with adaptive repetitions (min {ADAPTIVE_MIN}, max {repetitions} a setting), which every step "
             "judges whole before anything else; `run, adaptive` is the local executor refusing every cell to run "
             f"(--cpu-budget {REFUSING_CPU_BUDGET}), so it judges and counts and starts no flow. The operator rows "
             "are its planning child planning the sweep as a new Sweep (nothing stored), with their peak address "
             "space, which the child's bound (operator.plan.memoryMiB) limits.", ""]
    for code, by_size in results.items():
        title = "this ccsweep" if code == "now" else f"the code before ({before})"
        lines += [f"## {title}", "", "| step | " + " | ".join(f"{n:,} cells" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        for step in (step for step in ALL_STEPS if any(by_size[n][step].peaks_mb for n in sizes)):
            lines.append(f"| {step} | " + " | ".join(by_size[n][step].text(step in OPERATOR_STEPS) for n in sizes)
                         + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="400,4000,40000", help="sweep sizes in cells (multiples of 40)")
    parser.add_argument("--reps", type=int, default=3, help="runs of every step at every size")
    parser.add_argument("--repetitions", type=int, default=REPETITIONS,
                        help="runs a setting in the sweeps' grid (the cells are sizes / this many settings)")
    parser.add_argument("--step", action="append", choices=ALL_STEPS, metavar="STEP",
                        help="a step to measure, e.g. --step figures (repeat for more; default: every one)")
    parser.add_argument("--before", type=Path, help="a source tree of an earlier ccsweep to run the same steps with")
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                        help="where the stores go (default: /dev/shm)")
    parser.add_argument("--out", type=Path, help="write the report here (else print it)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    repetitions = args.repetitions
    if not 1 <= repetitions <= 100:
        parser.error(f"--repetitions: from 1 to 100 (a spec's bound); got {repetitions}")
    if any(n % (2 * repetitions) or n < 2 * repetitions for n in sizes):
        parser.error(f"--sizes: each a multiple of {2 * repetitions} (2 algorithms x {repetitions} runs)")
    steps = tuple(args.step or ALL_STEPS)
    if repetitions < ADAPTIVE_MIN and any(step in ADAPTIVE_STEPS for step in steps):
        parser.error(f"--repetitions: the adaptive steps need at least {ADAPTIVE_MIN} (the rule's min)")
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    codes = {"now": str(REPO / "src")} | ({"before": str(args.before.resolve() / "src")} if args.before else {})
    results: dict[str, dict[int, dict[str, Step]]] = {code: {} for code in codes}
    with tempfile.TemporaryDirectory(prefix="ccsweep-memory-", dir=args.workdir) as scratch:
        for cells in sizes:
            for code, src in codes.items():
                env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(src).parent / 'operator'}",
                       "MPLBACKEND": "Agg"}
                print(f"{cells:,} cells with {code}'s code", file=sys.stderr, flush=True)
                results[code][cells] = run_size(cells, args.reps, Path(scratch), code, env,
                                                lambda line: print(line, file=sys.stderr, flush=True), steps,
                                                repetitions)
    command = "python -m benchmarks.memory.bench" + (f" --sizes {args.sizes}" if args.sizes != "400,4000,40000"
                                                      else "") + (f" --reps {args.reps}" if args.reps != 3 else "") + (
        f" --repetitions {repetitions}" if repetitions != REPETITIONS else "") + (
        "".join(f" --step '{step}'" for step in args.step or ())) + (
        " --before OLD" if args.before else "")
    text = report(results, sizes, args.reps, command, str(args.before) if args.before else None, started,
                  repetitions)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(json.dumps({code: {n: {s: v.peaks_mb for s, v in by.items()} for n, by in r.items()}
                      for code, r in results.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
