"""Adaptive repetitions against a fixed 10 runs per cell: cell-seconds spent and the widest interval left.

    sudo python -m benchmarks.adaptive.bench --store /tmp/adaptive-store            # measure, then report
    python -m benchmarks.adaptive.bench --store /tmp/adaptive-store --report-only   # report what is stored

Measures Figure 8's path (100 Mbit/s, 100 ms, infinite queue) on both links for the cells of
fixed.yaml / adaptive.yaml (30 s flows), or with --full for Figure 8's whole grid as the figure8
preset defines it (BBR and CUBIC at every loss rate of sweeps/figure8.yaml, 60 s flows: 26 cells
a link, sweeps named figure8-full-fixed, ...; the same cells as figure8's and figure8-seeds', so a
store holding the study's runs lends them).
Four `ccsweep run`s share one store, per link (ccsweep-link, then `--link mahimahi`, whose sweeps
are named NAME-mahimahi): `fixed.yaml` (10 runs of each cell) and `adaptive.yaml` ({min: 3,
max: 20, target: {ci_relative: 0.05}}), whose run i is the same cell as the fixed run i, so
whichever runs second runs only what the first did not.  Every run is measured once.  Each rule
is then judged on those runs: the fixed rule takes runs 0-9; the adaptive rule is replayed as a
fresh run would have applied it (3 runs, judge, more where the interval is too wide, judge
again...), taking runs in index order.  A rule's cost is the wall time, start to stored result,
of the runs it takes.

Mahimahi's mm-* binaries are found as cells find them ($CCSWEEP_MAHIMAHI, <repo>/bin, PATH; `make
mahimahi` builds them).  Writes benchmarks/results/<date>-adaptive-figure8.md and, beside it,
`ccsweep compare` of the two links (-compare.csv and -compare.txt).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from ccsweep.adaptive import judge, point_of, target_met
from ccsweep.cell import Cell
from ccsweep.figures.report import cell_seconds
from ccsweep.plan import planned_cells, stored_manifest
from ccsweep.results.points import cell_summary
from ccsweep.spec import AdaptiveRepetitions
from ccsweep.specload import parse_spec
from ccsweep.stats import Interval, collapsed_fraction, median_ci
from ccsweep.store import ResultStore, open_store

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXED_RUNS = 10
#: --full's adaptive rule: adaptive.yaml's, with an absolute floor for cells that deliver almost nothing.
FULL_ADAPTIVE = {"min": 3, "max": 20, "target": {"ci_relative": 0.05, "ci_absolute_mbps": 1.0}}


@dataclass
class Rule:
    """What a rule took of one setting: its runs' values and wall seconds, and why it stopped."""

    values: list[float]
    seconds: list[float]
    stopped: str

    @functools.cached_property
    def interval(self) -> Interval:
        """The runs' median and its bootstrap interval (computed once: the row and the tally read it)."""
        return median_ci(self.values)


