"""The result record of one cell, and its time series: the one schema every path writes.

The record is small (parameters, summary measurements, environment, the emulator's self-check)
so that figures and reports over hundreds of cells load quickly; the 100 ms time series go in
a separate document next to it.  `schema_version` changes whenever a field changes meaning.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ccsweep.cell import BpfProgramRef, Cell, LinkBackend

RESULT_SCHEMA_VERSION: Final = 1

#: ok: measured and on time, the result that counts; late: measured while the emulator ran late
#: (its self-check), kept as an attempt and never counted; starved: a bounded wait on the cell's
#: processes ran out (they got no CPU in time: the machine's fault, not the cell's), kept with
#: what it measured and never counted; failed: the cell itself failed (a child's error or exit).
CellStatus = Literal["ok", "late", "starved", "failed", "unavailable"]
#: Attempts the machine spoiled rather than the cell: kept, never counted, and the cell runs again
#: (the local executor re-runs it alone, an Argo pod exits 75 and is retried).
RERUN_STATUSES: Final = ("late", "starved")


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FlowResult(Record):
    """One flow's outcome, measured at the receiver (goodput) and the sender (tcp_info)."""

    index: int
    cc: str
    start_s: float
    bytes_received: int = Field(description="application bytes delivered to the receiver within the flow time")
    goodput_mbps: float = Field(description="bytes_received over the flow time")
    goodput_steady_mbps: float = Field(description="the same without the cell's warm-up seconds")
    throughput_per_s_mbps: list[float] = Field(description="receiver bytes per whole second of the flow")
    retransmits: int = Field(description="tcpi_total_retrans at the end")
    rtt_mean_ms: float | None = None
    rtt_p50_ms: float | None = None
    rtt_p95_ms: float | None = None
    min_rtt_ms: float | None = None
    rwnd_limited_fraction: float | None = Field(default=None, description="tcpi_rwnd_limited / tcpi_busy_time")
    sndbuf_limited_fraction: float | None = None
    delivered_ce: int | None = Field(default=None, description="packets acknowledged by ACKs echoing congestion "
                                                               "(tcpi_delivered_ce): with classic ECN the receiver "
                                                               "echoes until the sender's CWR, so more than the marks; "
                                                               "None where not read")


class DirectionCounters(Record):
    """The emulator's final counters for one direction (field names as ccsweep-link writes them)."""

    model_config = ConfigDict(extra="allow")

    in_packets: int = 0
    in_bytes: int = 0
    out_packets: int = 0
    out_bytes: int = 0
    bottleneck_packets: int = 0
    bottleneck_bytes: int = 0
    capacity_bytes: int = 0
    drops_loss: int = 0
    drops_queue: int = 0
    drops_aqm: int = 0
    #: Packets a policer dropped (0 where the direction has none, or the record predates policers).
    drops_policer: int = 0
    #: Packets CoDel or PIE marked CE instead of dropping them, and ECT(1) packets the step marker
    #: marked (0 where the queue marks nothing, or the record predates ECN).
    marks_aqm: int = 0
    marks_step: int = 0
    queue_bytes_max: int = 0


#: How a link's lateness was measured (SelfCheck.lateness_from).
LatenessSource = Literal["packets", "run-queue"]
#: What `late` None means, in reports and exports.
UNMEASURED = "unmeasured"


#: Stolen share of a CPU (%) from which a late attempt is put down to the host taking the CPU away
#: (the hypervisor's steal: the machine's fault, not crowding by cells): over the flow, 1 %, the
#: share of packets a p99 lets be late (stalls that long hold back about as many packets); or 5 %
#: in its worst second (one burst of stalls).
STEAL_FLOW_CAUSE_PCT: Final = 1.0
STEAL_CAUSE_PCT: Final = 5.0
#: What a late attempt's lateness is put down to (LatenessEvidence.cause), most to least specific:
#: run-queue: the link's processes waited on a run queue (cells crowding the machine);
#: steal: the hypervisor ran something else on this guest's CPU; timer: sleeps returned late with
#: the run queue idle; writes: writes to the TUN device (the receiving host's stack runs in them)
#: or reads took long; loop: the emulator's loop was busy between two waits longer than its writes
#: and reads explain (its own work held the packets, with every sleep on time); page-faults: the
#: link's processes faulted on disk; injected (checked first: it is known for certain): the
#: emulator held releases back on purpose (a debug option, for tests); unexplained: none of these.
LatenessCause = Literal["run-queue", "steal", "timer", "writes", "loop", "page-faults", "injected", "unexplained"]


