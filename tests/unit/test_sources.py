"""The other sources' numbers as shipped data: each file pinned, each number the source's, and drawn where cells match.

The numbers asserted here are the ones the source documents print (ThousandEyes' Tables 1, 2, 5
and 6 and its text, the shallow-buffer study's text, the Mininet tutorial's text), so a typo in a
shipped file, or a check constant that drifts from its file, fails here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import synthetic
from ccsweep.cell import Cell
from ccsweep.checks.source_claims import TE_BBR_10PCT_DROP
from ccsweep.figures.registry import build_section
from ccsweep.result import FlowResult
from ccsweep.results import sources
from ccsweep.results.published_sets import PublishedDataError
from ccsweep.results.quantities import PAYLOAD_IDEAL_LABEL, payload_ideal_mbps
from ccsweep.specload import load_spec
from test_figures import labels, line, sections


def test_thousandeyes_tables_are_the_posts_numbers():
    rows = {(r.topology, r.algorithm, r.loss_percent): r for r in sources.thousandeyes()}
    assert rows["symmetric", "bbr", 0].mean == 868.50 and rows["asymmetric", "bbr", 0].mean == 827.20
    assert rows["symmetric", "bbr", 0].p25 == 860.15 and rows["symmetric", "bbr", 0].p75 == 890
    assert rows["symmetric", "bbr", 8].mean == 644.04  # pulled down by zero samples, as printed
    assert rows["symmetric", "bbr", 10].mean == 751.89 and rows["asymmetric", "bbr", 10].mean == 751.64
    assert {(t, loss): rows[t, "cubic", loss].mean for t in ("symmetric", "asymmetric") for loss in (0, 1)} == {
        ("symmetric", 0): 804.6, ("asymmetric", 0): 864.1, ("symmetric", 1): 235.51, ("asymmetric", 1): 222.49}
    assert len([r for r in rows.values() if r.algorithm == "bbr"]) == 22  # 2 baselines + 2 x 10 loss rates
    # The check's 13.43 % is the table's own: 10 % against the symmetric baseline.
    assert TE_BBR_10PCT_DROP == round(100 * (868.50 - 751.89) / 868.50, 2)


def test_shallow_and_mininet_numbers_are_the_texts():
    numbers = sources.shallow_numbers()
    assert (numbers["standing_queue"], numbers["standing_queue_bytes"]) == (1.12, 28000)
    assert (numbers["peak_loss_below_1.5_bdp"], numbers["edge"], numbers["mix_cubic_dominates_at"]) == (12, 1.5, 5)
    assert sources.mininet_latency() == {"average": (150, 50), "worst": (400, 50)}


def test_a_changed_file_is_refused_with_one_line(tmp_path: Path):
    folder = tmp_path / "published"
    shutil.copytree(Path(str(sources.DATA)), folder)
    path = folder / sources.THOUSANDEYES
    path.write_text(path.read_text().replace("868.50", "886.50"))
    refused = "thousandeyes/tables.csv: .* is not the file typed from the source"
    with pytest.raises(PublishedDataError, match=refused) as exc:
        sources.thousandeyes(folder)
    assert "\n" not in str(exc.value)
    (folder / sources.MININET).unlink()
    with pytest.raises(PublishedDataError, match="is missing"):
        sources.mininet_latency(folder)


def per_second(mbps: float):
    def measure(cell: Cell) -> dict[str, object]:
        flow = FlowResult(index=0, cc=cell.params.flows[0].cc, start_s=0, bytes_received=0, goodput_mbps=mbps,
                          goodput_steady_mbps=mbps, throughput_per_s_mbps=[mbps] * 30, retransmits=0)
        return {"goodput_mbps": mbps, "goodput_steady_mbps": mbps, "flows": [flow]}
    return measure


def test_loss_table_draws_thousandeyes_means_beside_gigabit_cells():
    exp = {"figure": "loss-table", "cc": ["bbr", "cubic"], "loss_percent": [0, 1], "bandwidth_mbps": [1000],
           "rtt_ms": [50], "reverse": [{"label": "symmetric"}, {"label": "asymmetric", "delay_ms": 75}]}
    figure = build_section(synthetic.experiment(exp, per_second(800.0))).figures[0]
    symmetric, asymmetric = figure.figure.axes
    bbr = line(symmetric, "ThousandEyes, published: BBR mean (symmetric)")
    assert list(bbr.get_xdata()) == list(range(11)) and bbr.get_ydata()[0] == 868.50
    assert list(line(asymmetric, "ThousandEyes, published: CUBIC mean (asymmetric)").get_ydata()) == [864.1, 222.49]
    assert "Path Quality Part 3" in figure.caption
    # The overlay has the ideal of what it draws: the seconds count application bytes, so the payload rate.
    for panel in (symmetric, asymmetric):
        ideal = line(panel, PAYLOAD_IDEAL_LABEL)
        assert list(ideal.get_xdata()) == [0, 1] and list(ideal.get_ydata()) == [payload_ideal_mbps(1000, 0),
                                                                                  payload_ideal_mbps(1000, 0.01)]
    assert "receiver goodput cannot reach (1 − p) × link rate" in figure.caption


def test_loss_table_fixture_at_20_mbits_draws_no_published_numbers():
    ((_, section),) = sections("loss-table")
    assert not any("ThousandEyes" in label for ax in section.figures[0].figure.axes for label in labels(ax))
    assert all(max(line(ax, PAYLOAD_IDEAL_LABEL).get_ydata()) == payload_ideal_mbps(20, 0)
               for ax in section.figures[0].figure.axes)


def test_shallow_buffer_figures_draw_the_studys_numbers():
    bbr = [section for data, section in sections("shallow-buffers") if data.name.endswith("bbr")]
    ((section),) = bbr
    loss, queue = section.figures[0], next(f for f in section.figures if f.name.endswith("-queue"))
    (ax,) = loss.figure.axes
    assert list(line(ax, "study, published: up to 12 % below 1.5 BDP").get_ydata()) == [12, 12]
    assert "the only number it gives" in loss.caption
    assert all(list(line(panel, "study, published: 1.12 BDP standing").get_ydata()) == [1.12, 1.12]
               for panel in queue.figure.axes)


def test_rebbrs_figure8_numbers_are_drawn_beside_the_queue_and_buffer_presets():
    for preset in ("rebbr-queue", "rebbr-buffers"):
        assert all(e.published == ["rebbr-figure8"] for e in load_spec(preset).experiments)
