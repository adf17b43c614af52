"""`ccsweep compare`: two sweeps' cells matched ignoring the link, verdicts from intervals, CSV and table.

The stores are real file stores planned by plan_sweep; only the measured numbers are chosen, to sit
on known sides of the rule (the same distribution, two far-apart ones, too few runs to tell).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccsweep.cli import main
from ccsweep.compare import QUANTITIES, CompareError, compare, parse_side, pooled, read_side
from ccsweep.result import CellResult
from ccsweep.specload import parse_spec
from ccsweep.store import open_store
from synthetic import ENV
from wholeplan import plan_sweep


def spec(name: str, link: str, reps: int, losses: tuple[float, ...] = (1, 15)) -> dict:
    """Figure 8's path at 30 s, BBR at `losses` (percent), `reps` seeds, on `link`."""
    return {"name": name, "experiments": [{
        "name": "fig8", "cc": ["bbr"], "loss_percent": list(losses), "rtt_ms": [100], "bandwidth_mbps": [100],
        "duration_s": 30, "warmup_s": 5, "repetitions": reps, "link": link}]}


#: Runs of a calm cell (1 %) and of a bimodal one (15 %: near 43 or below 5), as measured on this kernel.
CALM = [94.8, 95.1, 94.9, 95.0, 95.2, 94.7, 95.0, 94.9, 95.1, 95.0]
BIMODAL = [43.0, 1.9, 42.6, 2.4, 41.8, 43.5, 3.3, 42.1, 40.9, 2.2]


def store_sweep(store, name: str, link: str, reps: int, value, losses: tuple[float, ...] = (1, 15)) -> None:
    """Plan the sweep and store a result for each cell, goodput `value(loss, repetition)`."""
    plan = plan_sweep(parse_spec(spec(name, link, reps, losses)), store)
    for cell in plan.cells:
        v = value(cell.params.loss, cell.params.repetition)
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                  goodput_mbps=v, goodput_steady_mbps=v, bottleneck_throughput_mbps=v / 0.97))


def same(loss: float, rep: int) -> float:
    return CALM[rep] if loss < 0.05 else BIMODAL[rep]


def test_two_links_of_one_study_match_ignoring_the_link(tmp_path: Path):
    store = open_store(str(tmp_path))
    store_sweep(store, "study", "ccsweep-link", 10, same)
    # The other link: the calm cell 20 % lower (it differs), the bimodal one the same runs reordered.
    store_sweep(store, "study-mahimahi", "mahimahi", 10,
                lambda loss, rep: CALM[rep] * 0.8 if loss < 0.05 else BIMODAL[::-1][rep])
    q = QUANTITIES["goodput"]
    a = read_side(parse_side("study", "A"), store, q, ("link",))
    b = read_side(parse_side("study-mahimahi", "B"), store, q, ("link",))
    result = compare(a, b, q, ("link",))
    by_loss = {round(r.params.loss * 100): r for r in result.rows}
    assert set(by_loss) == {1, 15} and not result.only_a and not result.only_b
    calm, bimodal = by_loss[1], by_loss[15]
    assert (len(calm.a), len(calm.b)) == (10, 10)
    assert calm.verdict == "differ" and calm.p_rank is not None and calm.p_rank < 0.001
    assert calm.difference.low is not None and calm.difference.low > 15
    # Identical runs: a zero difference, but a bimodal cell's median interval is wide: not settled at 10.
    assert bimodal.difference.center == 0 and bimodal.p_rank == pytest.approx(1.0)
    assert bimodal.verdict == "not settled"
    assert bimodal.difference.label == "95 % bootstrap CI of the difference of medians, n = 20"
    # Without --ignore link the cells are different cells: nothing matches.
    plain = compare(read_side(parse_side("study", "A"), store, q, ()),
                    read_side(parse_side("study-mahimahi", "B"), store, q, ()), q)
    assert not plain.rows and len(plain.only_a) == 2


def test_agree_needs_the_whole_interval_within_the_tolerance(tmp_path: Path):
    store = open_store(str(tmp_path))
    store_sweep(store, "a", "ccsweep-link", 10, lambda loss, rep: CALM[rep])
    store_sweep(store, "b", "mahimahi", 10, lambda loss, rep: CALM[::-1][rep] + 0.1)
    q = QUANTITIES["goodput"]
    result = compare(read_side(parse_side("a", "A"), store, q, ("link",)),
                     read_side(parse_side("b", "B"), store, q, ("link",)), q, ("link",))
    assert {r.verdict for r in result.rows} == {"agree"}
    # One run a side: no interval, never a verdict.
    store_sweep(store, "one", "ccsweep-link", 1, lambda loss, rep: 90.0)
    store_sweep(store, "other", "mahimahi", 1, lambda loss, rep: 10.0)
    single = compare(read_side(parse_side("one", "A"), store, q, ("link",)),
                     read_side(parse_side("other", "B"), store, q, ("link",)), q, ("link",))
    assert {r.verdict for r in single.rows} == {"not settled"}
    assert single.rows[0].difference.label == "difference of medians of 2 runs, no interval"


