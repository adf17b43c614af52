"""Planning a Sweep in a child process with bounded memory and time, never in the operator's own process.

Planning reads and writes the store a chunk at a time, so it needs little memory; but a Sweep is
user input, and one whose planning grew past the operator pod's limit would kill the operator, whose
restart would plan it again: a crash loop that blocks every other Sweep. So the handler runs
`decide` here, in a process of its own whose address space is capped (RLIMIT_AS) and whose run
is timed out; a plan that exceeds either fails its own Sweep with one line, and the operator goes
on serving the others.

The child reads the Sweep and the node list as JSON on stdin and writes the Decision as JSON on
stdout; the operator's settings and the store's credentials reach it through the environment it
inherits.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from ccsweep.placement import Node
from ccsweep_operator.reconcile import Decision, OperatorSettings, SweepObject, decide, with_condition

#: Environment variables (the chart sets them from operator.plan) bounding one Sweep's planning.
MEMORY_ENV, TIMEOUT_ENV = "CCSWEEP_PLAN_MEMORY_MIB", "CCSWEEP_PLAN_TIMEOUT_S"
#: Address space of the planning process. Planning is flat: 61 MiB of address space at the
#: 100,000-cell cap. A sweep with adaptive repetitions imports scipy (some 390 MiB of address space)
#: and is judged a chunk of its plan at a time: 425 MiB at 100,000 runs of 2,000 settings, 439 at
#: 100,000 of 20,000 settings (benchmarks/results/2026-11-26-memory-flat-3.md), so 512 MiB plans
#: every sweep the cap allows. The chart's operator limit (768 Mi) holds the operator (about
#: 100 MiB) and a child at this bound.
DEFAULT_MEMORY_MIB = 512
#: Planning 100,000 cells (the cap) against a file store takes about 30 s on one idle core; an S3
#: store adds a request per stored chunk.
DEFAULT_TIMEOUT_S = 300.0
#: OpenBLAS (imported with scipy by adaptive repetitions) reserves address space per thread; planning
#: does no linear algebra worth a thread. A Rust extension (pydantic-core) that runs out of memory
#: aborts; asked for a backtrace (RUST_BACKTRACE set in the operator's environment) it would first
#: allocate for it, and deadlock there until the timeout.
CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1", "RUST_BACKTRACE": "0"}
#: The child's exit code when planning ran out of its memory bound (MemoryError).
EXIT_OUT_OF_MEMORY = 3
#: A library refused an allocation fails in its own way: Python raises MemoryError, pydantic-core
#: (through pyo3) panics with "PyObject pointer is null". A planning child that failed with its peak
#: address space this close to its bound failed for the bound (allocations refused here were under
#: 1 MiB).
NEAR_BOUND_BYTES = 16 * 1024 * 1024
#: What Rust's standard library prints before it aborts on an allocation that failed.
RUST_ALLOC_FAILED = re.compile(r"^memory allocation of \d+ bytes failed$", re.MULTILINE)
#: The least bound the operator accepts. The planner's own code (Python, pydantic, numpy) maps about
#: 130 MiB of address space before it plans anything; a bound under that fails every Sweep.
MIN_MEMORY_MIB = 256


@dataclass(frozen=True)
class PlanBounds:
    """How much memory (MiB of address space) and time (seconds) one Sweep's planning may take."""

    memory_mib: int = DEFAULT_MEMORY_MIB
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> PlanBounds:
        """The bounds the chart set; a value that is not a positive number stops the operator at start."""
        bounds = cls(memory_mib=int(env.get(MEMORY_ENV, DEFAULT_MEMORY_MIB)),
                     timeout_s=float(env.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
        if bounds.memory_mib < MIN_MEMORY_MIB or not 1 <= bounds.timeout_s <= 3600:
            raise ValueError(f"{MEMORY_ENV} must be at least {MIN_MEMORY_MIB} and {TIMEOUT_ENV} from 1 to 3600; "
                             f"got {bounds.memory_mib} and {bounds.timeout_s:g}")
        return bounds


def decide_bounded(sweep: SweepObject, nodes: Sequence[Node] | None, bounds: PlanBounds) -> Decision:
    """`reconcile.decide` for `sweep`, run in a child process within `bounds`.

    A child that runs out of memory or time, or ends without a decision, fails this Sweep's
    generation (Planned False, reason PlanFailed, one line saying which bound and how to raise it);
    it is not retried: the same spec would fail the same way.
    """
    request = json.dumps({"sweep": asdict(sweep), "nodes": None if nodes is None else [asdict(n) for n in nodes]})
    try:
        done = subprocess.run([sys.executable, "-m", "ccsweep_operator.planworker", str(bounds.memory_mib)],
                              input=request, capture_output=True, text=True, timeout=bounds.timeout_s, check=False,
                              env={**os.environ, **CHILD_ENV})
    except subprocess.TimeoutExpired:  # subprocess.run has killed the child
        return plan_failed(sweep, f"planning took longer than the operator's {bounds.timeout_s:g} s "
                                  f"(operator.plan.timeoutSeconds); the Sweep was not planned")
    if done.returncode == 0:
        try:
            answer = json.loads(done.stdout)
            return Decision(status=answer["status"], workflow=answer["workflow"], retry=answer["retry"])
        except (ValueError, KeyError, TypeError):
            pass
        return plan_failed(sweep, "planning ended without a decision: " + _last_line(done.stderr or done.stdout))
    if done.returncode == EXIT_OUT_OF_MEMORY or _rust_out_of_memory(done.returncode, done.stderr):
        return plan_failed(sweep, f"planning needed more than the operator's {bounds.memory_mib} MiB "
                                  f"(operator.plan.memoryMiB); the Sweep was not planned")
    if done.returncode < 0:
        return plan_failed(sweep, f"planning was ended by signal {signal.Signals(-done.returncode).name} "
                                  f"(within the operator's {bounds.memory_mib} MiB, operator.plan.memoryMiB)")
    return plan_failed(sweep, f"planning failed (exit {done.returncode}): {_last_line(done.stderr)}")


def plan_failed(sweep: SweepObject, why: str) -> Decision:
    """The Sweep's Failed status when its planning could not finish: its Valid condition is kept."""
    message = f"Sweep {sweep.name}: {why}"
    conditions = with_condition(sweep.status.get("conditions"), "Planned", False, "PlanFailed", message,
                                sweep.generation)
    return Decision(status={"observedGeneration": sweep.generation, "workflow": None, "startedAt": None,
                            "finishedAt": None, "report": None, "phase": "Failed", "message": message,
                            "cells": None, "conditions": conditions})


def _rust_out_of_memory(returncode: int, stderr: str) -> bool:
    """Whether a Rust extension (pydantic-core's validators) aborted on a failed allocation: Rust's
    allocation error handler prints this line and aborts, where Python would raise MemoryError."""
    return returncode == -signal.SIGABRT and RUST_ALLOC_FAILED.search(stderr) is not None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "no output"


def mapped_bytes(field: str = "VmSize") -> int:
    """This process's address space now (VmSize) or at its peak (VmPeak), read from /proc."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1]) * 1024


def main() -> None:
    """The child: cap the address space, read the request, decide, write the Decision.

    A bound the loaded planner already exceeds fails at once: left to the kernel, the plan would
    pass or fail by whether it happened to map anything new.
    """
    limit = int(sys.argv[1]) * 1024 * 1024
    if mapped_bytes() >= limit:
        sys.exit(EXIT_OUT_OF_MEMORY)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:  # past the pod's own limit (RSS) the kernel kills this process, never the operator
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass
    request = json.load(sys.stdin)
    sweep = SweepObject(**request["sweep"])
    nodes = None if request["nodes"] is None else [Node(**n) for n in request["nodes"]]
    try:
        answer = json.dumps(asdict(decide(sweep, OperatorSettings.from_env(), nodes=nodes)))
    except MemoryError:
        sys.exit(EXIT_OUT_OF_MEMORY)
    except ImportError as exc:  # a library loaded on the way (scipy) that did not fit: the loader says so
        if "failed to map segment" in str(exc):
            sys.exit(EXIT_OUT_OF_MEMORY)
        raise
    except BaseException as exc:  # pyo3's PanicException is a BaseException
        if not isinstance(exc, (SystemExit, KeyboardInterrupt)) and mapped_bytes("VmPeak") + NEAR_BOUND_BYTES >= limit:
            sys.exit(EXIT_OUT_OF_MEMORY)
        raise
    sys.stdout.write(answer)


if __name__ == "__main__":
    main()
