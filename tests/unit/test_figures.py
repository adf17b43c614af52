"""Every figure kind built from records of real cells (tests/fixtures/<kind>/, made by record.py).

The figures are inspected as matplotlib objects: which series they draw, with which labels and
axes, and whether the plotted numbers are the stored measurements.  Some assertions are physical
(CUBIC queues more than BBR in a deep buffer): the recorded cells are real TCP over the emulator.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import get_args

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection

from ccsweep.cell import Cell
from ccsweep.figures.loss_table import steady_seconds
from ccsweep.figures.registry import BUILDERS, build_section
from ccsweep.figures.section import Section
from ccsweep.figures.shallow_buffers import cell_loss_percent
from ccsweep.figures.timeplot import rate_from_cumulative
from ccsweep.result import FlowSeries, TimeSeries
from ccsweep.results.data import ExperimentData, MissingCell, load_sweep
from ccsweep.results.linklog import departure_delays
from ccsweep.results.loss import loss_rate_percent
from ccsweep.results.points import buffer_bdp, cc_name, flows_label, group_points, loss_series
from ccsweep.spec import FigureKind
from ccsweep.store.file import FileStore
from synthetic import experiment, goodput

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture_store(kind: str) -> tuple[FileStore, str]:
    """The recorded store of a figure kind (read-only) and its one sweep's name."""
    store = FileStore(FIXTURES / kind)
    (sweep,) = store.list_sweeps()
    return store, sweep


_SECTIONS: dict[str, list[tuple[ExperimentData, Section]]] = {}


def sections(kind: str) -> list[tuple[ExperimentData, Section]]:
    """Each experiment of the kind's fixture with its built section (built once per test session)."""
    if kind not in _SECTIONS:
        store, sweep = fixture_store(kind)
        _SECTIONS[kind] = [(exp, build_section(exp)) for exp in load_sweep(store, sweep).experiments]
    return _SECTIONS[kind]


