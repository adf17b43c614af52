"""The quoted numbers of the full study's results README, and of the READMEs that cite it, from the
committed files alone.

    python -m benchmarks.rebbr.report          # rewrite the numbers between the markers
    python -m benchmarks.rebbr.report --check  # exit 1 if a committed file differs from what its data gives

Every number is computed from what is committed beside the README in
benchmarks/results/2026-11-25-rebbr-full/: each sweep's `cells.csv` (one row per stored record,
with its start and end times), the `compare-*.csv` tables of `ccsweep compare`, the records' build
stamps as each sweep's `report.html` lists them, and ReBBR's published CSVs shipped with the
package. `benchmarks.quoted` puts each between its `<!-- value: NAME -->` markers and leaves the
prose alone. What the committed files cannot give (the attempts that were run again, the machine's
load) the prose marks as coming from elsewhere and names its source.
"""

from __future__ import annotations

import argparse
import csv
import html
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from benchmarks.bursty import report as bursty_report
from benchmarks.cluster import argo_report
from benchmarks.lateness import demo_report
from benchmarks.pacing import report as pacing_report
from benchmarks.quoted import block, fill
from ccsweep.results.study import Occupancy, occupancy

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-25-rebbr-full"
PUBLISHED = REPO / "src/ccsweep/published/rebbr"
#: The files that quote this folder's numbers.
QUOTING = (FOLDER / "README.md", REPO / "README.md", REPO / "docs/experiments.md")
#: Each link's sweeps: the whole study, and Figure 8's chaotic cells with 10 seeds each.
STUDY = {"ccsweep-link": "full-sweep", "mahimahi": "full-sweep-mahimahi"}
SEEDS = {"ccsweep-link": "figure8-seeds", "mahimahi": "figure8-seeds-mahimahi"}
#: A gap this long with no cell running separates two sittings of a resumed run.
SITTING_GAP = timedelta(minutes=20)
#: The cells the CPU table counts: those that ran near the 100 Mbit/s link rate.
NEAR_LINK_RATE_MBPS = 85.0
#: The cross-check's bar (benchmarks/crosscheck): BBR within 5 %, CUBIC within 25 % or 1 Mbit/s.
BBR_BAR, CUBIC_BAR, CUBIC_BAR_MBPS = 0.05, 0.25, 1.0

Row = dict[str, str]


def read_table(path: Path) -> list[Row]:
    """A CSV's rows, skipping `#` comment lines (`ccsweep compare` heads its CSV with them)."""
    with path.open(newline="") as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("#")), skipinitialspace=True))


def cells(sweep: str) -> list[Row]:
    return read_table(FOLDER / sweep / "cells.csv")


def span(row: Row) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(row["started_at"]), datetime.fromisoformat(row["finished_at"])


def flow_hours(rows: Iterable[Row]) -> float:
    """The flows' own length one after another (every record is at time scale 1)."""
    return sum(float(r["duration_s"]) for r in rows) / 3600


def loss_percent(row: Row) -> float:
    return round(float(row["loss"]) * 100, 6)


def pick(rows: Iterable[Row], experiment: str, cc: str, loss: float, **params: float) -> Row:
    """The one record of `experiment` with that algorithm, loss (percent) and parameters."""
    found = [r for r in rows if experiment in r["experiments"].split(";") and r["cc"] == cc
             and loss_percent(r) == loss and all(float(r[k]) == v for k, v in params.items())]
    if len(found) != 1:
        raise LookupError(f"{len(found)} records of {experiment} {cc} {loss} % {params}")
    return found[0]


def throughput(row: Row) -> float:
    return float(row["bottleneck_throughput_mbps"])


def published(name: str) -> dict[tuple[str, float], float]:
    """ReBBR's goodput_Mbps (its bottleneck throughput) per (algorithm, loss percent)."""
    return {(r["congestion_control"], round(float(r["loss_rate"]) * 100, 6)): float(r["goodput_Mbps"])
            for r in read_table(PUBLISHED / name)}


def compare_rows(name: str) -> dict[tuple[str, float], Row]:
    return {(r["cc"], float(r["loss_percent"])): r for r in read_table(FOLDER / name)}


