"""Upstream Mahimahi as a cell's link: what it can express, its command line, its logs as a summary.

Mahimahi's shells nest as ReBBR ran them: `mm-delay D mm-loss uplink P mm-link UP DOWN -- CMD`.
Each shell makes a network namespace inside the previous one, so the sender (CMD) runs innermost
and reaches the outside at $MAHIMAHI_BASE, where the receiver listens. A packet of the data
direction crosses the shells from the inside out, one of the ACK direction from the outside in;
so loss after the bottleneck on the data direction is an mm-loss outside mm-link, and the same on
the ACK direction is one inside it.

Pure functions only; what Mahimahi can express is a rule about the cell, its descriptor's
(linkdesc.MAHIMAHI, applied by linkrules.cannot_express); runner.mahimahi_run is the Link that runs the cell.
"""

from __future__ import annotations

import math
import os
import shutil
from fractions import Fraction
from pathlib import Path

from ccsweep.cell import BernoulliLoss, CellParams, QueueParams
from ccsweep.linkdesc import MAHIMAHI
from ccsweep.linkrules import OPPORTUNITY_BITS, LinkError, rate_period_ms
from ccsweep.result import DirectionCounters, LinkSummary, SelfCheck
from ccsweep.runner.measure import LinkLogTotals
from ccsweep.runner.runqueue import RunQueueSummary

BINARIES = ("mm-delay", "mm-loss", "mm-link")
#: What the result says Mahimahi cannot measure: its ferries keep no queue peak, and mm-loss logs
#: nothing. Lateness joins them when the run-queue sampler saw no wake-up of the shells.
NOT_MEASURED = ("drops_loss", "queue_bytes_max")


def constant_rate_trace(rate_mbps: float) -> str:
    """A Mahimahi trace of a constant rate, one period long: ms k holds the opportunities that fall in it.

    Exact integer arithmetic (100 Mbit/s gives 8, 8 and 9 lines per 3 ms, ReBBR's pattern), so the
    trace's mean is the rate itself however often mm-link repeats it.
    """
    period = rate_period_ms(rate_mbps)
    if period is None:
        raise LinkError(f"mahimahi cannot run a constant {rate_mbps:g} Mbit/s (see linkrules.cannot_express)")
    per_ms = Fraction(rate_mbps).limit_denominator(1000) * 1000 / OPPORTUNITY_BITS
    lines = [str(ms) for ms in range(1, period + 1)
             for _ in range(math.floor(ms * per_ms) - math.floor((ms - 1) * per_ms))]
    return "\n".join(lines) + "\n"


