"""ccsweep-link, Mahimahi and Rattan side by side: CPU per 100 Mbit/s, p99 lateness and the highest
rate each holds on time, measured alike in one run (the three-emulator table).

Run as root, by bench.py (`make bench-emulator`; `--only-peers` for this part alone). Every run is
one emulator at one rate, with the same path and the same traffic on all three:

- the path: the rate both ways, 10 ms one-way delay both ways (20 ms RTT), a drop-tail queue of
  one BDP in bytes both ways; each emulator at its defaults otherwise (ccsweep-link with the
  100 us release window its cells get at this RTT), all three at SCHED_FIFO (REALTIME_PRIORITY);
- the traffic: one CUBIC flow (iperf3, default socket buffers) from inside to outside, the uplink:
  ccsweep-link's sender namespace to its receiver namespace, from inside Mahimahi's shells
  (`mm-delay 10 mm-link`, as nobody: its shells refuse root) and inside `rattan link` to the
  namespace each was started in, a fresh one per run;
- the pinning of bench.py: the emulator's processes on the last core, everything else (iperf3 at
  both ends, the probes) on the others;
- the CPU: each emulator's own processes only (`ccsweep-link`; `mm-*`; `rattan`), sampled from
  /proc every 0.2 s by one sampler (host.LinkCpu), cut to the flow's steady window: WARMUP_S after
  its start to TAIL_S before its end; CPU per 100 Mbit/s is that share of a core over the
  receiver's goodput (iperf3's server intervals inside the same window);
- the lateness: from outside, the same for all three (probe.py): a 60-byte UDP probe every 2 ms
  crosses the downlink while the flow loads the uplink; its one-way delay (CLOCK_REALTIME at the
  sender before sendto, the kernel's receive stamp inside) minus the 10 ms delay and its 4.8 us
  at 100 Mbit/s of transmission is its lateness. Probes of the steady window count; those of the
  second before the flow are the unloaded baseline. ccsweep-link's own self-check p99 (every
  packet, both directions, whole run) is kept beside its outside one, as a check of the method.

A run "holds" its rate when the receiver's goodput is at least CARRIES_SHARE of the rate and the
probes' p99 lateness is within the lateness threshold of a 20 ms cell (linkrules: 1 % of the RTT,
400 us at least); an emulator holds a rate when the median of its runs there does. Runs take
turns: each repetition runs every rate, and at each rate the three emulators, in an order that
rotates, so a drift of the machine falls on all three.

Writes `runs.csv` (one row per run) and `run.json` (the settings, versions, machine and command)
into the output folder; peers_report.py makes the table and the README's numbers from them.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from benchmarks.emulator import probe, rattan
from benchmarks.emulator.host import EMULATOR_CPU, TRAFFIC_CPU, LinkCpu, link_binary, stop
from ccsweep.linkrules import LATENESS_CEILING_US, LATENESS_FLOOR_US, LATENESS_RTT_SHARE
from ccsweep.runner.mahimahi import constant_rate_trace, find_mahimahi, mahimahi_version
from ccsweep.runner.mahimahi_run import NOBODY, unprivileged_interpreter
from support.mahimahi_host import mahimahi_host
from support.procstat import machine
from support.versions import RATTAN_VERSION

PEERS = ("ccsweep-link", "mahimahi", "rattan")
#: Each emulator's own processes, by name prefix: what its CPU is.
PROCESSES = {"ccsweep-link": ("ccsweep-link",), "mahimahi": ("mm-",), "rattan": rattan.PROCESS_NAMES}
RATES_MBPS = (100.0, 200.0, 400.0, 700.0, 1000.0)
DELAY_MS = 10.0
FLOW_S = 8
WARMUP_S, TAIL_S = 2.0, 1.0
PROBE_INTERVAL_US = 2000
PROBE_PORT = 5301
#: ccsweep-link's release window for a 20 ms cell (linkrules.release_window_us: its floor).
RELEASE_WINDOW = "100us"
#: Every emulator's packet loop runs at this SCHED_FIFO priority, as the runner runs ccsweep-link's
#: and Mahimahi's shells (bench.py's priority rows use the same): on a shared machine a link at
#: normal priority waits behind whatever else runs on its core. ccsweep-link raises its own loop
#: (--realtime-priority); Mahimahi's shells and Rattan are started under `chrt`, and what they run
#: inside goes back to normal priority (NORMAL_PRIORITY) before anything else.
REALTIME_PRIORITY = "10"
REALTIME = ["chrt", "-f", REALTIME_PRIORITY]
NORMAL_PRIORITY = ["chrt", "-o", "0"]
#: Share of the rate the receiver's goodput must reach for a run to carry it (TCP payload is
#: 96.5 % of 1500-byte IP packets).
CARRIES_SHARE = 0.9
#: Set-up, hello, the idle second, the flow and the tail take about FLOW_S + 4 s.
RUN_TIMEOUT_S = FLOW_S + 60
FIELDS = ("order", "rep", "emulator", "rate_mbps", "started_utc", "status", "goodput_mbps", "cpu_cores",
          "cpu_per_100mbit", "probes", "probes_lost", "lateness_p50_us", "lateness_p99_us", "lateness_max_us",
          "idle_p50_us", "idle_p99_us", "self_p99_us", "load1")


def threshold_us(rtt_ms: float = 2 * DELAY_MS) -> float:
    """The lateness threshold of a cell of this RTT, by linkrules' rule."""
    return min(LATENESS_CEILING_US, max(LATENESS_FLOOR_US, LATENESS_RTT_SHARE * rtt_ms * 1000))


