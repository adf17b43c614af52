"""ccsweep-link benchmark: maximum rate on one core, CPU per 100 Mbit/s, lateness p99.

Run as root (`make bench-emulator`). Each row runs the real emulator between two fresh network
namespaces with iperf3 (kernel TCP) through it and reads the emulator's own summary (CPU time
from getrusage, lateness from its self-check). The CPU time includes the kernel work our
write() calls trigger (delivering each packet into the receiver's TCP stack), which any TUN
emulator, Mahimahi included, pays too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]


def link_binary() -> str:
    for candidate in (os.environ.get("CCSWEEP_LINK"), str(REPO / "bin" / "ccsweep-link"), shutil.which("ccsweep-link")):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("ccsweep-link is not built: run `make emulator`")


def run_flow(rate: str, delay: str, seconds: int, cc: str = "cubic", spin: str = "0us") -> tuple[dict, float]:
    """One saturating iperf3 flow through the emulator; returns (emulator summary, goodput bit/s)."""
    tag = f"ccb{os.getpid() % 100000}"
    sender, receiver = f"{tag}s", f"{tag}r"
    emulator = subprocess.Popen(
        [link_binary(), "--sender-netns", sender, "--receiver-netns", receiver, "--uplink-rate", rate,
         "--downlink-rate", rate, "--uplink-delay", delay, "--downlink-delay", delay, "--spin", spin,
         "--uplink-queue", "droptail packets=2000"],
        stdout=subprocess.PIPE, text=True)
    server = None
    try:
        assert json.loads(emulator.stdout.readline())["event"] == "ready"
        for netns in (sender, receiver):
            subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 87380 33554432",
                            "net.ipv4.tcp_wmem=4096 65536 33554432"], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", receiver, "iperf3", "-s", "-1", "-B", "10.0.0.2"],
                                  stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        client = subprocess.run(["ip", "netns", "exec", sender, "iperf3", "-c", "10.0.0.2", "-t", str(seconds),
                                 "-C", cc, "-J"], capture_output=True, text=True)
        goodput = json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"]
    finally:
        for process in (server, emulator):
            if process and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(10)
    summary = next(json.loads(line) for line in emulator.stdout.read().splitlines() if '"summary"' in line)
    return summary, goodput


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    console = Console()
    table = Table(title=f"ccsweep-link benchmark ({os.cpu_count()} cores; goals from issue 2)")
    for column in ("measure", "setting", "result", "goal", "met"):
        table.add_column(column)

    console.print("unlimited link, no delay: how fast can one emulator go? (10 s)")
    summary, goodput = run_flow("40gbit", "0ms", 10)
    cpu = summary["cpu_share"]
    delivered = summary["uplink"]["out_bytes"] * 8 / summary["wall_s"]
    per_core = delivered / max(cpu, 1e-9) if cpu < 1 else delivered
    table.add_row("max rate on one core", f"TCP, 1500 B, goodput {goodput / 1e9:.2f} Gbit/s, cpu {cpu:.0%}",
                  f"{per_core / 1e9:.2f} Gbit/s", ">= 2 Gbit/s", "yes" if per_core >= 2e9 else "no")

    for rate, label in (("100mbit", "100 Mbit/s"), ("1gbit", "1 Gbit/s")):
        console.print(f"{label}, 10 ms each way, saturating TCP (10 s)")
        summary, goodput = run_flow(rate, "10ms", 10)
        cpu, user = summary["cpu_share"], summary["cpu_user_s"] / summary["wall_s"]
        scale = 1e8 / (summary["uplink"]["out_bytes"] * 8 / summary["wall_s"])
        if rate == "100mbit":
            table.add_row("CPU per 100 Mbit/s", f"{label}, goodput {goodput / 1e6:.1f} Mbit/s",
                          f"{cpu * scale:.1%} (user space {user * scale:.1%})", "<= 5%",
                          "yes" if cpu * scale <= 0.05 else "no")
        p99 = summary["lateness_us"]["p99"]
        table.add_row("lateness p99", f"{label}, {summary['lateness_us']['count']} packets",
                      f"{p99:.0f} us (p50 {summary['lateness_us']['p50']:.0f}, max {summary['lateness_us']['max']:.0f})",
                      "< 200 us", "yes" if p99 < 200 else "no")
    console.print(table)
    console.print("Real Mahimahi (mm-delay + mm-loss + mm-link) takes about 30% of a core per 100 Mbit/s "
                  "(../shared/notes/mahimahi-and-rebbr.md).")


if __name__ == "__main__":
    main()