def runs_of(store: ResultStore, sweep: str) -> dict[str, list[tuple[int, float, float]]]:
    """Per setting (experiment, parameters but seed and repetition): (repetition, goodput, wall s) stored."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    for cell in planned_cells(store, sweep):
        result = store.get_result(cell.id)
        if result is None or result.goodput_mbps is None:
            continue
        seconds = cell_seconds(result)
        out.setdefault(point_of(cell), []).append((cell.params.repetition, result.goodput_mbps, seconds or 0.0))
    return {k: sorted(v) for k, v in out.items()}


def contiguous(runs: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """The runs 0, 1, 2, ... up to the first one missing: what a rule taking runs in order can use."""
    out = []
    for i, run in enumerate(runs):
        if run[0] != i:
            break
        out.append(run)
    return out


def fixed(runs: list[tuple[int, float, float]]) -> Rule:
    taken = contiguous(runs)[:FIXED_RUNS]
    return Rule([v for _, v, _ in taken], [s for _, _, s in taken],
                f"{len(taken)} runs" + ("" if len(taken) == FIXED_RUNS else f" of {FIXED_RUNS} (rest not stored)"))


def adaptive(runs: list[tuple[int, float, float]], rule: AdaptiveRepetitions) -> Rule:
    """The rule replayed on the stored runs in index order, as a fresh adaptive run would take them."""
    available = contiguous(runs)
    n = rule.min
    while True:
        taken = available[:n]
        if len(taken) < n:
            return Rule([v for _, v, _ in taken], [s for _, _, s in taken],
                        f"incomplete: wanted {n} runs, {len(taken)} stored")
        wanted, state, _ = judge(rule, [v for _, v, _ in taken])
        if state in ("target met", "max reached"):
            return Rule([v for _, v, _ in taken], [s for _, _, s in taken], state)
        n = wanted


#: The `ccsweep run`s, in order: each link's fixed and adaptive sweeps (sharing their cells).
RUNS = (["fixed.yaml"], ["adaptive.yaml"], ["fixed.yaml", "--link", "mahimahi"],
        ["adaptive.yaml", "--link", "mahimahi"])
LINKS = {"ccsweep-link": "", "mahimahi": "-mahimahi"}


def specs(full: bool, folder: Path) -> Path:
    """The folder holding fixed.yaml and adaptive.yaml: this one, or for --full Figure 8's own cells.

    --full takes sweeps/figure8.yaml's experiment as it is (60 s flows, ReBBR's buffers, seed 1 + i),
    changing only its repetitions, so its runs are the same cells as the figure8 and figure8-seeds
    presets' (same ids): in a store that holds those, they count and do not run again. Its adaptive
    rule adds a floor of 1 Mbit/s (1 % of the link rate) to the relative target, or the collapsed
    cells, whose median is near 0, could never meet a relative one.
    """
    if not full:
        return HERE
    figure8 = yaml.safe_load((REPO / "sweeps" / "figure8.yaml").read_text())["experiments"][0]
    for name, repetitions in (("fixed.yaml", FIXED_RUNS), ("adaptive.yaml", FULL_ADAPTIVE)):
        spec = {"name": f"figure8-full-{name.removesuffix('.yaml')}",
                "experiments": [{**figure8, "published": [], "repetitions": repetitions}]}
        (folder / name).write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def run(store_url: str, folder: Path) -> dict[str, str]:
    """The `ccsweep run`s one after the other; the load before and after."""
    ccsweep = str(REPO / ".venv" / "bin" / "ccsweep")
    meta = {"load": "load average (1, 5, 15 min) before the runs " + " ".join(f"{x:.1f}" for x in os.getloadavg())}
    for spec, *extra in RUNS:
        command = [ccsweep, "run", str(folder / spec), *extra, "--store", store_url, "--no-figures"]
        print("+", " ".join(command), flush=True)
        subprocess.run(command, check=False)
    meta["load"] += ", after " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    return meta


def span_s(store: ResultStore, prefix: str) -> float:
    """First start to last finish over every stored run of the sweeps."""
    sweeps = [s for s in store.list_sweeps() if s.startswith(f"{prefix}-fixed") or s.startswith(f"{prefix}-adaptive")]
    stamps = [(r.started_at, r.finished_at) for sweep in sweeps
              for c in planned_cells(store, sweep) if (r := store.get_result(c.id)) is not None]
    if not stamps:
        return 0.0
    start = min(datetime.fromisoformat(a) for a, _ in stamps)
    return (max(datetime.fromisoformat(b) for _, b in stamps) - start).total_seconds()


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{model}, {os.cpu_count()} cores, Linux {platform.release()}"


@dataclass
class Tally:
    """What the report sums over every cell: each rule's cell-seconds and widest interval left,
    and the cells by why the adaptive rule stopped."""

    totals: dict[str, float] = field(default_factory=lambda: {"fixed": 0.0, "adaptive": 0.0})
    widest: dict[str, tuple[float, str]] = field(default_factory=lambda: {"fixed": (0.0, ""), "adaptive": (0.0, "")})
    stops: dict[str, list[str]] = field(default_factory=dict)
    #: Per rule, the cells whose interval is still wider than the adaptive rule's target.
    unsettled: dict[str, list[str]] = field(default_factory=lambda: {"fixed": [], "adaptive": []})


def report(store_url: str, meta: dict[str, str], prefix: str, full: bool) -> str:
    """The Markdown result: the header, one row per cell and link, and the totals."""
    store = open_store(store_url)
    spec = parse_spec(stored_manifest(store, f"{prefix}-adaptive").spec)
    rule = spec.experiments[0].adaptive
    assert rule is not None
    tally = Tally()
    stored_sweeps = set(store.list_sweeps())
    rows: list[str] = []
    for link, suffix in LINKS.items():
        sweeps = [name for name in (f"{prefix}-fixed{suffix}", f"{prefix}-adaptive{suffix}") if name in stored_sweeps]
        if not sweeps:
            rows.append(f"| {link}: not run | " + " | ".join(["–"] * 12) + " |")
            continue
        rows += link_rows(store, link, sweeps, rule, tally)
    return "\n".join(header(store, meta, prefix, rule, full) + rows + footer(tally, full))


def link_rows(store: ResultStore, link: str, sweeps: list[str], rule: AdaptiveRepetitions, tally: Tally) -> list[str]:
    """One row per setting of a link's sweeps: both rules replayed on its stored runs; adds to `tally`."""
    runs: dict[str, list[tuple[int, float, float]]] = {}
    points: dict[str, Cell] = {}
    for name in sweeps:  # one setting's runs, whichever of the two sweeps stored them
        for key, more in runs_of(store, name).items():
            runs[key] = sorted(set(runs.get(key, [])) | set(more))
        points |= {point_of(c): c for c in planned_cells(store, name)}
    rows = []
    for key, cell in points.items():
        point_runs = runs.get(key, [])
        rules = {"fixed": fixed(point_runs), "adaptive": adaptive(point_runs, rule)}
        setting = cell_summary(cell.params, repetition=False).split(", 100 ms")[0]
        tally.stops.setdefault(rules["adaptive"].stopped, []).append(
            f"{setting} on {link} ({len(rules['adaptive'].values)} runs)")
        label = f"{link}: {setting}"
        for name, taken in rules.items():
            if not (taken.values and target_met(rule.target, taken.interval)):
                tally.unsettled[name].append(label)
        cols = [rule_columns(name, taken, cell, label, tally) for name, taken in rules.items()]
        rows.append(f"| {label} | " + " | ".join(cols) + " |")
    return rows