def queue_bytes(rate_mbps: float) -> int:
    """One bandwidth-delay product of the path, in bytes."""
    return int(rate_mbps * 1e6 * 2 * DELAY_MS / 1000 / 8)


def schedule(reps: int, rates: list[float]) -> list[tuple[int, float, str]]:
    """(repetition, rate, emulator) in run order: each repetition every rate, at each rate all three,
    the first of them rotating so each emulator runs first, second and third alike."""
    runs = []
    turn = 0
    for rep in range(reps):
        for rate in rates:
            runs += [(rep, rate, PEERS[(turn + k) % len(PEERS)]) for k in range(len(PEERS))]
            turn += 1
    return runs


# --- what a run's files give (no root needed: the unit tests call these) ---

def steady_goodput_mbps(server: dict, warmup_s: float = WARMUP_S, end_s: float = FLOW_S - TAIL_S) -> float | None:
    """The receiver's goodput over its 1 s intervals inside [warmup_s, end_s] (iperf3 -s -J)."""
    inside = [i["sum"] for i in server.get("intervals", []) if i["sum"]["start"] >= warmup_s - 0.05
              and i["sum"]["end"] <= end_s + 0.05]
    seconds = sum(s["seconds"] for s in inside)
    return sum(s["bytes"] for s in inside) * 8 / seconds / 1e6 if seconds > 0 else None


@dataclass(frozen=True)
class Lateness:
    """Probe lateness (us) over one window: its count, the probes lost, quantiles."""

    probes: int
    lost: int
    p50_us: float | None
    p99_us: float | None
    max_us: float | None


def probe_lateness(probes: list[list[int]], start_ns: int, end_ns: int, rate_mbps: float,
                   delay_ms: float = DELAY_MS) -> Lateness:
    """Lateness of the probes sent in [start_ns, end_ns): one-way delay minus the configured delay and
    the probe's transmission time at the rate. Lost: sequence numbers missing between the first and
    last probe of the window."""
    inside = [(seq, sent, got) for seq, sent, got in probes if start_ns <= sent < end_ns]
    if not inside:
        return Lateness(0, 0, None, None, None)
    late = np.array([(got - sent) / 1000 for _, sent, got in inside]) - delay_ms * 1000 \
        - probe.PROBE_IP_BYTES * 8 / rate_mbps
    seqs = [seq for seq, _, _ in inside]
    lost = max(seqs) - min(seqs) + 1 - len(set(seqs))
    return Lateness(len(inside), lost, float(np.percentile(late, 50)), float(np.percentile(late, 99)),
                    float(late.max()))


