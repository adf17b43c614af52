"""Live metrics against a real Pushgateway and Prometheus, fed with synthetic samples.

(The real-cell path is in test_sweep_services.py; these pin the metric contract quickly.)
"""

from __future__ import annotations

import io
import time
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ccsweep import metrics as metrics_module
from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.metrics import CellMetrics, SweepMetrics
from ccsweep.runner.api import FlowSample, LiveSample
from prom import wait_for
from servers import Server
from sweeps import wait_until
from test_s3_store import result_of


def bbr_cubic_cell(sweep: str) -> Cell:
    params = CellParams(flows=(FlowParams(cc="bbr"), FlowParams(cc="cubic")),
                        uplink=DirectionParams(rate_mbps=50, delay_ms=20, loss=0.00001),
                        downlink=DirectionParams(rate_mbps=50, delay_ms=20, loss=0), duration_s=6, warmup_s=1, seed=7)
    return Cell.build(sweep, "mix", params)


def sample(t: float, retransmits: int = 3) -> LiveSample:
    flows = [FlowSample(0, "bbr", 41.5, 120, 52e6, 48e6, retransmits, 30.0, bbr_bw_bps=49e6),
             FlowSample(1, "cubic", 44.0, 80, 40e6, 20e6, retransmits * 2, 18.0)]
    return LiveSample(t=t, goodput_mbps=48.0, flows=flows, queue_bytes=15000, queue_packets=10, drops_loss=1,
                      drops_queue=4, drops_aqm=0, lateness_p99_us=35.0)


def gateway_metrics(gateway: Server, cell: Cell) -> dict[str, list[Any]]:
    """The samples the Pushgateway holds for one cell of one sweep, by metric name (the tests here
    share one cell's parameters, hence its id, across sweeps)."""
    text = urllib.request.urlopen(gateway.url + "/metrics", timeout=5).read().decode()
    found: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("cell") == cell.id and s.labels.get("sweep") == cell.sweep:
                found.setdefault(s.name, []).append(s)
    return found


def test_live_gauges_then_only_the_outcome(pushgateway: Server):
    cell = bbr_cubic_cell("metrics-live")
    metrics = CellMetrics(pushgateway.address, cell, err=io.StringIO())
    metrics.on_sample(cell, sample(1.0))
    time.sleep(1.5)
    live = gateway_metrics(pushgateway, cell)
    goodput = live["ccsweep_cell_goodput_bits_per_second"][0]
    assert goodput.value == 48e6
    assert {k: goodput.labels[k] for k in ("sweep", "experiment", "algorithm", "loss", "rtt", "bandwidth", "job")} == {
        "sweep": "metrics-live", "experiment": "mix", "algorithm": "bbr+cubic", "loss": "0.00001", "rtt": "40ms",
        "bandwidth": "50Mbit/s", "job": "ccsweep_cell"}
    assert {s.labels["cc"]: s.value for s in live["ccsweep_cell_rtt_seconds"]} == {"bbr": 0.0415, "cubic": 0.044}
    assert [s.labels["cc"] for s in live["ccsweep_cell_bbr_bandwidth_bits_per_second"]] == ["bbr"]
    assert {s.labels["cause"]: s.value for s in live["ccsweep_cell_drops_total"]} == {"loss": 1, "queue": 4, "aqm": 0}
    assert sum(s.value for s in live["ccsweep_cell_retransmits_total"]) == 9
    assert live["ccsweep_cell_running"][0].value == 1

    metrics.finish(result_of(50).model_copy(update={"cell": cell}))
    final = gateway_metrics(pushgateway, cell)
    assert "ccsweep_cell_goodput_bits_per_second" not in final, "live gauges leave with the cell"
    assert final["ccsweep_cell_running"][0].value == 0
    assert final["ccsweep_cell_result_goodput_bits_per_second"][0].value == 12.5e6
    assert final["ccsweep_cell_finished_timestamp_seconds"][0].labels["status"] == "ok"


def test_prometheus_scrapes_cells_and_records_sweep_progress(prometheus: Server, pushgateway: Server):
    """Through the committed scrape config and rules: labels kept (honor_labels), counts and ETA recorded."""
    sweep = SweepMetrics(pushgateway.address, "metrics-sweep", err=io.StringIO())
    sweep.update(total=4, cached=1, running=1, done=1, failed=0)
    cell = bbr_cubic_cell("metrics-sweep")
    metrics = CellMetrics(pushgateway.address, cell, err=io.StringIO())
    metrics.on_sample(cell, sample(1.0))
    series = wait_for(prometheus, 'ccsweep_cell_cwnd_segments{sweep="metrics-sweep",cc="bbr"}')
    assert series and series[0]["metric"]["job"] == "ccsweep_cell" and series[0]["metric"]["cell"] == cell.id
    assert float(series[0]["value"][1]) == 120
    progress = wait_for(prometheus, 'sweep:ccsweep_progress:ratio{sweep="metrics-sweep"}')
    assert float(progress[0]["value"][1]) == 0.5
    eta = wait_for(prometheus, 'sweep:ccsweep_eta:seconds{sweep="metrics-sweep"}')
    assert 0 < float(eta[0]["value"][1]) < 600
    metrics.finish(result_of(51).model_copy(update={"cell": cell}))
    sweep.finish()