def record_commits(sweep: str) -> dict[str, int]:
    """The records' `ccsweep_commit` stamps and how many records carry each, as the sweep's report lists them."""
    text = (FOLDER / sweep / "report.html").read_text()
    section = text[text.index('id="environment"'):]
    section = section[:section.index("</table>")]
    found = re.findall(r"<tr><td>ccsweep_commit</td><td>([^<]*)</td><td class=\"num\">(\d+)</td>", section)
    return {html.unescape(commit): int(n) for commit, n in found}


def g3(value: float) -> str:
    return f"{value:.3g}"


def f1(value: float) -> str:
    return f"{value:.1f}"


def percent(value: float, digits: int = 1) -> str:
    return f"{value * 100:.{digits}f}"


def span_text(values: list[float], fmt: Callable[[float], str]) -> str:
    """low-high, or the one value when they print the same."""
    low, high = fmt(min(values)), fmt(max(values))
    return low if low == high else f"{low}-{high}"


def and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


@dataclass(frozen=True)
class Run:
    """A set of stored records, as one run of the machine."""

    rows: list[Row]

    @property
    def used(self) -> Occupancy:
        return occupancy([span(r) for r in self.rows])

    def sittings(self) -> list[Run]:
        """The records split where no cell ran for SITTING_GAP or longer."""
        ordered = sorted(self.rows, key=lambda r: span(r)[0])
        parts: list[list[Row]] = [[ordered[0]]]
        busy_until = span(ordered[0])[1]
        for row in ordered[1:]:
            start, end = span(row)
            if start - busy_until >= SITTING_GAP:
                parts.append([])
            parts[-1].append(row)
            busy_until = max(busy_until, end)
        return [Run(part) for part in parts]

    def clock(self) -> str:
        """First start to last end, HH:MM:SS UTC."""
        return (f"{min(span(r)[0] for r in self.rows):%H:%M:%S}-"
                f"{max(span(r)[1] for r in self.rows):%H:%M:%S}")


def run_values(prefix: str, run: Run) -> dict[str, str]:
    used = run.used
    hours = flow_hours(run.rows)
    return {f"{prefix}.cells": str(len(run.rows)), f"{prefix}.flow-h": f1(hours),
            f"{prefix}.busy-min": f1(used.busy_s / 60), f"{prefix}.peak": str(used.peak),
            f"{prefix}.mean-at-once": f1(used.mean_at_once), f"{prefix}.speedup": f1(hours * 3600 / used.busy_s)}


def wall_table(runs: list[tuple[str, str, str, Run]]) -> str:
    lines = ["| sweep | link | cells | flow time one after another | busy wall time | cells at once (max, mean) |",
             "|---|---|---:|---:|---:|---:|"]
    for sweep, what, link, run in runs:
        used = run.used
        lines.append(f"| {sweep} ({what}) | {link} | {len(run.rows)} | {f1(flow_hours(run.rows))} h | "
                     f"{f1(used.busy_s / 60)} min | {used.peak}, {f1(used.mean_at_once)} |")
    return block(lines)


def cpu_table(study: dict[str, list[Row]], seeds: dict[str, list[Row]]) -> str:
    """The link's CPU per 100 Mbit/s of bottleneck throughput, over cells near the link rate."""
    def shares(rows: Iterable[Row]) -> list[float]:
        return [float(r["emulator_cpu_share"]) / (throughput(r) / 100) for r in rows
                if throughput(r) > NEAR_LINK_RATE_MBPS and r["emulator_cpu_share"]]

    lines = ["| link | cells | median | range |", "|---|---:|---:|---|"]
    for link, rows in study.items():
        name = link.replace("mahimahi", "Mahimahi")
        for what, chosen in (("full-sweep, 100 ms", [r for r in rows if float(r["rtt_ms"]) == 100]),
                             ("full-sweep, every RTT", rows),
                             ("figure8-seeds: BBR at 0.1 %",
                              [r for r in seeds[link] if r["cc"] == "bbr" and loss_percent(r) == 0.1])):
            values = shares(chosen)
            lines.append(f"| {name} ({what}) | {len(values)} | {statistics.median(values):.3f} | "
                         f"{min(values):.3f}-{max(values):.3f} |")
    return block(lines)


SEEDS_CELLS = (("bbr", 0.1), ("bbr", 10.0), ("bbr", 15.0), ("bbr", 20.0), ("cubic", 0.1))


def seeds_runs(seeds: dict[str, list[Row]], cc: str, loss: float) -> dict[str, list[float]]:
    return {link: sorted(throughput(r) for r in rows if r["cc"] == cc and loss_percent(r) == loss)
            for link, rows in seeds.items()}