def row_of(rep: int, rate: float, peer: str, inside: dict, server: dict, cpu_s: float, self_p99: float | None
           ) -> dict[str, object]:
    """One run's measured columns (not its order, start time and load, which the caller adds)."""
    start, end = inside["flow_start_ns"], inside["flow_end_ns"]
    window = (start + int(WARMUP_S * 1e9), end - int(TAIL_S * 1e9))
    loaded = probe_lateness(inside["probes"], *window, rate)
    idle = probe_lateness(inside["probes"], start - 1_000_000_000, start, rate)
    goodput = steady_goodput_mbps(server)
    cores = cpu_s / ((window[1] - window[0]) / 1e9)
    status = "ok" if inside["iperf3_rc"] == 0 and goodput else f"iperf3 exit {inside['iperf3_rc']}"
    return {"rep": rep, "emulator": peer, "rate_mbps": rate, "status": status, "goodput_mbps": goodput,
            "cpu_cores": cores, "cpu_per_100mbit": cores * 100 / goodput if goodput else None,
            "probes": loaded.probes, "probes_lost": loaded.lost, "lateness_p50_us": loaded.p50_us,
            "lateness_p99_us": loaded.p99_us, "lateness_max_us": loaded.max_us, "idle_p50_us": idle.p50_us,
            "idle_p99_us": idle.p99_us, "self_p99_us": self_p99}


# --- running the emulators ---

@dataclass
class Scratch:
    """A run's folder: the probe program and the traces readable by all (Mahimahi's inside runs as
    nobody), and an output folder nobody may write."""

    folder: Path
    python: Path

    @property
    def probe(self) -> Path:
        return self.folder / "probe.py"

    @property
    def out(self) -> Path:
        return self.folder / "out" / "probes.json"


@contextlib.contextmanager
def scratch() -> Iterator[Scratch]:
    folder = Path(tempfile.mkdtemp(prefix="ccsweep-peers-"))
    try:
        folder.chmod(0o755)
        shutil.copyfile(probe.__file__, folder / "probe.py")
        (folder / "probe.py").chmod(0o644)
        (folder / "out").mkdir(mode=0o777)
        (folder / "out").chmod(0o777)  # past the umask
        yield Scratch(folder, unprivileged_interpreter())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def inside_argv(work: Scratch, base: tuple[str, str]) -> list[str]:
    """The inside of every emulator: probes received, then the flow (`base`: --base or --base-env and its value)."""
    return [*NORMAL_PRIORITY, *TRAFFIC_CPU, str(work.python), str(work.probe), "inside", *base,
            "--port", str(PROBE_PORT), "--out", str(work.out), "--flow-s", str(FLOW_S), "--", "iperf3", "-C", "cubic"]


def netns_exec(netns: str) -> list[str]:
    return ["ip", "netns", "exec", netns]


@contextlib.contextmanager
def outside(netns: str, work: Scratch) -> Iterator[subprocess.Popen]:
    """The outside of a run in `netns`: iperf3's server (one test, JSON) and the probe sender; yields the server."""
    server = subprocess.Popen([*netns_exec(netns), *TRAFFIC_CPU, "iperf3", "-s", "-1", "-J"],
                              stdout=subprocess.PIPE, text=True)
    prober = subprocess.Popen([*netns_exec(netns), *TRAFFIC_CPU, str(work.python), str(work.probe), "outside",
                               "--port", str(PROBE_PORT), "--interval-us", str(PROBE_INTERVAL_US),
                               "--max-s", str(RUN_TIMEOUT_S)])
    try:
        time.sleep(0.3)  # both listening before the inside starts
        yield server
    finally:
        stop(prober)
        stop(server)


