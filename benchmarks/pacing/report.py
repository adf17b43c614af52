"""The quoted numbers of the rebbr-pacing result's README, from its committed cell tables alone.

    python -m benchmarks.pacing.report          # rewrite the numbers between the markers
    python -m benchmarks.pacing.report --check  # exit 1 if the README differs from its data

benchmarks/results/2026-11-29-rebbr-pacing/ holds one `ccsweep export` cell table per link
(`rebbr-pacing-cells.csv`, `rebbr-pacing-mahimahi-cells.csv`): one row per stored run. From them:
where each curve drops (`ccsweep.results.cliff`, on steady-state goodput, the quantity of ReBBR's
"BBR holds" claim) below half the payload-rate ideal (ReBBR's reading of "holds") and below a
tenth of it (where it has collapsed), ReBBR's own curve read the same way, the main experiment's
medians beside ReBBR's published Figure 8 BBR, and each candidate experiment against the main one
on the same loss rates, with its verdict. A curve with a loss rate not yet run has no cliff: it is
listed with what it lacks.
`benchmarks.quoted` puts each value between its `<!-- value: NAME -->` markers.
"""

from __future__ import annotations

import csv
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from benchmarks.cluster.argo_vs_local import read_cells, spans
from benchmarks.quoted import block, regenerate_main
from ccsweep.checks.source_claims import REBBR_RATE_MBPS
from ccsweep.expand import expand
from ccsweep.results.cliff import HALF, Cliff, find_cliff
from ccsweep.results.published_sets import SETS, load
from ccsweep.results.study import occupancy
from ccsweep.specload import load_spec

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-29-rebbr-pacing"
README = FOLDER / "README.md"
#: The cell table of each link, and the link's name in the tables.
TABLES = {"ccsweep-link": "rebbr-pacing-cells.csv", "mahimahi": "rebbr-pacing-mahimahi-cells.csv"}
ALGORITHMS = ("bbr", "bbr_bpf", "bbr_unpaced")
MAIN = "pacing"
#: Below a tenth of the payload-rate ideal a curve has collapsed: BBR paced on this kernel is there
#: from 20-25 %, and the question is where the unpaced one gets there.
COLLAPSE = 0.1

Row = dict[str, str]
#: (experiment, algorithm) -> loss -> the runs' steady-state goodputs.
Curves = dict[tuple[str, str], dict[float, list[float]]]


def read_rows(link: str) -> list[Row]:
    """The link's stored runs (status ok); none while its table is not committed yet."""
    path = FOLDER / TABLES[link]
    return read_cells(path) if path.exists() else []


def grids() -> dict[str, list[float]]:
    """Each experiment's loss rates (fractions), from the preset itself."""
    out: dict[str, set[float]] = defaultdict(set)
    for cell in expand(load_spec("rebbr-pacing")):
        out[cell.experiment].add(cell.params.loss)
    return {name: sorted(losses) for name, losses in out.items()}


def curves(rows: list[Row]) -> Curves:
    """Each curve's runs, by experiment and algorithm, then loss."""
    out: Curves = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for experiment in row["experiments"].split(";"):
            out[experiment, row["cc"]][float(row["loss"])].append(float(row["goodput_steady_mbps"]))
    return out


def cliff_or_gap(by_loss: dict[float, list[float]], losses: list[float], share: float) -> Cliff | str:
    """The curve's cliff at `share` of the ideal over `losses`, or what it lacks to have one."""
    missing = [loss for loss in losses if not by_loss.get(loss)]
    if missing:
        return f"not yet: no run at {', '.join(f'{m * 100:g}' for m in missing)} %"
    return read_cliff(by_loss, losses, share)


def cliff_text(by_loss: dict[float, list[float]], losses: list[float], share: float) -> str:
    """The curve's cliff as a table prints it, or what it lacks to have one."""
    cliff = cliff_or_gap(by_loss, losses, share)
    return cliff.describe() if isinstance(cliff, Cliff) else cliff