def rule_columns(name: str, taken: Rule, cell: Cell, label: str, tally: Tally) -> str:
    """One rule's columns of a row (runs, interval, half-width, collapsed, cell-s, stopped); adds to `tally`."""
    interval = taken.interval if taken.values else None
    seconds = sum(taken.seconds)
    tally.totals[name] += seconds
    relative = interval.relative_half_width if interval else float("inf")
    if relative > tally.widest[name][0]:
        tally.widest[name] = (relative, label)
    collapsed = collapsed_fraction(taken.values, cell.params.bandwidth_mbps)
    return (f"{len(taken.values)} | {interval.text() if interval else '–'} | "
            f"{relative * 100:.1f} % | {'–' if collapsed is None else f'{collapsed:.2f}'} | "
            f"{seconds:.0f} | {taken.stopped}")


def what_ran(store: ResultStore, prefix: str, full: bool) -> str:
    """The path, the flows and the cells, read from the fixed sweep's stored spec (both rules' cells)."""
    experiments = parse_spec(stored_manifest(store, f"{prefix}-fixed").spec).experiments
    first = experiments[0]
    queues = ", ".join(q.kind for q in first.queue)
    losses: dict[str, list[float]] = {}
    for experiment in experiments:
        for cc in experiment.cc or []:
            losses.setdefault(cc, []).extend(experiment.loss_percent or [])
    cells = sum(len(v) for v in losses.values())
    grid = "; ".join(f"{cc.upper()} at {', '.join(f'{x:g}' for x in sorted(v))} % loss" for cc, v in losses.items())
    path = (f"{'/'.join(f'{b:g}' for b in first.bandwidth_mbps or [])} Mbit/s, "
            f"{'/'.join(f'{r:g}' for r in first.rtt_ms)} ms RTT, {queues} queue, {first.duration_s:g} s flows "
            f"({first.warmup_s or 0:g} s warm-up), seeds {first.seed} + i; on ccsweep-link and on upstream Mahimahi")
    if full:
        return (f"What ran: Figure 8's whole grid as sweeps/figure8.yaml defines it ({cells} cells a link: {grid}), "
                f"{path}, ReBBR's socket buffers. Its cells are the figure8 and figure8-seeds presets' (same "
                "ids): runs those had stored in the store were counted, not run again.")
    return (f"What ran: {cells} cells of Figure 8's grid a link ({grid}), {path}. Not the whole Figure 8: "
            "`--full` runs that.")