def labels(ax: Axes) -> list[str]:
    """Legend labels of the lines on an axes (helper artists start with '_')."""
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def line(ax: Axes, label: str):
    (found,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return found


def has_interval(ax: Axes) -> bool:
    """An error-bar container or a band drawn for a repeated cell."""
    return any(c.get_label() == "_ci" for c in ax.containers) or any(
        isinstance(c, PolyCollection) and c.get_label() == "_ci" for c in ax.collections)


def test_every_figure_kind_has_a_builder_and_a_fixture():
    assert set(BUILDERS) == set(get_args(FigureKind))
    for kind in BUILDERS:
        store, _ = fixture_store(kind)
        assert store.list_keys("cells/"), kind


def test_fixtures_are_real_cells():
    for kind in sorted(p.name for p in FIXTURES.iterdir() if (p / "sweeps").is_dir()):
        store, sweep = fixture_store(kind)
        for exp in load_sweep(store, sweep).experiments:
            assert exp.results and not exp.missing, kind
            for result in exp.results:
                assert result.status == "ok"
                assert result.link is not None and result.link.uplink.out_packets > 0
                assert result.environment.kernel
                # Recorded on a quiet machine: a fixture of late cells would test figures of distorted links.
                assert not result.link.selfcheck.late, (kind, result.cell.id, result.link.selfcheck)


def test_goodput_vs_loss_is_figure8():
    ((data, section),) = sections("goodput-vs-loss")
    figure, _limits = section.figures
    assert figure.name == data.name
    (ax,) = figure.figure.axes
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel().startswith("loss rate (%)")
    assert ax.get_ylabel() == "goodput over the whole flow (Mbit/s)"
    assert labels(ax) == ["CUBIC", "BBR", "Reno", "payload-rate ideal (1 − p) × link × 1448/1500"]
    # The ideal of the quantity drawn: application bytes, so the payload share of each 1500-byte packet.
    ideal = line(ax, "payload-rate ideal (1 − p) × link × 1448/1500")
    np.testing.assert_allclose(ideal.get_ydata(), [(1 - x / 100) * 20 * 1448 / 1500 for x in ideal.get_xdata()])
    assert "goodput over the whole flow" in section.figures[0].caption.lower()
    # Each point is the mean over its two repetitions, with an interval drawn.
    bbr = line(ax, "BBR")
    expected = {}
    for point in group_points(data.results):
        if point.params.cc_label == "bbr":
            expected[point.params.loss * 100] = np.mean([r.goodput_mbps for r in point.results])
    np.testing.assert_allclose(bbr.get_ydata(), [expected[x] for x in bbr.get_xdata()])
    assert list(bbr.get_xdata()) == [0.001, 0.1, 1, 5]
    assert has_interval(ax)
    # The paper's shape: CUBIC collapses with loss, BBR does not.
    cubic = line(ax, "CUBIC")
    assert cubic.get_ydata()[-1] < 0.2 * cubic.get_ydata()[0]
    assert bbr.get_ydata()[-1] > 0.7 * bbr.get_ydata()[0]


def test_goodput_vs_loss_shows_what_limited_the_senders():
    """rwnd- and sndbuf-limited shares of busy time, recorded per flow, drawn per cell against loss."""
    ((data, section),) = sections("goodput-vs-loss")
    (limits,) = [f for f in section.figures if f.name == f"{data.name}-limits"]
    rwnd_ax, sndbuf_ax = limits.figure.axes
    assert rwnd_ax.get_ylabel() == "rwnd-limited (% of busy time)"
    assert sndbuf_ax.get_ylabel() == "sndbuf-limited (% of busy time)"
    for ax, field in ((rwnd_ax, "rwnd_limited_fraction"), (sndbuf_ax, "sndbuf_limited_fraction")):
        bbr = line(ax, "BBR")
        expected = {p.params.loss * 100: np.median([100 * getattr(r.flows[0], field) for r in p.results])
                    for p in group_points(data.results) if p.params.cc_label == "bbr"}
        np.testing.assert_allclose(bbr.get_ydata(), [expected[x] for x in bbr.get_xdata()])
    assert "receiver's window" in limits.caption


def test_capacity_share_has_one_series_per_rate():
    ((data, section),) = sections("capacity-share-vs-loss")
    (ax,) = section.figures[0].figure.axes
    assert ax.get_ylabel() == "goodput over the whole flow / capacity offered"
    assert ax.get_xscale() == "log"
    assert sorted(labels(ax)) == sorted(["CUBIC (2 Mbit/s, droptail 30 kB (3 BDP))",
                                         "CUBIC (20 Mbit/s, droptail 100 kB (1 BDP))",
                                         "BBR (2 Mbit/s, droptail 30 kB (3 BDP))",
                                         "BBR (20 Mbit/s, droptail 100 kB (1 BDP))",
                                         "payload-rate ideal (1 − p) × 1448/1500"])
    for result in data.results:
        series = line(ax, next(lb for lb in labels(ax) if lb.startswith(result.cell.params.cc_label.upper())
                               and f"({result.cell.params.bandwidth_mbps:g} Mbit/s" in lb))
        at = list(series.get_xdata()).index(result.cell.params.loss * 100)
        assert series.get_ydata()[at] == pytest.approx(result.goodput_mbps / result.capacity_mbps)
    assert all(0 <= y <= 1.05 for ln in ax.get_lines() for y in ln.get_ydata())


def test_cellular_draws_goodput_and_the_trace_capacity():
    ((data, section),) = sections("cellular")
    main, over_time, *_ = section.figures
    (ax,) = main.figure.axes
    (ideal_label,) = [lb for lb in labels(ax) if lb.startswith("payload-rate ideal")]
    capacity = np.mean([r.capacity_mbps for r in data.results])
    assert f"{capacity:.2f}" in ideal_label
    ideal = line(ax, ideal_label)
    np.testing.assert_allclose(ideal.get_ydata(), [(1 - x / 100) * capacity * 1448 / 1500 for x in ideal.get_xdata()])
    assert over_time.name == f"{data.name}-capacity"
    panels = over_time.figure.axes
    assert len(panels) == 2  # one per algorithm, at the lowest loss
    for panel in panels:
        assert labels(panel)[0] == "capacity (trace)"
        assert labels(panel)[1].endswith("throughput")
        # The 1 s bins average to the capacity the cell measured over its flow (Verizon LTE: ~5-9 Mbit/s).
        trace = line(panel, "capacity (trace)").get_ydata()
        assert 3 < np.mean(trace) < 12
    assert panels[-1].get_xlabel() == "time since flow start (s)"


def test_step_response_shows_rate_estimate_and_rtt():
    ((data, section),) = sections("step-response")
    (figure,) = section.figures
    rate_ax, bw_ax, rtt_ax = figure.figure.axes
    assert rate_ax.get_ylabel() == "delivery rate (Mbit/s)"
    assert bw_ax.get_ylabel() == "BBR bandwidth estimate (Mbit/s)"
    assert rtt_ax.get_ylabel() == "smoothed RTT (ms)"
    assert labels(rate_ax) == ["BBR", "CUBIC", "bottleneck rate"]
    assert labels(bw_ax) == ["BBR", "bottleneck rate"]  # CUBIC has no bandwidth estimate
    steps = line(rate_ax, "bottleneck rate")
    assert list(steps.get_ydata()) == [10, 20, 10, 10]
    assert list(steps.get_xdata()) == [0, 3, 6, 9]
    assert has_interval(rate_ax) and has_interval(rtt_ax)
    # BBR's estimate rises after the rate doubles (3 s) and is near the base rate before it.
    estimate = line(bw_ax, "BBR")
    t, bw = estimate.get_xdata(), estimate.get_ydata()
    assert np.median(bw[(t > 4.5) & (t < 6)]) > 1.4 * np.median(bw[(t > 1.5) & (t < 3)])


def test_bufferbloat_rtt_over_time_and_distribution():
    ((data, section),) = sections("bufferbloat")
    over_time, cdf = section.figures
    (ax,) = over_time.figure.axes
    assert labels(ax) == ["BBR", "CUBIC", "propagation RTT", "full buffer"]
    assert line(ax, "propagation RTT").get_ydata()[0] == 40
    # 10 BDP at 10 Mbit/s drains in 10 x 40 ms.
    assert line(ax, "full buffer").get_ydata()[0] == pytest.approx(440)
    assert has_interval(ax)
    (cax,) = cdf.figure.axes
    assert cdf.name == f"{data.name}-cdf"
    assert cax.get_xlabel() == "smoothed RTT (ms)"
    assert cax.get_ylim() == (0, 1)
    median = {lb: np.interp(0.5, line(cax, lb).get_ydata(), line(cax, lb).get_xdata()) for lb in ("BBR", "CUBIC")}
    assert median["CUBIC"] > 1.5 * median["BBR"]  # CUBIC fills the buffer, BBR does not


def test_shallow_buffers_loss_queue_and_share():
    (bbr_data, bbr), (mix_data, mix) = sections("shallow-buffers")
    assert not bbr.notes  # every recorded cell counts its offered packets over time
    loss_fig, queue_fig, flows_fig = bbr.figures
    (ax,) = loss_fig.figure.axes
    assert ax.get_xscale() == "log"
    assert list(ax.get_xticks()) == [0.5, 1.75, 3]
    assert labels(ax) == ["4 × BBR", "study, published: up to 12 % below 1.5 BDP"]
    assert ax.get_ylabel() == "loss rate at the bottleneck after start-up (%)"
    drawn = dict(zip(line(ax, "4 × BBR").get_xdata(), line(ax, "4 × BBR").get_ydata(), strict=True))
    for point in group_points(bbr_data.results):
        steady = []
        for result in point.results:
            link = bbr_data.timeseries(result.cell.id).link
            lost = np.add(np.add(link.uplink_drops_queue, link.uplink_drops_aqm), link.uplink_drops_loss)
            at = [np.interp(s, link.t, link.uplink_in_packets) for s in (2, 8)], [np.interp(s, link.t, lost)
                                                                                  for s in (2, 8)]
            steady.append(100 * (at[1][1] - at[1][0]) / (at[0][1] - at[0][0]))
        bdp = point.params.uplink.queue.bytes / (40e6 / 8 * 0.025)
        assert drawn[bdp] == pytest.approx(np.mean(steady))
    (qax,) = queue_fig.figure.axes
    assert queue_fig.name == f"{bbr_data.name}-queue"
    assert labels(qax) == ["0.5 BDP buffer", "1.75 BDP buffer", "3 BDP buffer", "study, published: 1.12 BDP standing"]
    assert qax.get_ylabel() == "queue (BDP)"
    # A drop-tail queue never holds more than its limit.
    assert max(line(qax, "0.5 BDP buffer").get_ydata()) <= 0.5 * 1.05
    share_fig, mix_flows = mix.figures
    (sax,) = share_fig.figure.axes
    assert share_fig.name == mix_data.name
    assert labels(sax) == ["BBR median share", "CUBIC median share"]
    assert sax.get_ylim() == (0, 1)
    assert has_interval(sax)
    assert (flows_fig.name, mix_flows.name) == (f"{bbr_data.name}-flows", f"{mix_data.name}-flows")


def test_shallow_buffers_loss_leaves_start_up_out():
    ((bbr_data, _), _) = sections("shallow-buffers")
    for result in bbr_data.results:
        steady, counted = cell_loss_percent(bbr_data, result)
        assert counted and steady is not None
        # The window is not the whole cell: a cell with drops loses at a different rate after start-up.
        whole = loss_rate_percent(result)
        assert (whole == steady == 0) or whole != pytest.approx(steady, rel=0.01)


def test_shallow_buffers_flows_and_drops_at_the_studys_buffer():
    for data, section in sections("shallow-buffers"):
        (figure,) = [f for f in section.figures if f.name == f"{data.name}-flows"]
        rate_ax, drop_ax = figure.figure.axes  # one algorithm mix at one rate: one pair of panels
        (point,) = [p for p in group_points(data.results) if buffer_bdp(p.params) == 1.75]
        result = point.results[0]
        assert "1.75 BDP buffer" in rate_ax.get_title()
        ccs = [f.cc for f in point.params.flows]
        assert labels(rate_ax) == [f"flow {i + 1} ({cc_name(cc)})" for i, cc in enumerate(ccs)]
        series = data.timeseries(result.cell.id)
        for i, flow in enumerate(series.flows):
            drawn = line(rate_ax, f"flow {i + 1} ({cc_name(ccs[i])})")
            expected = rate_from_cumulative(flow.receiver_t, flow.receiver_bytes, 1.0, 0, point.params.duration_s)
            np.testing.assert_allclose(drawn.get_ydata(), expected.y)
        # The study's drop rate, percent per second: each 1 s bin's drops over the packets offered in it,
        # which weighted by those packets add up to the bins' share of all packets dropped.
        rate = line(drop_ax, "drop rate")
        link = series.link
        lost = np.add(np.add(link.uplink_drops_queue, link.uplink_drops_aqm), link.uplink_drops_loss)
        edges = np.append(rate.get_xdata() - 0.5, rate.get_xdata()[-1] + 0.5)
        offered = np.diff(np.interp(edges, link.t, link.uplink_in_packets))
        dropped = np.diff(np.interp(edges, link.t, lost))
        np.testing.assert_allclose(rate.get_ydata(), 100 * dropped / np.where(offered > 0, offered, 1))
        assert (rate.get_ydata() <= 100).all() and dropped.sum() > 0
        assert drop_ax.get_ylabel() == "drop rate (% per s)"


def test_loss_table_describes_per_second_throughput():
    ((data, section),) = sections("loss-table")
    (table,) = section.tables
    assert table.columns[:11] == ["path", "algorithm", "loss (%)", "seconds", "mean", "std", "min", "25%", "50%",
                                  "75%", "max"]
    assert table.columns[11] == "% change vs baseline"
    assert len(table.rows) == 12
    assert {row[0] for row in table.rows} == {"symmetric", "reverse 40 ms, 1 % loss"}
    assert table.rows[0][0] == "symmetric"
    for row in table.rows:
        low, q1, q2, q3, high = row[6:11]
        assert low <= q1 <= q2 <= q3 <= high
        assert low <= row[4] <= high
    by_setting = {(row[0], row[1], row[2]): row for row in table.rows}
    for point in group_points(data.results):
        seconds = [v for r in point.results for v in steady_seconds(r)]
        path = "symmetric" if point.params.downlink.loss == 0 else "reverse 40 ms, 1 % loss"
        row = by_setting[(path, point.params.cc_label.upper(), point.params.loss * 100)]
        assert row[3] == len(seconds)
        assert row[4] == pytest.approx(np.mean(seconds), abs=1e-3)
        # As ThousandEyes reports it: the mean against the loss-free mean of the same path and algorithm.
        base = by_setting[(path, point.params.cc_label.upper(), 0)]
        assert row[11] == pytest.approx(100 * (row[4] - base[4]) / base[4], abs=0.1)
    assert all(row[11] == 0 for row in table.rows if row[2] == 0)
    # The post's shape on the recorded path: at 1 % loss CUBIC falls far more than BBR.
    change = {(row[0], row[1]): row[11] for row in table.rows if row[2] == 1}
    assert change[("symmetric", "CUBIC")] < change[("symmetric", "BBR")] - 30
    assert table.to_csv().splitlines()[0].startswith("path,algorithm,loss (%)")
    (figure,) = section.figures
    left, right = figure.figure.axes
    assert (left.get_title(), right.get_title()) == ("symmetric", "reverse 40 ms, 1 % loss")
    assert left.get_yscale() == "log"
    assert labels(left) == ["BBR mean", "CUBIC mean", "payload-rate ideal (1 − p) × link × 1448/1500"]


def test_experiment_without_results_gets_a_note():
    ((data, _),) = sections("bufferbloat")
    empty = ExperimentData(experiment=data.experiment, results=[], missing=[MissingCell("abc", None, "not run")])
    assert build_section(empty).notes == ["No stored results yet."]



def test_cellular_per_packet_delay_comes_from_the_uplink_log():
    ((data, section),) = sections("cellular")
    names = [f.name for f in section.figures]
    assert names == [data.name, f"{data.name}-capacity", f"{data.name}-delay", f"{data.name}-delay-cdf"]
    over_time, cdf = section.figures[2:]
    lowest = min(r.cell.params.loss for r in data.results)
    chosen = [p for p in group_points(data.results) if p.params.loss == lowest]
    (cax,) = cdf.figure.axes
    assert cax.get_xlabel() == "queueing delay at the bottleneck (ms)"
    assert labels(cax) == [flows_label(p.params) for p in chosen]
    for panel, point in zip(over_time.figure.axes, chosen, strict=True):
        (result,) = point.results
        start = data.timeseries(result.cell.id).link.flows_start_s * 1000
        end = start + point.params.duration_s * 1000
        # Read the stored log here without the figure's parser: every departure line in the flow's time.
        text = gzip.decompress(data.load_file(result.cell.id, "uplink.log.gz")).decode()
        rows = [line.split() for line in text.splitlines() if not line.startswith("#")]
        delays = [int(f[3]) for f in rows if f[1] == "-" and start <= int(f[0]) < end]
        (dots,) = [ln for ln in panel.get_lines() if ln.get_label().endswith("one run")]
        np.testing.assert_array_equal(dots.get_ydata(), delays)
        assert dots.get_rasterized()  # a vector mark per packet made the SVG (and the report) megabytes
        assert 0 <= dots.get_xdata()[0] and dots.get_xdata()[-1] < point.params.duration_s
        cdf_line = line(cax, flows_label(point.params))
        np.testing.assert_array_equal(cdf_line.get_xdata(), sorted(delays))
        assert cdf_line.get_ydata()[-1] == 1
        (dashed,) = [ln for ln in panel.get_lines() if ln.get_label().startswith("95th percentile")]
        assert dashed.get_ydata()[0] == pytest.approx(np.percentile(delays, 95))


def test_cellular_capacity_and_throughput_share_their_bins():
    ((data, section),) = sections("cellular")
    duration = data.results[0].cell.params.duration_s
    for panel in section.figures[1].figure.axes:
        capacity = line(panel, "capacity (trace)").get_xdata()
        (throughput,) = [line(panel, lb).get_xdata() for lb in labels(panel) if lb.endswith("throughput")]
        # Whole-second bins from the flow's start, whichever clock sampled the series (the emulator's
        # capacity counter starts before the flow, the receiver's count at it).
        for xs in (capacity, throughput):
            assert xs[0] == 0.5 and xs[-1] <= duration - 0.5
            np.testing.assert_allclose(np.diff(xs), 1.0)
        assert set(capacity) <= set(throughput) or set(throughput) <= set(capacity)


def test_rate_bins_start_where_asked_and_only_where_sampled():
    t = np.arange(-0.3, 9.95, 0.1)  # 10 Mbit/s from 0.3 s before the flow to 9.9 s into it
    run = rate_from_cumulative(t, (t + 0.3) * 1.25e6, 1.0, 0, 10)
    np.testing.assert_allclose(run.t, np.arange(0.5, 9.5, 1.0))  # no bin [9, 10]: no sample after 9.9 s
    np.testing.assert_allclose(run.y, 10.0)
    assert rate_from_cumulative([0.0], [0.0], 1.0, 0, 10).t.size == 0


@pytest.mark.parametrize("figure", ["goodput-vs-loss", "capacity-share-vs-loss"])
def test_loss_in_both_directions_is_one_series_per_algorithm(figure):
    data = experiment({"figure": figure, "cc": ["bbr", "cubic"], "loss_percent": [0.1, 1, 5],
                       "loss_direction": "both"}, goodput(lambda c: 90 * (1 - c.params.loss)))
    ((ax,),) = [fig.figure.axes for fig in build_section(data).figures]
    assert [lb for lb in labels(ax) if "ideal" not in lb] == ["BBR", "CUBIC"]
    assert list(line(ax, "BBR").get_xdata()) == [0.1, 1, 5]


def test_loss_series_keeps_a_reverse_paths_own_loss_apart():
    data = experiment({"cc": ["bbr"], "loss_percent": [1, 2], "loss_direction": "both",
                       "reverse": [{"label": "sym"}, {"label": "lossy-acks", "loss_percent": 0.5}]},
                      goodput(lambda c: 50.0))
    series = loss_series(group_points(data.results), "both")
    assert [[(p.params.uplink.loss, p.params.downlink.loss) for p in s] for s in series] == [
        [(0.01, 0.01), (0.02, 0.02)], [(0.01, 0.005), (0.02, 0.005)]]
    # Grouped by the data direction only, the symmetric path would fall apart into one series per loss.
    assert len(loss_series(group_points(data.results), "uplink")) == 3


def test_departure_delays_reads_mahimahi_departure_lines_within_the_window():
    log = (b"# mahimahi mm-link (uplink) [trace]\n# base timestamp: 0\n"
           b"999 + 1500\n1000 + 1500\n1000 # 1504\n1005 - 1500 5\n1500 d 1 1500\n2000 - 1500 40\n2500 - 1500 7\n")
    t, delay = departure_delays(gzip.compress(log), 1000, 2500)
    np.testing.assert_allclose(t, [0.005, 1.0])  # seconds since the window's start; 2500 is outside
    np.testing.assert_allclose(delay, [5, 40])
    assert departure_delays(log, 0, 10_000)[1].tolist() == [5, 40, 7]  # an uncompressed log reads the same


def test_shallow_buffers_says_when_a_record_cannot_leave_start_up_out():
    ((data, _), _) = sections("shallow-buffers")

    def older(cell_id: str):
        """The series as records written before the offered-packet count was kept."""
        series = data.timeseries(cell_id)
        return series.model_copy(update={"link": series.link.model_copy(update={"uplink_in_packets": []})})

    old = ExperimentData(experiment=data.experiment, results=data.results, load_series=older)
    section = build_section(old)
    assert section.notes == [f"{len(data.results)} cell(s) without offered-packet counts over time: their loss rate "
                             "is over the whole cell, start-up included."]
    (ax,) = section.figures[0].figure.axes
    drawn = dict(zip(line(ax, "4 × BBR").get_xdata(), line(ax, "4 × BBR").get_ydata(), strict=True))
    for point in group_points(data.results):
        assert drawn[buffer_bdp(point.params)] == pytest.approx(np.mean([loss_rate_percent(r) for r in point.results]))


def test_loss_table_without_a_baseline_has_no_change_column():
    ((data, _),) = sections("loss-table")
    lossy = ExperimentData(experiment=data.experiment, results=[r for r in data.results if r.cell.params.loss > 0],
                           load_series=data.load_series)
    (table,) = build_section(lossy).tables
    assert "% change vs baseline" not in table.columns
    assert all(len(row) == len(table.columns) for row in table.rows)


def test_bufferbloat_draws_rtt_and_delivery_rate_against_inflight():
    """The BBR paper's Figure 1 from records that kept packets in flight: each sample at inflight x MSS / BDP."""
    def series(cell: Cell) -> TimeSeries:
        inflight = [10, 34, 60] if cell.params.cc_label == "bbr" else [34, 200, 340]
        return TimeSeries(cell_id=cell.id, flows=[FlowSeries(t=[0.1, 0.2, 0.3], rtt_us=[40_000, 41_000, 60_000],
                                                             delivery_rate_bps=[5_000_000, 10_000_000, 10_000_000],
                                                             inflight=inflight)])
    data = experiment({"figure": "bufferbloat", "cc": ["bbr", "cubic"], "loss_percent": [0], "rtt_ms": [40],
                       "bandwidth_mbps": [10], "queue": [{"kind": "droptail", "bdp": 10}]},
                      goodput(lambda c: 9.0), series)
    (figure,) = [f for f in build_section(data).figures if f.name.endswith("-inflight")]
    rtt_ax, rate_ax = figure.figure.axes
    bdp = 10e6 / 8 * 0.040
    offsets = {c.get_label(): c.get_offsets() for c in rtt_ax.collections}
    np.testing.assert_allclose(offsets["BBR"][:, 0], [n * 1448 / bdp for n in (10, 34, 60)])
    np.testing.assert_allclose(offsets["BBR"][:, 1], [40, 41, 60])
    assert rate_ax.get_ylabel() == "delivery rate (Mbit/s)" and "Figure 1" in figure.caption
    # A record without packets in flight (every fixture recorded before they were kept) draws none.
    assert not [f for _, s in sections("bufferbloat") for f in s.figures if f.name.endswith("-inflight")]


def test_a_long_title_wraps_instead_of_running_off_the_figure():
    """A spec's title is free text: one wider than the figure is drawn on two lines, not cut at both ends."""
    import re

    from ccsweep.figures.style import new_figure, render

    title = ("Goodput vs loss, 100 Mbit/s, 100 ms RTT (BBR paper Figure 8): beside ReBBR's published numbers "
             "(bottleneck throughput)")
    fig, (ax,) = new_figure()
    ax.plot([0, 1], [0, 1])
    ax.set_title(title)
    fig.suptitle("a short overall title")
    svg = render(fig)["svg"].decode()
    drawn = re.findall(r"<!-- (.*?) -->", svg)  # matplotlib writes each drawn line of text as a comment
    assert title not in drawn
    first, second = [line for line in drawn if line.startswith(("Goodput", "published", "(bottleneck"))]
    assert f"{first} {second}" == title
    assert "a short overall title" in drawn