def seeds_table(seeds: dict[str, list[Row]]) -> str:
    lines = ["| cell | link | n | runs (bottleneck throughput, Mbit/s, sorted) | median | below 5 Mbit/s |",
             "|---|---|---:|---|---:|---:|"]
    for cc, loss in SEEDS_CELLS:
        for link, runs in seeds_runs(seeds, cc, loss).items():
            lines.append(f"| {cc.upper()}, {loss:g} % | {link.replace('mahimahi', 'Mahimahi')} | {len(runs)} | "
                         f"{', '.join(map(g3, runs))} | {g3(statistics.median(runs))} | "
                         f"{sum(v < 5 for v in runs)} of {len(runs)} |")
    return block(lines)


def seeds30_table() -> str:
    lines = ["| BBR, loss | ccsweep-link: median | Mahimahi: median | difference of medians [95 % CI] | "
             "Mann-Whitney p | runs a side |", "|---|---:|---:|---|---:|---:|"]
    for (_, loss), row in compare_rows("compare-bbr-seeds30.csv").items():
        lines.append(f"| {loss:g} % | {g3(float(row['median_a']))} | {g3(float(row['median_b']))} | "
                     f"{float(row['difference']):.1f} [{float(row['ci_low']):.1f}, {float(row['ci_high']):.1f}] | "
                     f"{float(row['p_mannwhitney']):.2f} | {row['n_a']} and {row['n_b']} |")
    return block(lines)


def commits_text(sweep: str) -> str:
    stamps = sorted(record_commits(sweep).items(), key=lambda item: -item[1])
    return ", ".join(f"{'none recorded' if commit == 'None' else commit[:7]} ({n})" for commit, n in stamps)


def compute() -> dict[str, str]:
    """Every quoted value, by name, from the committed files."""
    study = {link: cells(sweep) for link, sweep in STUDY.items()}
    seeds = {link: cells(sweep) for link, sweep in SEEDS.items()}
    values: dict[str, str] = {}
    for link, short in (("ccsweep-link", "link"), ("mahimahi", "mm")):
        values.update(run_values(short, Run(study[link])))
        in_study = {r["cell_id"] for r in study[link]}
        values.update(run_values(f"{short}.seeds-new", Run([r for r in seeds[link] if r["cell_id"] not in in_study])))
        values[f"{short}.seeds-new.clock"] = Run([r for r in seeds[link] if r["cell_id"] not in in_study]).clock()
        values[f"{short}.seeds-shared"] = str(sum(r["cell_id"] in in_study for r in seeds[link]))
        values[f"{short}.seeds"] = str(len(seeds[link]))
        for experiment in ("figure8", "algorithms", "bandwidth", "rtt", "cellular"):
            values[f"{short}.{experiment}"] = str(sum(experiment in r["experiments"].split(";") for r in study[link]))
        values[f"{short}.shared-bandwidth-algorithms"] = str(
            sum({"bandwidth", "algorithms"} <= set(r["experiments"].split(";")) for r in study[link]))
        values[f"{short}.commits"] = commits_text(STUDY[link])
        values[f"{short}.seeds-commits"] = commits_text(SEEDS[link])
    values["wall-table"] = wall_table([
        ("full-sweep", "the whole study", "ccsweep-link", Run(study["ccsweep-link"])),
        ("figure8-seeds", "its new runs", "ccsweep-link",
         Run([r for r in seeds["ccsweep-link"] if r["cell_id"] not in {c["cell_id"] for c in study["ccsweep-link"]}])),
        ("full-sweep", "the whole study", "Mahimahi", Run(study["mahimahi"])),
        ("figure8-seeds", "its new runs", "Mahimahi",
         Run([r for r in seeds["mahimahi"] if r["cell_id"] not in {c["cell_id"] for c in study["mahimahi"]}]))])
    *_, shared_part, last_part = Run(study["mahimahi"]).sittings()
    for name, part in (("mm.part-shared", shared_part), ("mm.part-last", last_part)):
        values[f"{name}.cells"] = str(len(part.rows))
        values[f"{name}.clock"] = part.clock()
        values[f"{name}.peak"] = str(part.used.peak)
    values["cpu-table"] = cpu_table(study, seeds)
    values.update(figure8_values(study))
    values.update(seeds_values(seeds))
    values.update(experiment_values(study))
    return values


