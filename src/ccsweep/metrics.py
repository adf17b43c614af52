"""Live metrics: cells and sweeps push to a Prometheus Pushgateway, Grafana reads Prometheus.

Cells are short-lived processes (or pods), so they push instead of being scraped.  Each cell is
one Pushgateway group (job `ccsweep_cell`, grouping key sweep + cell), replaced on every push:
while it runs the group holds the live gauges, and when it finishes only the final ones (status,
result goodput), so finished cells drop out of the "live" panels and stay in "goodput vs loss".
A sweep is one group (job `ccsweep_sweep`, key sweep) with its cell counts.  A pod in a
Kubernetes namespace adds `namespace` (its own, from the downward API) to every grouping key it
pushes or deletes, so namespaces sharing a Pushgateway, even with sweeps of one name, never touch
each other's groups: a group is the whole key, and a pod cannot name another namespace.

Lifecycle: cell groups last only until the sweep's end.  Then (`publish_final`: the local
executor at its end, `ccsweep figures --pushgateway` as an Argo sweep's last steps) the sweep's
group takes one final series per stored cell (its goodput, from the store) and its final counts,
and the cell groups are deleted.  So the Pushgateway holds one group per sweep plus the cells in
flight, a killed cell's last live goodput does not plot on as if it were running, and the
dashboards still show a finished sweep's goodput vs loss from the sweep's group.

Metric names carry their units (Prometheus conventions); see docs/services.md for the list.
Pushing happens on a background thread, so a slow or dead Pushgateway never stalls a cell: the
first failure prints one warning line, later ones are silent, and the cell's result is stored as
usual.  Pushes resume if the Pushgateway comes back.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import TextIO

from prometheus_client import CollectorRegistry, delete_from_gateway, push_to_gateway, pushadd_to_gateway
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ccsweep.cell import Cell
from ccsweep.result import CellResult
from ccsweep.runner.api import LiveSample
from ccsweep.store import ResultStore

CELL_JOB = "ccsweep_cell"
SWEEP_JOB = "ccsweep_sweep"
#: Pushes at most this often (Prometheus scrapes the Pushgateway every 2 s).
MIN_PUSH_INTERVAL_S = 1.0
PUSH_TIMEOUT_S = 2.0
#: finish() waits this long for the last push before giving up on it.
FINAL_PUSH_WAIT_S = 5.0

CELL_LABELS = ("sweep", "experiment", "cell", "algorithm", "loss", "rtt", "bandwidth")
FLOW_LABELS = (*CELL_LABELS, "flow", "cc")


def grouping_key(namespace: str | None, sweep: str, cell: str | None = None) -> dict[str, str]:
    """The Pushgateway grouping key of a sweep's group (or of one of its cells'): `namespace` first
    when the pusher runs in one (None: the local executor, no namespace)."""
    key = {"namespace": namespace} if namespace is not None else {}
    return key | {"sweep": sweep} | ({"cell": cell} if cell is not None else {})


def cell_labels(cell: Cell) -> dict[str, str]:
    """Labels of every metric of a cell; values sort sensibly as strings (loss without exponents)."""
    params = cell.params
    uplink = params.uplink
    bandwidth = f"{uplink.rate_mbps:g}Mbit/s" if uplink.rate_mbps is not None else f"trace:{uplink.trace.name}"  # type: ignore[union-attr]
    return {
        "sweep": cell.sweep,
        "experiment": cell.experiment,
        "cell": cell.id,
        "algorithm": params.cc_label,
        "loss": _plain(params.loss),
        "rtt": f"{params.rtt_ms:g}ms",
        "bandwidth": bandwidth,
    }


def _plain(value: float) -> str:
    """0.00001 rather than 1e-05, so that loss labels sort in numeric order."""
    return f"{value:.9f}".rstrip("0").rstrip(".") or "0"


class _Pusher:
    """Pushes one registry to one Pushgateway group from a daemon thread, latest state only."""

    def __init__(self, url: str, job: str, grouping_key: dict[str, str], registry: CollectorRegistry,
                 *, err: TextIO = sys.stderr):
        self.url = url
        self.job = job
        self.grouping_key = grouping_key
        self.registry = registry
        self.err = err
        self.warned = False
        self._wake = threading.Event()
        # Set by close(): ends the pause between pushes at once, so the last push is not held up
        # by the rate limit (it was: up to a second added to every cell pod's life).
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"push-{job}", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wake.set()

    def close(self) -> None:
        """One last push of the current state, waited for (bounded), then stop."""
        self._closing.set()
        self._wake.set()
        self._thread.join(FINAL_PUSH_WAIT_S)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            started = time.monotonic()
            self._push()
            if self._closing.is_set() and not self._wake.is_set():
                return
            if not self._closing.is_set():
                self._closing.wait(max(0.0, MIN_PUSH_INTERVAL_S - (time.monotonic() - started)))

    def _push(self) -> None:
        try:
            push_to_gateway(self.url, job=self.job, registry=self.registry, grouping_key=self.grouping_key,
                 timeout=PUSH_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure: metrics are a side view
            if not self.warned:
                self.warned = True
                print(f"ccsweep: warning: cannot push metrics to {self.url} ({_reason(exc)}); "
                      "carrying on without them", file=self.err, flush=True)


class CellMetrics(Collector):
    """The CellObserver that pushes a cell's live state, then its outcome, to a Pushgateway."""

    def __init__(self, pushgateway_url: str, cell: Cell, *, namespace: str | None = None, err: TextIO = sys.stderr):
        self.cell = cell
        self.labels = cell_labels(cell)
        self._lock = threading.Lock()
        self._sample: LiveSample | None = None
        self._result: CellResult | None = None
        self._finished_at = 0.0
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        self._pusher = _Pusher(pushgateway_url, CELL_JOB, grouping_key(namespace, cell.sweep, cell.id), registry,
                               err=err)
        self._pusher.request()  # the cell shows up as running before its first sample

    def on_sample(self, cell: Cell, sample: LiveSample) -> None:
        with self._lock:
            self._sample = sample
        self._pusher.request()

    def finish(self, result: CellResult) -> None:
        """Replace the live gauges by the outcome and push it (waits at most a few seconds)."""
        with self._lock:
            self._result = result
            self._finished_at = time.time()
        self._pusher.close()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            sample, result, finished_at = self._sample, self._result, self._finished_at
        base = self.labels
        yield _gauge("ccsweep_cell_duration_seconds", "Planned flow time of the cell.", base,
                     self.cell.params.duration_s)
        yield _gauge("ccsweep_cell_running", "1 while the cell's flows run, 0 once it has finished.", base,
                     0 if result else 1)
        if result is not None:
            yield from self._outcome(result, finished_at)
        elif sample is not None:
            yield from self._live(sample)

    def _outcome(self, result: CellResult, finished_at: float) -> Iterator[Metric]:
        base = self.labels
        yield _gauge("ccsweep_cell_finished_timestamp_seconds", "When the cell finished, by outcome.",
                     {**base, "status": result.status}, finished_at)
        if result.goodput_mbps is not None:
            yield _gauge("ccsweep_cell_result_goodput_bits_per_second",
                         "The stored result's goodput: all flows' bytes over the flow time.", base,
                         result.goodput_mbps * 1e6)
        if result.late is not None:  # absent where nothing measured the link's timing
            yield _gauge("ccsweep_cell_result_late", "1 if the link ran late (result flagged), 0 if measured on time; "
                         "absent where lateness was not measured.", base, int(result.late))

    def _live(self, s: LiveSample) -> Iterator[Metric]:
        base = self.labels
        yield _gauge("ccsweep_cell_elapsed_seconds", "Flow time elapsed at the last sample.", base, s.t)
        yield _gauge("ccsweep_cell_goodput_bits_per_second", "Receiver goodput of all flows over the last second.",
                     base, s.goodput_mbps * 1e6)
        yield _gauge("ccsweep_cell_queue_bytes", "Bytes in the emulator's uplink bottleneck queue.", base,
                     s.queue_bytes)
        yield _gauge("ccsweep_cell_queue_packets", "Packets in the emulator's uplink bottleneck queue.", base,
                     s.queue_packets)
        yield _gauge("ccsweep_cell_emulator_lateness_p99_seconds",
                     "99th percentile of how late the emulator released packets.", base, s.lateness_p99_us / 1e6)
        drops = CounterMetricFamily("ccsweep_cell_drops", "Packets the emulator dropped on the uplink, by cause.",
                                    labels=(*CELL_LABELS, "cause"))
        for cause, value in (("loss", s.drops_loss), ("queue", s.drops_queue), ("aqm", s.drops_aqm)):
            drops.add_metric([*base.values(), cause], value)
        yield drops
        per_flow = {
            "ccsweep_cell_flow_goodput_bits_per_second": ("Receiver goodput of one flow over the last second.",
                                                          lambda f: f.goodput_mbps * 1e6),
            "ccsweep_cell_rtt_seconds": ("Smoothed RTT (tcpi_rtt) of one flow.", lambda f: f.rtt_ms / 1e3),
            "ccsweep_cell_cwnd_segments": ("Congestion window (tcpi_snd_cwnd).", lambda f: f.cwnd),
            "ccsweep_cell_pacing_rate_bits_per_second": ("Pacing rate (tcpi_pacing_rate).",
                                                         lambda f: f.pacing_rate_bps),
            "ccsweep_cell_delivery_rate_bits_per_second": ("Delivery rate (tcpi_delivery_rate).",
                                                           lambda f: f.delivery_rate_bps),
        }
        for name, (help_text, value_of) in per_flow.items():
            family = GaugeMetricFamily(name, help_text, labels=FLOW_LABELS)
            for flow in s.flows:
                family.add_metric(_flow_values(base, flow.index, flow.cc), value_of(flow))
            yield family
        bbr = GaugeMetricFamily("ccsweep_cell_bbr_bandwidth_bits_per_second",
                                "BBR's bottleneck bandwidth estimate (TCP_CC_INFO bbr_bw).", labels=FLOW_LABELS)
        retransmits = CounterMetricFamily("ccsweep_cell_retransmits", "Segments retransmitted by one flow "
                                          "(tcpi_total_retrans).", labels=FLOW_LABELS)
        for flow in s.flows:
            if flow.bbr_bw_bps is not None:
                bbr.add_metric(_flow_values(base, flow.index, flow.cc), flow.bbr_bw_bps)
            retransmits.add_metric(_flow_values(base, flow.index, flow.cc), flow.retransmits)
        yield bbr
        yield retransmits