def moved_verdict(pairs: list[tuple[Cliff, Cliff]]) -> str:
    """The verdict on a pair of curves from their (half, tenth) cliffs: a cliff moves where the two
    intervals share no loss rate."""
    moved = [name for name, (a, b) in zip(("half", "tenth"), pairs, strict=True) if not a.overlaps(b)]
    return f"moves the cliff ({' and '.join(moved)})" if moved else "does not move the cliff"


def read_cliff(by_loss: dict[float, list[float]], losses: list[float], share: float) -> Cliff:
    return find_cliff({loss: by_loss[loss] for loss in losses}, REBBR_RATE_MBPS, share)


def runs_span(by_loss: dict[float, list[float]], losses: list[float]) -> str:
    runs = [len(by_loss[loss]) for loss in losses if by_loss.get(loss)]
    return f"{min(runs)}-{max(runs)}" if min(runs) != max(runs) else str(min(runs))


def shared_with_main(found: Curves, experiment: str, cc: str, losses: list[float]) -> bool:
    """Whether a candidate's runs are the main experiment's own: on a link that cannot vary what the
    candidate varies (Mahimahi moves single packets anyway), its cells are the main ones."""
    main, candidate = found.get((MAIN, cc), {}), found.get((experiment, cc), {})
    return experiment != MAIN and all(candidate.get(loss) == main.get(loss) for loss in losses)


def cliff_lines(by_link: dict[str, Curves], grid: dict[str, list[float]]) -> list[str]:
    lines = ["| experiment | algorithm | link | runs a cell | below half the ideal at [95 % CI] "
             "| below a tenth at [95 % CI] |", "|---|---|---|---|---|---|"]
    for link, found in by_link.items():
        for (experiment, cc), by_loss in sorted(found.items(), key=lambda item: (list(grid).index(item[0][0]),
                                                                               ALGORITHMS.index(item[0][1]))):
            losses = grid[experiment]
            if shared_with_main(found, experiment, cc, losses):
                continue
            lines.append(f"| {experiment} | {cc} | {link} | {runs_span(by_loss, losses)} "
                         f"| {cliff_text(by_loss, losses, HALF)} | {cliff_text(by_loss, losses, COLLAPSE)} |")
    rebbr = {loss: [goodput] for loss, goodput in rebbr_bbr().items()}
    lines.append(f"| ReBBR's Figure 8 | bbr (Linux 4.11.1) | Mahimahi | 1 | {cliff_text(rebbr, grid[MAIN], HALF)} "
                 f"| {cliff_text(rebbr, grid[MAIN], COLLAPSE)} |")
    return lines


def rebbr_bbr() -> dict[float, float]:
    """ReBBR's published BBR by loss rate (bottleneck throughput, one run a cell)."""
    return {round(r.loss_rate, 9): r.goodput_Mbps for r in load(SETS["rebbr-figure8"]) if r.congestion_control == "bbr"}


def candidate_lines(by_link: dict[str, Curves], grid: dict[str, list[float]]) -> list[str]:
    """Each candidate experiment against the main one on the candidate's loss rates: medians, both
    cliffs, and the verdict (it moves a cliff when their intervals share no loss rate)."""
    lines = ["| candidate | algorithm | link | medians, main → candidate (Mbit/s) | half the ideal, main → candidate "
             "| a tenth, main → candidate | verdict |", "|---|---|---|---|---|---|---|"]
    for link, found in by_link.items():
        for experiment in [name for name in grid if name != MAIN]:
            losses = grid[experiment]
            for cc in ALGORITHMS:
                main, candidate = found.get((MAIN, cc), {}), found.get((experiment, cc), {})
                if not candidate or shared_with_main(found, experiment, cc, losses):
                    continue
                medians = ", ".join(
                    f"{loss * 100:g} %: {_median(main.get(loss))} → {_median(candidate.get(loss))}" for loss in losses)
                if any(not main.get(loss) or not candidate.get(loss) for loss in losses):
                    lines.append(f"| {experiment} | {cc} | {link} | {medians} | – | – | not yet: runs missing |")
                    continue
                pairs = [(read_cliff(main, losses, share), read_cliff(candidate, losses, share))
                         for share in (HALF, COLLAPSE)]
                shown = [f"{a.where()} → {b.where()}" for a, b in pairs]
                lines.append(f"| {experiment} | {cc} | {link} | {medians} | {shown[0]} | {shown[1]} "
                             f"| {moved_verdict(pairs)} |")
    return lines