class LatenessEvidence(Record):
    """What was measured about a link's timing besides its lateness: what a late attempt came from.

    Sampled over the flow time. The host's side for every link: the hypervisor's steal and the
    softirq time per CPU (/proc/stat, the worst CPU, over the flow and in its worst second) and the
    link processes' page faults (/proc/PID/stat). ccsweep-link's side (None for Mahimahi, which
    keeps no timing): how late its timed sleeps returned, how long its device writes and reads
    took (a write runs the receiving host's stack in the link's own context), and how long its loop
    worked between two waits (all of that and its own work: the link log's catch-up after an idle
    stretch once held few-packet cells' bursts for milliseconds with every sleep on time).
    """

    steal_pct: float | None = Field(default=None, description="stolen share of the worst CPU over the flow (%)")
    steal_max_window_pct: float | None = Field(default=None, description="the same in the worst second (%)")
    softirq_pct: float | None = Field(default=None, description="softirq share of the worst CPU over the flow (%)")
    softirq_max_window_pct: float | None = Field(default=None, description="the same in the worst second (%)")
    minor_faults: int | None = Field(default=None, description="the link processes' minor page faults over the flow")
    major_faults: int | None = Field(default=None, description="the same, major (from disk)")
    overshoot_p99_us: float | None = Field(default=None, description="p99 of how late the link's timed sleeps returned")
    overshoot_max_us: float | None = None
    write_p99_us: float | None = Field(default=None, description="p99 time of one write to a TUN device")
    write_max_us: float | None = None
    write_total_s: float | None = Field(default=None, description="time in TUN writes over the link's life")
    read_p99_us: float | None = Field(default=None, description="p99 time of one read from a TUN device")
    read_max_us: float | None = None
    work_p99_us: float | None = Field(default=None, description="p99 of the loop's work between two waits")
    work_max_us: float | None = None
    idle_wake_bound_us: int | None = Field(
        default=None, description="the CPU-latency bound held while the cell ran ($CCSWEEP_IDLE_WAKE_US); None: none")

    def cause(self, check: SelfCheck) -> LatenessCause:
        """What `check`'s lateness is put down to (see LatenessCause), from these numbers and its own."""
        threshold = check.threshold_us or 0.0
        worst = max(check.lateness_max_us or 0.0, threshold)
        if check.injected_lateness:  # known for certain, whatever else the machine did meanwhile
            return "injected"
        if check.runqueue_p99_us is not None and check.runqueue_p99_us > threshold:
            return "run-queue"
        if (self.steal_pct or 0.0) >= STEAL_FLOW_CAUSE_PCT or (self.steal_max_window_pct or 0.0) >= STEAL_CAUSE_PCT:
            return "steal"
        if (self.overshoot_p99_us or 0.0) > threshold or (self.overshoot_max_us or 0.0) >= worst / 2:
            return "timer"
        if max(self.write_p99_us or 0.0, self.read_p99_us or 0.0) > threshold or \
                max(self.write_max_us or 0.0, self.read_max_us or 0.0) >= worst / 2:
            return "writes"
        if (self.work_p99_us or 0.0) > threshold or (self.work_max_us or 0.0) >= worst / 2:
            return "loop"
        if self.major_faults:
            return "page-faults"
        return "unexplained"

    def text(self) -> str:
        """The numbers in one phrase, for the console and a test's message."""
        parts = [f"steal {_pct(self.steal_pct)} (worst second {_pct(self.steal_max_window_pct)})",
                 f"softirq {_pct(self.softirq_pct)} (worst second {_pct(self.softirq_max_window_pct)})"]
        if self.minor_faults is not None:
            parts.append(f"page faults {self.minor_faults} minor, {self.major_faults} major")
        if self.overshoot_p99_us is not None or self.write_p99_us is not None:
            parts += [f"sleep overshoot p99 {_us(self.overshoot_p99_us)}, max {_us(self.overshoot_max_us)}",
                      f"TUN write p99 {_us(self.write_p99_us)}, max {_us(self.write_max_us)}",
                      f"read p99 {_us(self.read_p99_us)}, max {_us(self.read_max_us)}"]
        if self.work_p99_us is not None:
            parts.append(f"loop work p99 {_us(self.work_p99_us)}, max {_us(self.work_max_us)}")
        return "; ".join(parts)


def _pct(value: float | None) -> str:
    return "unmeasured" if value is None else f"{value:.1f} %"


def _us(value: float | None) -> str:
    return "unmeasured" if value is None else f"{value:,.0f} us"