class SweepMetrics(Collector):
    """A sweep's cell counts (total, cached, running, done, failed) for the overview dashboard.

    The local executor knows all five; `ccsweep plan` (the first step of an Argo sweep) knows
    total and cached only, and the recording rules count the other three from the cells' own
    groups.  Each push replaces the group, so a new run of the sweep starts from a clean slate.
    """

    STATES = ("total", "cached", "running", "done", "failed")

    def __init__(self, pushgateway_url: str, sweep: str, *, namespace: str | None = None,
                 err: TextIO = sys.stderr):
        self.sweep = sweep
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._started = time.time()
        self._finished: float | None = None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        self._pusher = _Pusher(pushgateway_url, SWEEP_JOB, grouping_key(namespace, sweep), registry, err=err)

    def update(self, **counts: int) -> None:
        """Set some of the counts (names from STATES) and push soon."""
        unknown = set(counts) - set(self.STATES)
        if unknown:
            raise ValueError(f"unknown sweep counts {sorted(unknown)} (allowed: {', '.join(self.STATES)})")
        with self._lock:
            self._counts.update(counts)
        self._pusher.request()

    def finish(self) -> None:
        with self._lock:
            self._finished = time.time()
        self._pusher.close()

    def close(self) -> None:
        """Push what is known and stop, without marking the sweep finished (the plan step)."""
        self._pusher.close()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, finished = dict(self._counts), self._finished
        cells = GaugeMetricFamily("ccsweep_sweep_cells", "Cells of the sweep by state.", labels=("sweep", "state"))
        for state in self.STATES:
            if state in counts:
                cells.add_metric([self.sweep, state], counts[state])
        yield cells
        yield _gauge("ccsweep_sweep_started_timestamp_seconds", "When this run of the sweep started.",
                     {"sweep": self.sweep}, self._started)
        if finished is not None:
            yield _gauge("ccsweep_sweep_finished_timestamp_seconds", "When this run of the sweep finished.",
                         {"sweep": self.sweep}, finished)


