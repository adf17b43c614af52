"""Cross-check benchmark: ccsweep-link against upstream Mahimahi on issue 13's full grid.

Run as root (`make bench-crosscheck`): BBR and CUBIC at 0, 1 and 5 % loss, 100 Mbit/s, 100 ms,
infinite queue, and both over the Verizon LTE traces, 30 s flows, 3 repetitions, on both links:
2 x 8 cells x 3 x 30 s = 24 min of flows, one at a time. Writes benchmarks/results/<date>-crosscheck.md
with each cell's mean and spread per backend, the difference, the rule and the verdict, and the
links' CPU shares from the same cells. The grid, the rule and the host settings Mahimahi needs
(set for the run, restored after) are those of the test (tests/integration/crosscheck.py).

`--seconds 5 --repetitions 1` is a short run that checks the bench works.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.options import number_list
from ccsweep.result import CellResult
from support.crosscheck import LOSS_PERCENT, compare, grid, run_grid
from support.mahimahi_host import mahimahi_host, mahimahi_missing

REPO = Path(__file__).resolve().parents[2]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ccsweep-link vs Mahimahi on the same cells (run as root).")
    parser.add_argument("--seconds", type=float, default=30, help="flow time per cell (default 30)")
    parser.add_argument("--repetitions", type=int, default=3, help="runs of each cell per backend (default 3)")
    parser.add_argument("--bandwidth", type=float, default=100.0, metavar="10-1000",
                        help="the constant-rate cells' bottleneck in Mbit/s (default 100, the test's)")
    parser.add_argument("--loss", type=number_list("loss rate", "%", 0, 50, "0,1"), default=None,
                        metavar="PCT[,PCT...]",
                        help="loss rates of the constant-rate cells in percent, each 0-50 (default 0,1,5)")
    parser.add_argument("--message-bytes", type=int, default=1024, choices=range(1, (1 << 20) + 1),
                        metavar="1-1048576", help="the sender's write size (default 1024, ReBBR's)")
    parser.add_argument("--without-traces", action="store_true", help="leave out the Verizon LTE cells")
    parser.add_argument("--out", type=Path, default=None,
                        help="the results file (default benchmarks/results/<date>-crosscheck.md; '-' prints only)")
    args = parser.parse_args()
    if not 10 <= args.bandwidth <= 1000:
        parser.error(f"--bandwidth {args.bandwidth:g}: must be 10-1000 Mbit/s")
    return args


def cpu_line(results: list[CellResult], bandwidth_mbps: float) -> str:
    """Each link's mean CPU share (its own processes' CPU time over wall time) at the rate without loss."""
    parts = []
    for backend in ("ccsweep-link", "mahimahi"):
        shares = [r.link.selfcheck.cpu_share for r in results
                  if r.link and r.link.backend == backend and r.cell.params.uplink.rate_mbps == bandwidth_mbps
                  and r.cell.params.loss == 0 and r.link.selfcheck.cpu_share is not None]
        if shares:
            parts.append(f"{backend} {statistics.fmean(shares):.2f} of a core")
    return f"CPU of the link at {bandwidth_mbps:g} Mbit/s, no loss (same cells): " + ", ".join(parts)


def main() -> None:
    args = arguments()
    missing = mahimahi_missing()
    if missing:
        sys.exit(f"bench-crosscheck: {missing}")
    cells = grid(args.seconds, args.repetitions, args.loss if args.loss is not None else LOSS_PERCENT,
                 args.bandwidth, args.message_bytes)
    if args.without_traces:
        cells = [c for c in cells if c.params.uplink.trace is None]
    started = time.monotonic()
    load_before = f"{os.getloadavg()[0]:.1f}"

    def progress(result: CellResult) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {result.cell.params.link:12} {result.cell.params.cc_label:5} "
              f"loss {result.cell.params.loss:.0%} rep {result.cell.params.repetition} attempt {result.attempt}: "
              f"{result.status} "
              f"{result.goodput_mbps} Mbit/s {result.error or ''}", flush=True)

    with tempfile.TemporaryDirectory(prefix="ccsweep-crosscheck-") as scratch, mahimahi_host():
        results = run_grid(cells, Path(scratch), progress)
    comparisons = compare(results)
    lines = [f"- {c.line()}" for c in comparisons]
    agree = sum(c.agrees for c in comparisons)
    report = "\n".join([
        f"# Cross-check: ccsweep-link against Mahimahi, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {platform.node()}, kernel {platform.release()}, {platform.machine()}. Command: "
        f"`make bench-crosscheck` ({' '.join(['benchmarks/crosscheck/bench.py', *sys.argv[1:]])}); "
        f"{len(results)} cells in {time.monotonic() - started:.0f} s; "
        f"load average {load_before} before, {os.getloadavg()[0]:.1f} after (2 cores shared with other work).",
        "",
        f"Goodput (receiver, whole flow), mean ± sample standard deviation over {args.repetitions} "
        "repetitions per backend:",
        "",
        *lines,
        "",
        f"{agree} of {len(comparisons)} cells agree. {cpu_line(results, args.bandwidth)}.",
        "",
    ])
    print(report)
    if str(args.out) != "-":
        out = args.out or REPO / "benchmarks" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-crosscheck.md"
        out.write_text(report)
        print(f"written: {out}")
    if agree < len(comparisons):
        sys.exit(1)


if __name__ == "__main__":
    main()