@contextlib.contextmanager
def fresh_namespace(name: str, forward: bool) -> Iterator[str]:
    """A network namespace of this bench's own, deleted after; `forward` for Mahimahi's nested shells."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        if forward:
            subprocess.run([*netns_exec(name), "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


@dataclass
class Measured:
    inside: dict
    server: dict
    cpu_s: float
    self_p99: float | None = None


def finish(report: str, work: Scratch, cpu: LinkCpu) -> Measured:
    """After the inside ended: the server's report, the probes and the CPU over the steady window."""
    inside = json.loads(work.out.read_text())
    start = inside["flow_start_ns"] / 1e9 + WARMUP_S
    end = inside["flow_end_ns"] / 1e9 - TAIL_S
    return Measured(inside, json.loads(report), cpu.between(start, end))


def run_ccsweep_link(rate: float, work: Scratch) -> Measured:
    tag = f"ccp{os.getpid() % 100000}"
    sender, receiver = f"{tag}s", f"{tag}r"
    queue = f"droptail bytes={queue_bytes(rate)}"
    process = subprocess.Popen(
        [*EMULATOR_CPU, link_binary(), "--sender-netns", sender, "--receiver-netns", receiver,
         "--uplink-rate", f"{rate:g}mbit", "--downlink-rate", f"{rate:g}mbit", "--uplink-delay", f"{DELAY_MS:g}ms",
         "--downlink-delay", f"{DELAY_MS:g}ms", "--release-window", RELEASE_WINDOW,
         "--realtime-priority", REALTIME_PRIORITY, "--uplink-queue", queue, "--downlink-queue", queue],
        stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        if json.loads(process.stdout.readline())["event"] != "ready":
            raise RuntimeError("ccsweep-link did not start")
        cpu = LinkCpu(process.pid, PROCESSES["ccsweep-link"])
        try:
            with outside(receiver, work) as server:
                subprocess.run([*netns_exec(sender), *inside_argv(work, ("--base", "10.0.0.2"))], check=True,
                               timeout=RUN_TIMEOUT_S)
                report, _ = server.communicate(timeout=30)
        finally:
            cpu.stop()
        measured = finish(report, work, cpu)
    finally:
        stop(process)
    assert process.stdout is not None
    summary: dict = next((json.loads(line) for line in process.stdout.read().splitlines() if '"summary"' in line), {})
    measured.self_p99 = summary.get("lateness_us", {}).get("p99")
    return measured


def shells_argv(peer: str, rate: float, work: Scratch, binaries: dict[str, Path]) -> list[str]:
    """Mahimahi's shells or `rattan link` around the inside, on the emulator's core."""
    if peer == "rattan":
        inside = inside_argv(work, ("--base-env", "RATTAN_BASE"))
        argv = rattan.link_argv(binaries["rattan"], rate, DELAY_MS, queue_bytes(rate), inside)
        return [*EMULATOR_CPU, *REALTIME, *argv]
    trace = work.folder / "link.trace"
    trace.write_text(constant_rate_trace(rate))
    trace.chmod(0o644)
    queue = [f"--{d}-queue=droptail" for d in ("uplink", "downlink")]
    queue += [f"--{d}-queue-args=bytes={queue_bytes(rate)}" for d in ("uplink", "downlink")]
    mm = binaries["mahimahi"]
    return [*EMULATOR_CPU, *REALTIME, "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            str(mm / "mm-delay"), f"{DELAY_MS:g}", str(mm / "mm-link"), *queue, str(trace), str(trace), "--",
            *inside_argv(work, ("--base-env", "MAHIMAHI_BASE"))]


def run_shells(peer: str, rate: float, work: Scratch, binaries: dict[str, Path]) -> Measured:
    """Mahimahi or Rattan, started in a fresh namespace that is the outside, ending with the inside."""
    with fresh_namespace(f"ccp{os.getpid() % 100000}o", forward=peer == "mahimahi") as netns, \
            outside(netns, work) as server:
        log = work.folder / "emulator.stderr"
        with open(log, "w") as stderr:
            process = subprocess.Popen([*netns_exec(netns), *shells_argv(peer, rate, work, binaries)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                       start_new_session=True)
        cpu = LinkCpu(process.pid, PROCESSES[peer])
        try:
            process.wait(RUN_TIMEOUT_S)
        finally:
            cpu.stop()
            end_session(process)
        if process.returncode != 0 or not work.out.exists():
            lines = log.read_text(errors="replace").strip().splitlines()
            raise RuntimeError(f"{peer} exited {process.returncode}: {(lines or ['no message'])[-1][-300:]}")
        report, _ = server.communicate(timeout=30)
    return finish(report, work, cpu)


def end_session(process: subprocess.Popen) -> None:
    """End what is left of a session this bench started (the shells and what they forked), by its
    process group: SIGTERM, then SIGKILL past 10 s. Nothing is left after a run that ended by itself."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
            return


def measure(peer: str, rate: float, binaries: dict[str, Path]) -> Measured:
    with scratch() as work:
        return run_ccsweep_link(rate, work) if peer == "ccsweep-link" else run_shells(peer, rate, work, binaries)


def leftover_namespaces(before: set[str]) -> None:
    """Rattan removes its namespaces when it ends; any of its names new since `before` is removed here."""
    for name in set(namespaces()) - before:
        if name.startswith(("ns-left-", "ns-rattan-")):
            subprocess.run(["ip", "netns", "delete", name], check=False)


def namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def run_all(reps: int, rates: list[float], out: Path, command: str, log: Callable[[str], object] = print
            ) -> list[dict[str, object]]:
    """Every run of the schedule; writes runs.csv (as it goes) and run.json into `out`."""
    binaries = {"rattan": rattan.rattan_binary(log), "mahimahi": find_mahimahi()}
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    meta = {"command": command, "started_utc": started.isoformat(timespec="seconds"), "reps": reps,
            "rates_mbps": rates, "delay_ms": DELAY_MS, "flow_s": FLOW_S, "warmup_s": WARMUP_S, "tail_s": TAIL_S,
            "probe_interval_us": PROBE_INTERVAL_US, "probe_ip_bytes": probe.PROBE_IP_BYTES,
            "threshold_us": threshold_us(), "carries_share": CARRIES_SHARE, "release_window": RELEASE_WINDOW,
            "pinning": {"emulator": EMULATOR_CPU[-1:], "traffic": TRAFFIC_CPU[-1:]},
            "versions": {"ccsweep-link": link_version(), "mahimahi": mahimahi_version(binaries["mahimahi"]),
                         "rattan": RATTAN_VERSION}}
    rows: list[dict[str, object]] = []
    before = set(namespaces())
    runs = schedule(reps, rates)
    with mahimahi_host(("cubic",)), open(out / "runs.csv", "w", newline="") as table:
        writer = csv.DictWriter(table, FIELDS)
        writer.writeheader()
        for order, (rep, rate, peer) in enumerate(runs, start=1):
            log(f"peers: run {order} of {len(runs)}: {peer} at {rate:g} Mbit/s (repetition {rep + 1})")
            at = datetime.now(UTC).isoformat(timespec="seconds")
            try:
                measured = measure(peer, rate, binaries)
                row = row_of(rep, rate, peer, measured.inside, measured.server, measured.cpu_s, measured.self_p99)
            except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
                row = {"rep": rep, "emulator": peer, "rate_mbps": rate, "status": f"failed: {exc}"[:300]}
            finally:
                leftover_namespaces(before)
            row |= {"order": order, "started_utc": at, "load1": os.getloadavg()[0]}
            writer.writerow({k: rounded(row.get(k)) for k in FIELDS})
            table.flush()
            rows.append(row)
            log(f"  {row['status']}: goodput {rounded(row.get('goodput_mbps'))} Mbit/s, CPU per 100 Mbit/s "
                f"{rounded(row.get('cpu_per_100mbit'))}, p99 {rounded(row.get('lateness_p99_us'))} us")
    meta |= {"ended_utc": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine()}
    (out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    with contextlib.suppress(OSError):
        os.rmdir("/tmp/rattan/ip_lock")  # Rattan's lock folder, empty once its runs ended
        os.rmdir("/tmp/rattan")
    return rows


def rounded(value: object) -> object:
    """Floats to 4 significant digits for the CSV; None as empty."""
    if value is None:
        return ""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def link_version() -> str:
    done = subprocess.run([link_binary(), "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or "unknown"