def figure8_values(study: dict[str, list[Row]]) -> dict[str, str]:
    """Figure 8's single runs: the links against each other, against the ideal and against ReBBR."""
    link, mm, rebbr = study["ccsweep-link"], study["mahimahi"], published("figure8.csv")
    values: dict[str, str] = {}

    def pair(cc: str, loss: float) -> tuple[float, float]:
        return throughput(pick(link, "figure8", cc, loss)), throughput(pick(mm, "figure8", cc, loss))

    losses = sorted({loss_percent(r) for r in link if "figure8" in r["experiments"].split(";")})
    apart = {loss: abs(a - b) / b for loss in losses for a, b in [pair("bbr", loss)]}
    values["f8.bbr-apart-to-10"] = span_text([apart[x] for x in losses if x <= 10], lambda v: percent(v))
    values["f8.bbr-apart-15"] = percent(apart[15.0])
    collapsed = [v for x in losses if x >= 20 for v in pair("bbr", x)]
    values["f8.bbr-collapse-range"] = span_text(collapsed, lambda v: f"{v:.2g}")
    held, missed = 0, []
    for cc in ("bbr", "cubic"):
        for loss in (x for x in losses if x <= 5):
            a, b = pair(cc, loss)
            ok = abs(a - b) <= BBR_BAR * b if cc == "bbr" else abs(a - b) <= max(CUBIC_BAR * b, CUBIC_BAR_MBPS)
            held += ok
            if not ok:
                missed.append(f"{cc.upper()} at {loss:g} % ({g3(a)} against {g3(b)} Mbit/s)")
    values["f8.bar-held"] = str(held)
    values["f8.bar-cells"] = str(held + len(missed))
    values["f8.bar-missed"] = and_list(missed)
    capacity = float(pick(link, "figure8", "bbr", 1.0)["capacity_mbps"])
    values["f8.capacity"] = f"{capacity:.2f}"
    for loss in (1.0, 2.0, 5.0):
        a, b = pair("bbr", loss)
        ideal = (1 - loss / 100) * capacity
        key = f"f8.bbr{loss:g}"
        values[f"{key}.link"] = f1(a)
        values[f"{key}.mm"] = f1(b)
        values[f"{key}.ideal"] = f1(ideal)
        values[f"{key}.of-ideal"] = percent(a / ideal, 0)
        values[f"{key}.rebbr"] = f1(rebbr[("bbr", loss)])
    for loss in (10.0, 15.0, 20.0, 40.0, 50.0):
        a, b = pair("bbr", loss)
        key = f"f8.bbr{loss:g}"
        values[f"{key}.rebbr"] = f1(rebbr[("bbr", loss)])
        values[f"{key}.link"] = f"{a:.2g}" if loss >= 20 else f1(a)
        if loss >= 20:
            values[f"{key}.mm"] = f"{b:.2g}"
    for cc, loss in (("cubic", 0.1),):
        a, b = pair(cc, loss)
        values["f8.cubic0.1.link"], values["f8.cubic0.1.mm"] = f1(a), f1(b)
    return values