def _median(runs: list[float] | None) -> str:
    return f"{statistics.median(runs):.3g}" if runs else "–"


def median_lines(by_link: dict[str, Curves], grid: dict[str, list[float]]) -> list[str]:
    """The main experiment's median steady-state goodput per loss, algorithm and link, and ReBBR's."""
    rebbr = rebbr_bbr()
    columns = [(link, cc) for link in TABLES for cc in ALGORITHMS]
    lines = ["| loss % | " + " | ".join(f"{cc}, {link}" for link, cc in columns) + " | ReBBR, Linux 4.11.1 |",
             "|---" * (len(columns) + 2) + "|"]
    for loss in grid[MAIN]:
        cells = []
        for link, cc in columns:
            runs = by_link[link].get((MAIN, cc), {}).get(loss, [])
            cells.append(f"{statistics.median(runs):.3g} ({len(runs)})" if runs else "–")
        lines.append(f"| {loss * 100:g} | " + " | ".join(cells) + f" | {rebbr[round(loss, 9)]:.3g} |")
    return lines


#: The receive-window check (benchmarks/pacing/rwnd.yaml): bbr_unpaced on the main grid's loss
#: rates with socket buffers four times ReBBR's, exported beside the main tables.
RWND_TABLE = "pacing-rwnd-cells.csv"


def rwnd_lines(main_rows: list[Row]) -> list[str]:
    """bbr_unpaced with ReBBR's socket buffers (the main experiment on ccsweep-link) beside the same
    cells with four times them: median steady-state goodput and the median share of busy time the
    receive window limited the flow (tcp_info's rwnd_limited), per loss rate of the check."""
    bigger = read_cells(FOLDER / RWND_TABLE)
    rebbr = rebbr_bbr()

    def runs(rows: list[Row], loss: float) -> list[Row]:
        return [r for r in rows if r["cc"] == "bbr_unpaced" and float(r["loss"]) == loss]

    def medians(rows: list[Row]) -> str:
        if not rows:
            return "– | –"
        goodput = statistics.median(float(r["goodput_steady_mbps"]) for r in rows)
        limited = statistics.median(float(r["rwnd_limited_fraction"]) for r in rows)
        return f"{goodput:.3g} ({len(rows)}) | {limited * 100:.0f} %"

    def bottleneck(rows: list[Row]) -> str:
        return f"{statistics.median(float(r['bottleneck_throughput_mbps']) for r in rows):.3g}" if rows else "–"

    main = [r for r in main_rows if MAIN in r["experiments"].split(";")]
    lines = ["| loss % | ReBBR's buffers: goodput (runs) | rwnd-limited | four times them: goodput (runs) "
             "| rwnd-limited | four times them: bottleneck throughput | ReBBR, Linux 4.11.1 (bottleneck throughput) |",
             "|---|---|---|---|---|---|---|"]
    for loss in sorted({float(r["loss"]) for r in bigger}):
        lines.append(f"| {loss * 100:g} | {medians(runs(main, loss))} | {medians(runs(bigger, loss))} "
                     f"| {bottleneck(runs(bigger, loss))} | {rebbr[round(loss, 9)]:.3g} |")
    return lines


def busy_min(rows: list[Row]) -> str:
    """Minutes with at least one run going (the records' own start and end times): the pauses
    between sittings of a resumed run are not counted."""
    return f"{occupancy(spans(rows)).busy_s / 60:.0f}" if rows else "0"