class SelfCheck(Record):
    """The link's timing self-check: a cell whose link ran late is flagged, not trusted blindly.

    `late` is a claim only where something measured it: True or False against `threshold_us`,
    None ("unmeasured") where nothing did. ccsweep-link measures each packet's release lateness;
    for Mahimahi, which keeps no timing of its own, the runner measures the run-queue delay of its
    shells' processes from outside (`lateness_from` says which). Records written before that was
    measured say `late: false` beside `not_measured: [lateness]`: LinkSummary reads those as None.
    """

    lateness_p50_us: float | None
    lateness_p99_us: float | None
    lateness_max_us: float | None
    cpu_share: float | None = Field(description="emulator CPU time / wall time")
    late: bool | None = Field(description="p99 lateness above the threshold the runner was given; "
                                          "None: lateness not measured")
    threshold_us: float | None
    sched: str | None = Field(
        default=None, description="the emulator loop's priority: fifo:N, deadline:R/Pus, nice:N or normal")
    injected_lateness: str | None = Field(default=None, description="debug: release delays injected on purpose")
    #: None in records written before it was kept (their emulator ran at its default, 100 us) and
    #: for Mahimahi (its own 1 ms timer).
    release_window_us: float | None = Field(
        default=None, description="the emulator's release window (--release-window, as its summary echoes it), "
                                  "counted in the lateness")
    #: The link processes' run-queue delay per wake-up, time-weighted p99 over the flow time (us),
    #: sampled from outside for both links (runner.runqueue); None in older records.
    runqueue_p99_us: float | None = Field(
        default=None, description="p99 run-queue delay of the link's processes; above threshold_us the cell is "
                                  "late too (a link, or a whole cell, kept off the CPU)")
    #: None in records written before Mahimahi's timing was measured: those are ccsweep-link's own
    #: packet lateness, or nothing at all (Mahimahi, `lateness` in not_measured).
    lateness_from: LatenessSource | None = Field(
        default=None, description="packets: each packet's release lateness (ccsweep-link); run-queue: the link "
                                  "processes' run-queue delay per wake-up, from /proc schedstat (Mahimahi)")
    #: None in records written before it was measured.
    evidence: LatenessEvidence | None = Field(
        default=None, description="what was measured about the link's timing besides its lateness")
    #: Set on late records only (None when on time, and in older records).
    late_cause: LatenessCause | None = Field(
        default=None, description="what the lateness is put down to, from `evidence` (result.LatenessCause)")


    def measured_text(self) -> str:
        """What `late` was decided from, in words: the console's and the report's one wording."""
        parts = []
        if self.lateness_from != "run-queue" and self.lateness_p99_us is not None:
            parts.append(f"p99 lateness {self.lateness_p99_us:,.0f} us")
        if self.runqueue_p99_us is not None:
            parts.append(f"p99 run-queue delay {self.runqueue_p99_us:,.0f} us")
        text = ", ".join(parts) or "lateness not measured"
        text += f" (threshold {self.threshold_us:,.0f} us)" if self.threshold_us is not None else ""
        if self.late and self.evidence is not None:
            text += f"; cause: {self.late_cause}; {self.evidence.text()}"
        return text

    def with_evidence(self, evidence: LatenessEvidence | None) -> SelfCheck:
        """This check with `evidence`, and the cause of its lateness if it is late."""
        cause = evidence.cause(self) if evidence is not None and self.late else None
        return self.model_copy(update={"evidence": evidence, "late_cause": cause})


class LinkSummary(Record):
    backend: LinkBackend = "ccsweep-link"
    version: str
    order: str = Field(description="per-direction order of loss, queue, bottleneck and delay")
    uplink: DirectionCounters
    downlink: DirectionCounters
    selfcheck: SelfCheck
    #: ccsweep-link's TUN offloads as its summary echoes them (`tso`: whole segments in, joined
    #: packets out; `none`); None for Mahimahi and in records made before the option existed
    #: (their emulator moved one packet per read and write).
    offload: str | None = Field(default=None, description="ccsweep-link's --offload (tso or none)")
    not_measured: list[str] = Field(default_factory=list,
                                    description="counters and checks this backend cannot measure (left 0 or None)")

    @model_validator(mode="after")
    def _unmeasured_is_not_on_time(self) -> LinkSummary:
        """A record whose lateness was not measured (listed so, or no p99) never reads as on time.

        Mahimahi records written before its timing was measured say false there.
        """
        if "lateness" in self.not_measured or self.selfcheck.lateness_p99_us is None:
            self.selfcheck.late = None
        return self


class Environment(Record):
    """Where the cell ran: enough to explain a surprising number later."""

    hostname: str
    kernel: str
    available_cc: list[str]
    ccsweep_version: str
    ccsweep_commit: str | None = Field(
        default=None, description="git commit the ccsweep build came from (ccsweep.buildinfo; -dirty: uncommitted "
        "changes); None when unknown, and in records made before it was recorded")
    python: str
    rmem_max: int | None = None
    wmem_max: int | None = None
    tcp_rmem: list[int] | None = None
    tcp_wmem: list[int] | None = None
    tcp_ecn: int | None = Field(default=None, description="net.ipv4.tcp_ecn where the endpoints ran (1 on, 0 off, 2 "
                                                          "accept when asked); None in records made before it was read")
    executor: str = Field(default="local", description="local, argo or operator")
    bpf_programs: list[BpfProgramRef] = Field(
        default_factory=list, description="the BPF congestion controls the cell ran, each with the digest of the "
        "object registered when it ran (the runner checks it against the cell's)")