def test_dead_pushgateway_warns_once_and_never_blocks(own_pushgateway: Server):
    cell = bbr_cubic_cell("metrics-dead")
    err = io.StringIO()
    own_pushgateway.stop()
    metrics = CellMetrics(own_pushgateway.address, cell, err=err)
    started = time.monotonic()
    for t in range(1, 4):
        metrics.on_sample(cell, sample(float(t)))
        time.sleep(1.1)
    own_pushgateway.start()  # back: pushes resume
    metrics.on_sample(cell, sample(4.0, retransmits=5))
    time.sleep(1.5)
    assert gateway_metrics(own_pushgateway, cell)["ccsweep_cell_elapsed_seconds"][0].value == 4.0
    own_pushgateway.stop()
    metrics.finish(result_of(52).model_copy(update={"cell": cell}))
    assert time.monotonic() - started < 15, "samples and finish never wait for a dead Pushgateway for long"
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "cannot push metrics" in lines[0] and "carrying on" in lines[0], lines


def test_finish_is_not_held_up_by_the_rate_limit(pushgateway: Server, monkeypatch):
    """The last push goes out at once even right after a live one: the pause between pushes used to
    hold every cell pod up to a second before it could exit."""
    monkeypatch.setattr(metrics_module, "MIN_PUSH_INTERVAL_S", 60.0)  # a pause finish() could not wait out
    cell = bbr_cubic_cell("metrics-finish")
    metrics = CellMetrics(pushgateway.address, cell, err=io.StringIO())
    metrics.on_sample(cell, sample(1.0))
    running = wait_until("the first push", lambda: gateway_metrics(pushgateway, cell).get("ccsweep_cell_running"),
                         timeout=10)
    assert running[0].value == 1, "first push (cell running)"
    metrics.finish(result_of(53).model_copy(update={"cell": cell}))
    assert not metrics._pusher._thread.is_alive(), "the pusher was still pausing when finish() gave up on it"
    assert gateway_metrics(pushgateway, cell)["ccsweep_cell_running"][0].value == 0


def test_a_finished_sweep_keeps_one_group_and_its_goodput_vs_loss(prometheus: Server, pushgateway: Server):
    """publish_final: the cells' groups go, the sweep's group keeps their final goodput, the
    dashboards' goodput-vs-loss rule still answers for the finished sweep."""
    name = "metrics-final"
    plan = SweepMetrics(pushgateway.address, name, err=io.StringIO())
    plan.update(total=2, cached=0)
    plan.close()
    cells = [bbr_cubic_cell(name), Cell.build(name, "mix", bbr_cubic_cell(name).params.model_copy(update={"seed": 8}))]
    results = {}
    for i, cell in enumerate(cells):
        metrics = CellMetrics(pushgateway.address, cell, err=io.StringIO())
        results[cell.id] = result_of(60 + i).model_copy(update={"cell": cell, "goodput_mbps": 40.0 + 10 * i})
        metrics.finish(results[cell.id])
    assert all(gateway_metrics(pushgateway, c).get("ccsweep_cell_running") for c in cells)
    deleted = metrics_module.publish_final(pushgateway.address, name, cells, results,
                                           {"stored": 2, "late": 0, "failed": 0, "missing": 0}, err=io.StringIO())
    assert deleted == 2
    for cell in cells:
        left = gateway_metrics(pushgateway, cell)
        assert "ccsweep_cell_running" not in left, "the cell's own group is deleted"
        (kept,) = left["ccsweep_sweep_result_goodput_bits_per_second"]
        assert kept.labels["job"] == "ccsweep_sweep" and kept.value == results[cell.id].goodput_mbps * 1e6
    point = wait_for(prometheus, f'sweep_algorithm_loss:ccsweep_cell_result_goodput_bits_per_second:avg'
                                 f'{{sweep="{name}"}}')
    assert float(point[0]["value"][1]) == 45e6
    done = wait_for(prometheus, f'sweep:ccsweep_progress:ratio{{sweep="{name}"}}')
    assert float(done[0]["value"][1]) == 1