def header(store: ResultStore, meta: dict[str, str], prefix: str, rule: AdaptiveRepetitions, full: bool) -> list[str]:
    """The title, the machine and load, the command, what ran, the rules and the table's head."""
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    what = "Figure 8" if full else "Figure 8's path"
    target = f"ci_relative: {rule.target.ci_relative:g}" + (
        f", ci_absolute_mbps: {rule.target.ci_absolute_mbps:g}" if rule.target.ci_absolute_mbps else "")
    floor = (f" and above {rule.target.ci_absolute_mbps:g} Mbit/s (a floor for cells that deliver almost nothing)"
             if rule.target.ci_absolute_mbps else "")
    return [
        f"# Adaptive repetitions against a fixed 10 runs: {what} on both links ({date})",
        "",
        f"Machine: {machine()}. Load: {meta['load']}; the runs' records span "
        f"{span_s(store, prefix):.0f} s of wall time, first start to last stored result"
        f"{' (runs stored earlier, by the presets, included)' if full else ''}. Cell-seconds are wall "
        "time, so they include any waiting for CPU. Each run was measured once and serves both rules, so the "
        "rules' costs share their runs' conditions"
        f"{'; runs the presets had stored were measured in other hours than the rest' if full else ''}.",
        "",
        f"Command: `sudo python -m benchmarks.adaptive.bench --store STORE{' --full' if full else ''}` "
        f"(`make bench-adaptive{' FULL=1' if full else ''} STORE=STORE`; four `ccsweep run`s of a fixed and an "
        "adaptive spec, on ccsweep-link and with `--link mahimahi`; then this report; `--report-only` rebuilds "
        "the report from the store).",
        "",
        what_ran(store, prefix, full),
        "",
        *[f"Note: {note}" for note in [meta.get("note")] if note],
        "",
        f"Rules: fixed, {FIXED_RUNS} runs per cell; adaptive, `repetitions: {{min: {rule.min}, max: {rule.max}, "
        f"target: {{{target}}}}}`: after each round, a cell whose 95 % bootstrap CI of the median goodput has a "
        f"half-width above {rule.target.ci_relative * 100:g} % of the median{floor} gets more runs, up to "
        f"{rule.max}. Each run was measured once, in one store shared by both rules' sweeps (run i is the same "
        "cell under either rule): whichever sweep ran second ran only the runs the first had not stored. The "
        "adaptive rule's columns replay it from scratch on the stored runs, in index order (3 runs, judge, "
        "more...), as a fresh adaptive run would have taken them; its cost is the wall time of the runs it takes.",
        "",
        "Interval: 95 % percentile-bootstrap CI of the median goodput (Mbit/s), n = the runs column; half-width "
        "as % of the median; collapsed: fraction of runs below 5 % of the link rate (5 Mbit/s); cell-seconds: "
        "the runs' wall time, start to stored result.",
        "",
        "| cell | fixed: runs | median [95 % CI] | half-width | collapsed | cell-s | stopped "
        "| adaptive: runs | median [95 % CI] | half-width | collapsed | cell-s | stopped |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]


def footer(tally: Tally, full: bool) -> list[str]:
    """The totals, the widest intervals left, why the adaptive rule stopped, and how to read it."""
    totals, widest = tally.totals, tally.widest
    cells_judged = sum(map(len, tally.stops.values()))  # every cell has one reason to stop
    ratio = totals["adaptive"] / totals["fixed"] if totals["fixed"] else float("nan")
    return [
        "",
        f"Total cell-seconds: fixed {totals['fixed']:.0f}, adaptive {totals['adaptive']:.0f} "
        f"(adaptive / fixed = {ratio:.2f}).",
        f"Widest interval left, relative to its median: fixed {widest['fixed'][0] * 100:.1f} % "
        f"({widest['fixed'][1]}); adaptive {widest['adaptive'][0] * 100:.1f} % ({widest['adaptive'][1]}) (a cell "
        "that delivers almost nothing can be wide relative to its median and still meet an absolute target).",
        *[f"Cells whose interval is still wider than the adaptive rule's target, {name}: "
          f"{len(cells)} of {cells_judged}" + (f" ({'; '.join(cells)})." if cells else ".")
          for name, cells in tally.unsettled.items()],
        "",
        *[f"Adaptive rule, {state}: {'; '.join(cells)}." for state, cells in sorted(tally.stops.items())],
        "",
        "Reading: a cell whose runs agree meets the target at the minimum and costs 3 runs instead of 10; a cell "
        "whose median does not settle to the target within the maximum (a bimodal one cannot: its median's "
        "interval spans the gap between the modes until many runs pin it) costs 20 instead of 10 and still "
        "leaves an interval wider than the target. In run counts the adaptive rule is therefore the cheaper one where "
        "calm cells outnumber wide ones by more than 10 to 7"
        + (": the totals above say which the whole Figure 8 grid is on this kernel." if full else
           "; the share of wide cells in the whole Figure 8 grid on this kernel is what `--full` measures."),
        "",
    ]


def compare_links(store_url: str, out: Path, prefix: str) -> None:
    """`ccsweep compare` of the adaptive sweep's two links, as a CSV and the terminal table beside the report."""
    command = [str(REPO / ".venv" / "bin" / "ccsweep"), "compare", f"{prefix}-adaptive",
               f"{prefix}-adaptive-mahimahi", "--ignore", "link", "--store", store_url,
               "--csv", str(out.with_name(out.stem + "-compare.csv"))]
    shown = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "150"})
    if shown.returncode:
        print(f"compare of the links not written: {shown.stderr.strip()}", file=sys.stderr)
        return
    text = shown.stdout.replace(str(out.with_name(out.stem + "-compare.csv")), out.stem + "-compare.csv")
    out.with_name(out.stem + "-compare.txt").write_text(
        f"$ ccsweep compare {prefix}-adaptive {prefix}-adaptive-mahimahi --ignore link "
        f"--store STORE --csv {out.stem}-compare.csv\n{text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store both runs share (a folder or URL)")
    parser.add_argument("--full", action="store_true", help="Figure 8's whole grid instead of fixed.yaml's 3 cells")
    parser.add_argument("--report-only", action="store_true", help="only report what the store holds")
    parser.add_argument("--out", type=Path,
                        help="the Markdown result (default benchmarks/results/DATE-adaptive-figure8[-full].md)")
    parser.add_argument("--load", help="with --report-only: the load averages during the runs, as measured")
    parser.add_argument("--note", help="a sentence for the result: what ran other than the command says")
    args = parser.parse_args()
    prefix = "figure8-full" if args.full else "figure8"
    meta: dict[str, str] = {"load": args.load or "not measured", "note": args.note or ""}
    if not args.report_only:
        if os.geteuid() != 0:
            sys.exit("run as root (network namespaces and TUN devices)")
        with tempfile.TemporaryDirectory() as folder:
            meta = run(args.store, specs(args.full, Path(folder)))
    out = args.out or REPO / "benchmarks" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-adaptive-{prefix}.md"
    out.write_text(report(args.store, meta, prefix, args.full))
    compare_links(args.store, out, prefix)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