def _gauge(name: str, help_text: str, labels: dict[str, str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=tuple(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _flow_values(base: dict[str, str], index: int, cc: str) -> list[str]:
    return [*base.values(), str(index), cc]


#: Final counts of a finished sweep, as the store says (see publish_final).
FINAL_STATES = ("stored", "late", "starved", "failed", "unplaceable", "missing")


def publish_final(pushgateway_url: str, sweep: str, cells: list[Cell], results: dict[str, CellResult],
                  counts: dict[str, int], *, namespace: str | None = None, err: TextIO = sys.stderr) -> int:
    """Keep a finished sweep's results in its own group, then delete its cells' groups.

    `results` are the counted (on-time) results by cell id; `counts` has FINAL_STATES. The
    sweep group is added to (its plan-time counts stay); every cell group of `cells` is deleted,
    the stored ones only after their final series was pushed: only groups of `namespace` (that of
    the pod publishing; None: those pushed outside any). Returns the groups deleted.
    """
    registry = CollectorRegistry(auto_describe=False)
    goodput = GaugeMetricFamily("ccsweep_sweep_result_goodput_bits_per_second",
                                "A finished sweep's stored result goodput, one series per cell.", labels=CELL_LABELS)
    for cell in cells:
        result = results.get(cell.id)
        if result is not None and result.goodput_mbps is not None:
            goodput.add_metric(list(cell_labels(cell).values()), result.goodput_mbps * 1e6)
    final = GaugeMetricFamily("ccsweep_sweep_final_cells", "A finished sweep's cells by final state (the store's).",
                              labels=("sweep", "state"))
    for state in FINAL_STATES:
        final.add_metric([sweep, state], counts.get(state, 0))
    registry.register(_Fixed([goodput, final]))
    try:
        pushadd_to_gateway(pushgateway_url, job=SWEEP_JOB, registry=registry,
                           grouping_key=grouping_key(namespace, sweep), timeout=PUSH_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - metrics are a side view: keep the cell groups then
        print(f"ccsweep: warning: cannot push the final results to {pushgateway_url} ({_reason(exc)}); "
              "cell groups kept", file=err, flush=True)
        return 0
    deleted = 0
    for cell_id in dict.fromkeys(c.id for c in cells):
        try:
            delete_from_gateway(pushgateway_url, job=CELL_JOB, grouping_key=grouping_key(namespace, sweep, cell_id),
                                timeout=PUSH_TIMEOUT_S)
            deleted += 1
        except Exception as exc:  # noqa: BLE001
            print(f"ccsweep: warning: cannot delete cell groups at {pushgateway_url} ({_reason(exc)})",
                  file=err, flush=True)
            break
    return deleted


def publish_stored(pushgateway_url: str, store: ResultStore, sweep: str, *, namespace: str | None = None,
                   err: TextIO = sys.stderr) -> int:
    """publish_final with what the store holds for `sweep` (final_counts)."""
    return publish_final(pushgateway_url, sweep, *final_counts(store, sweep), namespace=namespace, err=err)


def final_counts(store: ResultStore, sweep: str) -> tuple[list[Cell], dict[str, CellResult], dict[str, int]]:
    """A planned sweep's cells, its counted results by cell id, and its cells per state (sweep_status);
    runs an adaptive rule never asked for are in no state's count."""
    from ccsweep.sweep_status import sweep_cells

    cells: list[Cell] = []
    results: dict[str, CellResult] = {}
    counts: Counter[str] = Counter()
    for status in sweep_cells(store, sweep):
        cells.append(status.cell)
        counts[status.state] += 1
        if status.counted is not None:
            results[status.cell.id] = status.counted
    return cells, results, {state: counts[state] for state in FINAL_STATES}


class _Fixed(Collector):
    """A collector of metric families built once."""

    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _reason(exc: BaseException) -> str:
    return " ".join(str(getattr(exc, "reason", exc)).split())[:200]