#: The `ccsweep compare --csv` tables committed beside the cell tables: what each sets side by side,
#: on which link, and its file. A table not committed yet (its runs not made) is left out.
COMPARISONS = [
    (title, link, f"{stem}{suffix}.csv")
    for title, stem in (("bbr against bbr_bpf (the BPF path)", "compare-bbr-vs-bbr_bpf"),
                        ("bbr_bpf against bbr_unpaced (pacing)", "compare-bbr_bpf-vs-bbr_unpaced"),
                        ("bbr against ReBBR", "compare-bbr-vs-rebbr"),
                        ("bbr_bpf against ReBBR", "compare-bbr_bpf-vs-rebbr"),
                        ("bbr_unpaced against ReBBR", "compare-bbr_unpaced-vs-rebbr"))
    for link, suffix in (("ccsweep-link", ""), ("mahimahi", "-mahimahi"))
] + [("bbr_unpaced, ccsweep-link against Mahimahi", "both", "compare-bbr_unpaced-links.csv")]


def compare_lines() -> list[str]:
    """Each committed comparison of the main experiment: its per-cell verdicts, and across cells the
    median of the per-cell differences and the Wilcoxon signed-rank p (as compare prints them)."""
    lines = ["| comparison | link | cells: agree / differ / not settled | median of per-cell differences, A − B "
             "(Mbit/s) | A below B in | Wilcoxon p |", "|---|---|---|---|---|---|"]
    for title, link, name in COMPARISONS:
        path = FOLDER / name
        if not path.exists():
            continue
        with path.open() as handle:
            rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
        verdicts = Counter(row["verdict"] for row in rows)
        diffs = np.array([float(row["median_a"]) - float(row["median_b"]) for row in rows])
        nonzero = diffs[diffs != 0]
        p = float(stats.wilcoxon(nonzero).pvalue) if nonzero.size >= 6 else 1.0
        lines.append(f"| {title} | {link} | {verdicts['agree']} / {verdicts['differ']} / {verdicts['not settled']} "
                     f"| {float(np.median(diffs)):+.3g} | {int(np.sum(diffs < 0))} of {diffs.size} | {p:.2g} |")
    return lines


def main_cliffs(by_link: dict[str, Curves], grid: dict[str, list[float]]) -> dict[str, str]:
    """`pacing.half.CC.LINK` and `pacing.tenth.CC.LINK`: the main experiment's cliffs, as prose
    quotes them ('20 % [20, 25 %]'), for each curve that has every loss rate."""
    out = {}
    for link, found in by_link.items():
        for cc in ALGORITHMS:
            by_loss = found.get((MAIN, cc), {})
            if all(by_loss.get(loss) for loss in grid[MAIN]):
                for name, share in (("half", HALF), ("tenth", COLLAPSE)):
                    out[f"pacing.{name}.{cc}.{link}"] = read_cliff(by_loss, grid[MAIN], share).with_interval()
    return out


def compute() -> dict[str, str]:
    """Every value the README quotes: each link's table read once, the preset expanded once."""
    rows = {link: read_rows(link) for link in TABLES}
    by_link = {link: curves(link_rows) for link, link_rows in rows.items()}
    grid = grids()
    return {
        **main_cliffs(by_link, grid),
        "pacing.link-busy-min": busy_min(rows["ccsweep-link"]),
        "pacing.mm-busy-min": busy_min(rows["mahimahi"]),
        "pacing.runs": ", ".join(f"{len(link_rows)} on {link}" for link, link_rows in rows.items()),
        "pacing.cliffs": block(cliff_lines(by_link, grid)),
        "pacing.medians": block(median_lines(by_link, grid)),
        "pacing.candidates": block(candidate_lines(by_link, grid)),
        "pacing.comparisons": block(compare_lines()),
        "pacing.rwnd": block(rwnd_lines(rows["ccsweep-link"])),
    }


def main() -> None:
    regenerate_main(README, compute, __doc__)


if __name__ == "__main__":
    main()