def test_against_rebbrs_published_csv(tmp_path: Path):
    """Figure 8's published CSV holds one run per cell; the sweep side is matched on cc, loss, RTT and rate."""
    store = open_store(str(tmp_path))
    store_sweep(store, "fig", "ccsweep-link", 10, same)
    q = QUANTITIES["bottleneck-throughput"]
    result = compare(read_side(parse_side("fig", "A"), store, q, ()),
                     read_side(parse_side("published:rebbr-figure8", "B"), store, q, ()), q)
    assert {round(r.params.loss * 100) for r in result.rows} == {1, 15}
    assert all(len(r.b) == 1 and len(r.a) == 10 and r.difference.low is not None for r in result.rows)
    # One published run says nothing of its spread, and 10 runs are too few for the rank test alone.
    assert {(r.verdict, r.reason) for r in result.rows} == {("not settled", "one run on a side: its spread is unknown")}
    assert len(result.only_b) > 20  # the published grid's other cells, listed, not dropped silently
    with pytest.raises(CompareError, match="bottleneck-throughput"):
        read_side(parse_side("published:rebbr-figure8", "B"), None, QUANTITIES["goodput"], ())


def test_one_run_per_cell_is_compared_across_cells(tmp_path: Path):
    """ReBBR's design (one run a cell): no cell settles, but 12 cells all 3 Mbit/s apart show as a pooled shift."""
    store = open_store(str(tmp_path))
    grid = (0.001, 0.01, 0.1, 1, 2, 5, 10, 15, 20, 25, 30, 40)
    store_sweep(store, "one", "ccsweep-link", 1, lambda loss, rep: 100 * (1 - loss) - 3, grid)
    store_sweep(store, "two", "mahimahi", 1, lambda loss, rep: 100 * (1 - loss), grid)
    q = QUANTITIES["goodput"]
    result = compare(read_side(parse_side("one", "A"), store, q, ("link",)),
                     read_side(parse_side("two", "B"), store, q, ("link",)), q, ("link",))
    assert len(result.rows) == 12 and {r.verdict for r in result.rows} == {"not settled"}
    line = pooled(result)
    assert line is not None and "median of per-cell differences (A - B) -3" in line and "below in 12" in line
    assert float(line.rsplit("p = ", 1)[1]) < 0.001


@pytest.mark.parametrize(("text", "message"), [
    ("Study", "not a sweep name"), ("study@queue=x", "a filter is @link"), ("published:nope", "not a published set"),
])
def test_bad_sides_are_one_line(text: str, message: str):
    with pytest.raises(CompareError, match=message):
        parse_side(text, "A")


def test_cli_table_csv_and_exit_2(tmp_path: Path):
    store = open_store(str(tmp_path))
    store_sweep(store, "study", "ccsweep-link", 10, same)
    store_sweep(store, "study-mahimahi", "mahimahi", 10, lambda loss, rep: CALM[rep] * 0.8 if loss < 0.05
                else BIMODAL[rep])
    runner = CliRunner()
    out = tmp_path / "compare.csv"
    shown = runner.invoke(main, ["compare", "study", "study-mahimahi", "--ignore", "link", "--store", str(tmp_path),
                                 "--csv", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "2 cells compared: 0 agree, 1 differ, 1 not settled" in shown.output
    rows = list(csv.DictReader(io.StringIO("".join(line for line in out.read_text().splitlines(True)
                                                   if not line.startswith("#")))))
    assert [(r["loss_percent"], r["n_a"], r["n_b"], r["verdict"]) for r in rows] == [
        ("1", "10", "10", "differ"), ("15", "10", "10", "not settled")]
    assert rows[0]["interval"] == "95 % bootstrap CI of the difference of medians, n = 20"
    bad = runner.invoke(main, ["compare", "study", "nope", "--store", str(tmp_path)])
    assert bad.exit_code == 2 and "sweep 'nope' has no manifest" in bad.output
    bad = runner.invoke(main, ["compare", "study", "study", "--ignore", "queue", "--store", str(tmp_path)])
    assert bad.exit_code == 2 and "--ignore: 'queue' is not one of link, link_offload, kernel" in bad.output


def test_a_sweep_on_both_links_gets_the_overlay_and_the_comparison_in_its_report(tmp_path: Path):
    """Two experiments that differ only in link: the report draws both links with their intervals and
    tables the comparison (tables/links-compare.csv), as `ccsweep compare` makes it."""
    store = open_store(str(tmp_path))
    both = spec("both", "ccsweep-link", 10)
    both["experiments"].append({**both["experiments"][0], "name": "fig8-mahimahi", "link": "mahimahi"})
    plan = plan_sweep(parse_spec(both), store)
    for cell in plan.cells:
        v = same(cell.params.loss, cell.params.repetition) * (0.8 if cell.params.link == "mahimahi" else 1)
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                  goodput_mbps=v, goodput_steady_mbps=v))
    built = CliRunner().invoke(main, ["figures", "--store", str(tmp_path), "--sweep", "both"])
    assert built.exit_code == 0, built.output
    out = tmp_path / "sweeps" / "both"
    assert (out / "figures" / "links-overlay.png").read_bytes().startswith(b"\x89PNG")
    rows = list(csv.DictReader(io.StringIO((out / "tables" / "links-compare.csv").read_text())))
    assert [(r["loss_percent"], r["n_a"], r["n_b"], r["verdict"]) for r in rows] == [
        ("1", "10", "10", "differ"), ("15", "10", "10", "not settled")]
    report = (out / "report.html").read_text()
    assert 'id="links"' in report and "2 cells on both links: 0 agree, 1 differ, 1 not settled" in report
    assert "bars: 95 % bootstrap CI of the median, n = 10 per point" in report