class CellResult(Record):
    """Everything stored about one finished (or failed) cell."""

    schema_version: Literal[1] = RESULT_SCHEMA_VERSION
    cell: Cell
    status: CellStatus
    error: str | None = None
    attempt: int = Field(default=1, ge=1, description="which run of this cell by its executor (re-runs of late cells)")
    started_at: str
    finished_at: str
    flows_started_at: str | None = Field(
        default=None, description="wall-clock time of the flows' common start (t0): setup overhead is t0 - started_at")
    goodput_mbps: float | None = Field(default=None, description="all flows' application bytes over the flow time")
    goodput_steady_mbps: float | None = None
    bottleneck_throughput_mbps: float | None = Field(
        default=None, description="ReBBR-compatible: bytes leaving the bottleneck (link log), whole run")
    capacity_mbps: float | None = Field(default=None, description="delivery opportunity offered over the flow time")
    flows: list[FlowResult] = Field(default_factory=list)
    link: LinkSummary | None = None
    environment: Environment
    artifacts: list[str] = Field(default_factory=list, description="names of the files stored beside the record")
    not_measured: list[str] = Field(
        default_factory=list, description="what a record like it would carry and this one cannot: `bbr_info` for "
        "BBR through BPF, whose program the kernel does not let provide BBR's estimates (get_info)")

    @property
    def late(self) -> bool | None:
        """Whether the link ran late: as measured, or None where nothing measured it (no link, or no lateness).

        The one place reports, metrics, checks and exports read a record's timing from.
        """
        return None if self.link is None else self.link.selfcheck.late

    @property
    def timing(self) -> str:
        """`late`, `on time` or `unmeasured`: the record's timing as a word, for tables and exports."""
        return timing_text(self.late)


def timing_text(late: bool | None) -> str:
    """A `late` verdict as a word: None is "unmeasured", never "on time"."""
    return UNMEASURED if late is None else ("late" if late else "on time")


class FlowSeries(Record):
    """Per-flow samples every 100 ms: sender tcp_info (and BBR's TCP_CC_INFO), receiver bytes."""

    t: list[float] = Field(description="seconds since the cell's flow start")
    rtt_us: list[int] = Field(default_factory=list)
    min_rtt_us: list[int] = Field(default_factory=list)
    cwnd: list[int] = Field(default_factory=list)
    pacing_rate_bps: list[int] = Field(default_factory=list)
    delivery_rate_bps: list[int] = Field(default_factory=list)
    total_retrans: list[int] = Field(default_factory=list)
    bytes_acked: list[int] = Field(default_factory=list)
    bbr_bw_bps: list[int] | None = None
    bbr_min_rtt_us: list[int] | None = None
    #: BBR's pacing and cwnd gains (TCP_CC_INFO), its state machine made visible: start-up 2.89, drain
    #: 0.35, ProbeBW cycling 1.25/0.75/1 (ProbeRTT shows as the cwnd's dip to 4 packets); None in
    #: records written before they were kept and for other algorithms.
    bbr_pacing_gain: list[float] | None = None
    bbr_cwnd_gain: list[float] | None = None
    #: Packets in flight (tcp_info: unacked - sacked - lost + retrans), for the RTT and delivery rate
    #: against inflight view; None in records written before it was kept.
    inflight: list[int] | None = None
    receiver_t: list[float] = Field(default_factory=list)
    receiver_bytes: list[int] = Field(default_factory=list, description="cumulative bytes received")


class LinkSeries(Record):
    """The emulator's live counters as it wrote them (every 100 ms)."""

    t: list[float]
    uplink_queue_bytes: list[int]
    uplink_queue_packets: list[int]
    uplink_out_bytes: list[int]
    uplink_bottleneck_bytes: list[int]
    uplink_capacity_bytes: list[int]
    uplink_drops_loss: list[int]
    uplink_drops_queue: list[int]
    uplink_drops_aqm: list[int]
    lateness_p99_us: list[float]
    #: Packets offered to the data direction, so a loss rate can leave start-up out; empty in records
    #: written before it was kept.
    uplink_in_packets: list[int] = Field(default_factory=list)
    #: The flows' start on the clock of the emulator and its link logs (s since the link was ready),
    #: so a figure reading a log can put its lines on the flows' time axis.
    flows_start_s: float | None = None


class TimeSeries(Record):
    schema_version: Literal[1] = RESULT_SCHEMA_VERSION
    cell_id: str
    interval_s: float = 0.1
    flows: list[FlowSeries]
    link: LinkSeries | None = None