def find_mahimahi(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding mm-delay, mm-loss and mm-link: the argument, $CCSWEEP_MAHIMAHI, <repo>/bin, PATH."""
    candidates = [Path(explicit)] if explicit is not None else []
    if explicit is None:
        env = os.environ.get("CCSWEEP_MAHIMAHI")
        candidates += [Path(env)] if env else []
        candidates.append(Path(__file__).resolve().parents[3] / "bin")
        on_path = shutil.which("mm-link")
        candidates += [Path(on_path).parent] if on_path else []
    for folder in candidates:
        if all((folder / name).is_file() for name in BINARIES):
            # Where the files are, not the links to them: nobody runs them, and a link in a
            # clone's bin/ under a private home is out of its reach though the files are not.
            return (folder / BINARIES[0]).resolve().parent
    tried = ", ".join(map(str, candidates)) + ("" if explicit is not None else ", PATH")
    raise LinkError(f"Mahimahi's {', '.join(BINARIES)} not found (tried {tried}); build them with `make mahimahi`")


def mahimahi_version(folder: Path) -> str:
    """The installed build's name (hack/tools/mahimahi.sh installs into mahimahi-<commit>), as the
    descriptor's version probe says: the install folder's name when it starts with its key."""
    name = (folder / "mm-link").resolve().parent.parent.name
    return name if name.startswith(MAHIMAHI.version.key) else MAHIMAHI.name


def queue_options(name: str, queue: QueueParams) -> list[str]:
    """mm-link's `--NAME-queue=KIND --NAME-queue-args=A=N,...` (nothing for the default infinite queue)."""
    if queue.kind == "infinite":
        return []
    kind, _, args = queue.emulator_spec().partition(" ")
    return [f"--{name}-queue={kind}", f"--{name}-queue-args={args}"]


def mahimahi_command(p: CellParams, folder: Path, traces: dict[str, Path], logs: dict[str, Path],
                     inner: list[str]) -> list[str]:
    """The nested shells around `inner` (argv only: every shell execs the next one's argv as given).

    mm-delay and mm-loss take their command as the rest of argv; mm-link parses options, so its
    command follows `--` (else the sender's own options would be read as mm-link's).

    Data-direction loss sits outside mm-link when it comes after the bottleneck, inside when before;
    ACK-direction loss the other way round, since those packets cross the shells outside-in.
    """
    def loss(direction: str) -> list[str]:
        model = getattr(p, direction).loss_model
        if not isinstance(model, BernoulliLoss):
            raise LinkError(f"mahimahi cannot draw {direction} loss from {type(model).__name__} "
                            "(see linkrules.cannot_express)")
        return [str(folder / "mm-loss"), direction, repr(model.p)] if model.p else []

    after = p.loss_position == "after"
    link = [str(folder / "mm-link"), *queue_options("uplink", p.uplink.queue),
            *queue_options("downlink", p.downlink.queue), f"--uplink-log={logs['uplink']}",
            f"--downlink-log={logs['downlink']}", str(traces["uplink"]), str(traces["downlink"]), "--"]
    outer_loss = loss("uplink") if after else loss("downlink")
    inner_loss = loss("downlink") if after else loss("uplink")
    return [str(folder / "mm-delay"), f"{int(p.uplink.delay_ms)}", *outer_loss, *link, *inner_loss, *inner]


def log_counters(totals: LinkLogTotals) -> DirectionCounters:
    """One direction's counters as mm-link's log gives them (what it cannot give stays 0: NOT_MEASURED)."""
    return DirectionCounters(in_packets=totals.arrival_packets, in_bytes=totals.arrival_bytes,
                             out_packets=totals.departure_packets, out_bytes=totals.departure_bytes,
                             bottleneck_packets=totals.departure_packets, bottleneck_bytes=totals.departure_bytes,
                             capacity_bytes=totals.capacity_bytes, drops_queue=totals.drop_packets)


def log_init_ms(log: Path) -> int:
    """The CLOCK_REALTIME ms that mm-link's log times count from (its `# init timestamp:` header)."""
    with open(log, errors="replace") as lines:
        for line in lines:
            if not line.startswith("#"):
                break
            if line.startswith("# init timestamp:"):
                return int(line.split(":", 1)[1])
    raise LinkError(f"{log.name}: no '# init timestamp' header; not an mm-link log")


def mahimahi_summary(p: CellParams, version: str, uplink: LinkLogTotals, downlink: LinkLogTotals,
                     cpu_share: float | None, timing: RunQueueSummary | None, threshold_us: float,
                     sched: str | None = None) -> LinkSummary:
    """The result's LinkSummary: counters from the logs, lateness from the shells' run-queue delay.

    `timing` None (no wake-up seen) leaves lateness unmeasured: `late` None, never false.
    """
    order = "queue>bottleneck>loss>delay" if p.loss_position == "after" else "loss>queue>bottleneck>delay"
    check = SelfCheck(lateness_p50_us=None, lateness_p99_us=None, lateness_max_us=None, cpu_share=cpu_share,
                      late=None, threshold_us=None, sched=sched)
    if timing is not None:
        check = SelfCheck(lateness_p50_us=timing.p50_us, lateness_p99_us=timing.p99_us, lateness_max_us=timing.max_us,
                          cpu_share=cpu_share, late=timing.p99_us > threshold_us, threshold_us=threshold_us,
                          lateness_from="run-queue", runqueue_p99_us=timing.p99_us, sched=sched)
    return LinkSummary(
        backend="mahimahi", version=version, order=order,
        uplink=log_counters(uplink), downlink=log_counters(downlink), selfcheck=check,
        not_measured=[*NOT_MEASURED, *(["lateness"] if timing is None else [])],
    )
