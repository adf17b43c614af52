"""Hold this node's idle CPUs to wake within a bound, for as long as this process runs.

The main container of the chart's node-setup DaemonSet when `nodeSetup.idleWakeUs` is set. A
virtual machine's idle vCPU that halts waits for the hypervisor before it serves a timer, so a
cell's link, whose CPU idles between releases, wakes late with its run queue empty
(benchmarks/results/2026-11-29-idle-wake/: 9 of 12 cells late halting, none polling). The cell
runner asks for such a bound itself on a machine it runs on, but a cell pod has no
/dev/cpu_dma_latency; the request is the kernel's, for the whole node, so one privileged process
per node holds it for every pod there. It is dropped the moment this process ends (pod deleted,
chart removed).

    python -m ccsweep_operator.idlewake 0
"""

from __future__ import annotations

import argparse
import signal
import sys

from ccsweep.linkrules import LinkError
from ccsweep.runner.wakelatency import CPU_LATENCY_QOS, MAX_BOUND_US, WakeRequest, idle_wake_bound, parse_bound_us


def bound_us(text: str) -> int:
    """argparse's type: the runner's own parsing, its message kept (argparse drops a ValueError's)."""
    try:
        return parse_bound_us(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccsweep_operator.idlewake", description=__doc__.split("\n\n")[0])
    parser.add_argument("bound_us", type=bound_us, metavar="BOUND_US",
                        help=f"microseconds within which idle CPUs must wake (0: they poll), 0 to {MAX_BOUND_US}")
    args = parser.parse_args(argv)
    # Blocked before the request is held, so SIGTERM (the pod's deletion) ends the wait below
    # and the request is released as the block closes.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        with idle_wake_bound(WakeRequest(args.bound_us, explicit=True)):
            print(f"{CPU_LATENCY_QOS}: holding {args.bound_us} us until SIGTERM", flush=True)
            received = signal.sigwait({signal.SIGTERM, signal.SIGINT})
    except LinkError as exc:  # no such device, or not privileged
        print(exc, file=sys.stderr)
        return 1
    print(f"{CPU_LATENCY_QOS}: released on {signal.Signals(received).name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