def test_offloads_on_and_off_match_ignoring_link_offload_and_a_side_can_keep_one(tmp_path: Path):
    store = open_store(str(tmp_path))
    for name, offload, value in (("on", "tso", 95.0), ("off", "none", 90.0)):
        data = spec(name, "ccsweep-link", 3, losses=(1,))
        data["experiments"][0]["link_offload"] = offload
        plan = plan_sweep(parse_spec(data), store)
        for cell in plan.cells:
            store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                      goodput_mbps=value + cell.params.repetition / 10))
    q = QUANTITIES["goodput"]
    ignore = ("link_offload",)
    result = compare(read_side(parse_side("on@link_offload=tso", "A"), store, q, ignore),
                     read_side(parse_side("off", "B"), store, q, ignore), q, ignore)
    assert [(r.median_a, r.median_b) for r in result.rows] == [(95.1, 90.1)]
    # The filter keeps only the cells with that offload: none of `on`'s.
    assert not read_side(parse_side("on@link_offload=none", "A"), store, q, ignore).points
    # Not ignored, the offloads make them different cells.
    assert not compare(read_side(parse_side("on", "A"), store, q, ()), read_side(parse_side("off", "B"), store, q, ()),
                       q).rows


def test_algorithms_match_ignoring_cc_within_a_sweep_and_against_rebbrs_bbr(tmp_path: Path):
    """bbr against bbr_unpaced in one sweep (rebbr-pacing's question): alike at 1 %, apart at 30 %; and
    bbr_unpaced against ReBBR's BBR rows, the published side kept to one algorithm with @cc=."""
    store = open_store(str(tmp_path))
    data = spec("pacing", "ccsweep-link", 5, losses=(1, 30))
    data["experiments"][0]["cc"] = ["bbr", "bbr_unpaced"]
    for cell in plan_sweep(parse_spec(data), store).cells:
        held = cell.params.cc_label == "bbr_unpaced" or cell.params.loss < 0.2
        v = (90.0 if cell.params.loss < 0.2 else 30.0) if held else 0.5
        v += cell.params.repetition / 10
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                  goodput_mbps=v, goodput_steady_mbps=v, bottleneck_throughput_mbps=v / 0.97))
    q, ignore = QUANTITIES["goodput"], ("cc",)
    result = compare(read_side(parse_side("pacing@cc=bbr", "A"), store, q, ignore),
                     read_side(parse_side("pacing@cc=bbr_unpaced", "B"), store, q, ignore), q, ignore)
    assert {round(r.params.loss * 100): r.verdict for r in result.rows} == {1: "agree", 30: "differ"}
    # Not ignored, the algorithms make them different cells.
    assert not compare(read_side(parse_side("pacing@cc=bbr", "A"), store, q, ()),
                       read_side(parse_side("pacing@cc=bbr_unpaced", "B"), store, q, ()), q).rows
    q = QUANTITIES["bottleneck-throughput"]
    rebbr = parse_side("published:rebbr-figure8@cc=bbr", "B")
    assert rebbr.label == "published:rebbr-figure8@cc=bbr"
    against = compare(read_side(parse_side("pacing@cc=bbr_unpaced", "A"), store, q, ignore),
                      read_side(rebbr, None, q, ignore), q, ignore)
    assert {round(r.params.loss * 100) for r in against.rows} == {1, 30}
    assert [r.b for r in sorted(against.rows, key=lambda r: r.params.loss)] == [[85.37], [61.36]]
    # Both of ReBBR's algorithms on one side would meet in one cell: refused, naming the way out.
    with pytest.raises(CompareError, match="keep one with @cc=NAME"):
        compare(read_side(parse_side("pacing@cc=bbr_unpaced", "A"), store, q, ignore),
                read_side(parse_side("published:rebbr-figure8", "B"), None, q, ignore), q, ignore)