def seeds_values(seeds: dict[str, list[Row]]) -> dict[str, str]:
    """The 10-seed comparison: its table, and what its prose reads from it and from compare-figure8-seeds.csv."""
    compared = compare_rows("compare-figure8-seeds.csv")
    values = {"seeds-table": seeds_table(seeds), "seeds30-table": seeds30_table()}
    for cc, loss in SEEDS_CELLS:
        row = compared[(cc, loss)]
        key = f"seeds.{cc}{loss:g}"
        values[f"{key}.median-link"] = g3(float(row["median_a"]))
        values[f"{key}.median-mm"] = g3(float(row["median_b"]))
        values[f"{key}.p"] = f"{float(row['p_mannwhitney']):.2g}"
    runs = seeds_runs(seeds, "bbr", 0.1)
    values["seeds.bbr0.1.apart"] = percent(abs(statistics.median(runs["ccsweep-link"]) - statistics.median(
        runs["mahimahi"])) / statistics.median(runs["mahimahi"]))
    for loss, threshold, above in ((10.0, 51.0, False), (15.0, 40.0, True), (20.0, 5.0, False)):
        for link, values_of in seeds_runs(seeds, "bbr", loss).items():
            count = sum((v > threshold) if above else (v < threshold) for v in values_of)
            values[f"seeds.bbr{loss:g}.{'link' if link == 'ccsweep-link' else 'mm'}-mode"] = str(count)
    cubic_above_5 = {loss: row for (cc, loss), row in compared.items() if cc == "cubic" and loss > 5}
    agree = [loss for loss, row in cubic_above_5.items() if row["verdict"] == "agree"]
    wide = [loss for loss, row in cubic_above_5.items() if row["reason"].startswith("interval wider")]
    rank = [loss for loss, row in cubic_above_5.items() if "rank test" in row["reason"]]
    values["seeds.cubic-agree"] = and_list([f"{x:g}" for x in agree])
    values["seeds.cubic-other-apart"] = span_text(
        [abs(float(cubic_above_5[x]["difference"])) for x in cubic_above_5 if x not in agree], lambda v: f"{v:.3f}")
    values["seeds.cubic-wide"] = and_list([f"{x:g}" for x in wide])
    values["seeds.cubic-rank"] = and_list([f"{x:g} % (p = {float(cubic_above_5[x]['p_mannwhitney']):.2g})"
                                           for x in rank])
    window = next(iter(compare_rows("compare-bbr10-window750.csv").values()))
    values["window750.median"] = g3(float(window["median_a"]))
    values["window750.median-own"] = g3(float(window["median_b"]))
    values["window750.p"] = f"{float(window['p_mannwhitney']):.2f}"
    return values


def experiment_values(study: dict[str, list[Row]]) -> dict[str, str]:
    """The cellular and RTT experiments' numbers the prose quotes."""
    link, cellular = study["ccsweep-link"], published("experiment4.csv")
    values: dict[str, str] = {}
    cubic = {loss: (throughput(pick(link, "cellular", "cubic", loss)), cellular[("cubic", loss)])
             for loss in sorted({loss for cc, loss in cellular if cc == "cubic"})}
    worst = max(cubic, key=lambda x: abs(cubic[x][0] - cubic[x][1]))
    values["cell.cubic-apart"] = span_text([abs(a - b) for x, (a, b) in cubic.items() if x != worst],
                                           lambda v: f"{v:.2f}")
    values["cell.cubic-worst.loss"] = f"{worst:g}"
    values["cell.cubic-worst.link"] = f"{cubic[worst][0]:.2f}"
    values["cell.cubic-worst.rebbr"] = f"{cubic[worst][1]:.2f}"
    bbr = {loss: (throughput(pick(link, "cellular", "bbr", loss)), cellular[("bbr", loss)])
           for loss in sorted({loss for cc, loss in cellular if cc == "bbr"})}
    values["cell.bbr-apart-to-10"] = span_text([abs(a - b) / b for x, (a, b) in bbr.items() if x <= 10],
                                               lambda v: percent(v, 0))
    values["cell.bbr20.link"], values["cell.bbr20.rebbr"] = f"{bbr[20.0][0]:.2f}", f"{bbr[20.0][1]:.2f}"
    for cc in ("cubic", "bbr"):
        values[f"rtt2.{cc}1"] = f1(throughput(pick(link, "rtt", cc, 1.0, rtt_ms=2.0)))
    return values


def regenerate(texts: dict[Path, str]) -> dict[Path, str]:
    """Each text with its quoted numbers recomputed from the committed files; README.md's first
    paragraph also quotes the Argo run's (benchmarks/cluster/argo_report.py) and the one-sitting
    study's (benchmarks/lateness/demo_report.py), docs/experiments.md the pacing answer's
    (benchmarks/pacing/report.py) and the bursty-loss run's (benchmarks/bursty/report.py)."""
    values = {**compute(), **argo_report.compute(), **pacing_report.compute(), **demo_report.compute(),
              **bursty_report.compute()}
    return {path: fill(text, values) for path, text in texts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file differs")
    args = parser.parse_args()
    committed = {path: path.read_text() for path in QUOTING}
    regenerated = regenerate(committed)
    differ = [path for path, text in regenerated.items() if committed[path] != text]
    if args.check:
        for path in differ:
            print(f"{path.relative_to(REPO)}: its quoted numbers differ from what the data gives", file=sys.stderr)
        sys.exit(1 if differ else 0)
    for path in differ:
        path.write_text(regenerated[path])
        print(f"rewrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
