"""What a cell pod may be asked for: the values of its pod spec, typed and range-checked here.

A Workflow's parameters are free text chosen by whoever submits it. Before any of them reaches a
pod, the plan step (`ccsweep plan`) checks it here and prints it again, as a typed item field, for
the fan-out: the image against the chart's allowlist, the CPU and memory requests as Kubernetes
quantities within what a cell can use, the node selector as labels plan computes itself. The cell
template builds its podSpecPatch from those fields with Argo's toJson, so no value is pasted into
JSON text (docs/security.md, "Who may submit what").
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

from ccsweep.storeurls import path_problem

#: An OCI image reference: [registry[:port]/]repository[:tag][@sha256:digest] (no spaces or quotes).
IMAGE_REF = (r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
             r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$")
#: Kubernetes quantities such as "1", "500m", "1.5" (cell CPU requests).
CPU_QUANTITY = r"^([0-9]+m|[0-9]+(\.[0-9]+)?)$"
#: Memory as the chart's values.schema.json takes it: binary (512Mi) or decimal (1G) units, or bytes.
MEMORY_QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$"
#: A cell's main container at less than 0.1 core misses the emulator's 1 ms budget; a measured
#: cell uses about one core (the emulator's packet loop and the flows' endpoints), a Mahimahi cell
#: up to 2.2 times its ccsweep-link request (plan.cell_cpu_request), so 16 cores leave room for a
#: `cell-cpu` of 7 on either link and refuse a pod that would take a node (cpu=60). Memory: the
#: runner and its flows take about 150 MiB (64 Mi is refused by the kubelet's OOM killer at
#: start-up); 16 GiB is a hundred times that, and no cell's. The one statement of these bounds:
#: the plan step checks the values it is given against them (check_cpu, check_memory), and a cell
#: pod the values it was given, as the downward API reports them (`ccsweep cell`), whatever made it.
CPU_MILLI_RANGE = (100, 16_000)
MEMORY_BYTES_RANGE = (128 << 20, 16 << 30)
#: The bounds as people read them, for messages and help.
CPU_BOUNDS = f"{CPU_MILLI_RANGE[0]}m to {CPU_MILLI_RANGE[1] // 1000} cores"
MEMORY_BOUNDS = f"{MEMORY_BYTES_RANGE[0] >> 20}Mi to {MEMORY_BYTES_RANGE[1] >> 30}Gi"
_MEMORY_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
                 "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


class PodValueError(ValueError):
    """A value that may not reach a pod; str() is one line naming the parameter and what is allowed."""


def image_allowed(image: str, allowed: Sequence[str]) -> bool:
    """Whether one of the patterns `allowed` (exact references, `*` matching any characters) names `image`."""
    return any(fnmatch.fnmatchcase(image, pattern) for pattern in allowed)


def endpoint_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether one of the patterns `allowed` names a store URL or Pushgateway address, as image_allowed
    does for images: where a pod writes results or sends metrics is the chart's choice, like the
    code it runs. Matched segment by segment ('/' apart, a trailing '/' on either side ignored):
    a pattern and the URL have as many segments, and `*` matches any characters within one, so
    `s3://ccsweep/teams/*` names `s3://ccsweep/teams/a` but not `s3://ccsweep/teams/a/b`. A URL
    whose path has a '.', '..', empty or percent-encoded segment (storeurls) matches nothing."""
    if path_problem(url) is not None:
        return False
    target = url.rstrip("/").split("/")
    return any(_segments_match(target, pattern.rstrip("/").split("/")) for pattern in allowed)


def _segments_match(target: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether each segment of `target` matches the one of `pattern` (`*`: any characters within it)."""
    if len(target) != len(pattern):
        return False
    return all(re.fullmatch(".*".join(map(re.escape, wanted.split("*"))), given) is not None
               for given, wanted in zip(target, pattern, strict=True))


#: Set by the chart in every workflow pod (and the operator): the stores and Pushgateways a Workflow's
#: parameters, or a Sweep, may name, comma-separated. Unset (no chart): no list.
ALLOWED_STORES_ENV = "CCSWEEP_ALLOWED_STORES"
ALLOWED_PUSHGATEWAYS_ENV = "CCSWEEP_ALLOWED_PUSHGATEWAYS"


def listed_in_env(variable: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The comma-separated list in `variable`, without empty entries."""
    return tuple(item.strip() for item in env.get(variable, "").split(",") if item.strip())


def check_endpoint(option: str, url: str, variable: str, env: Mapping[str, str]) -> str:
    """`url` (a store or a Pushgateway given as `option`) when its path is well formed (storeurls, on
    every path) and the chart's list in `variable` allows it, or no list is set (not in a pod of the
    chart's). One line naming the option otherwise."""
    problem = path_problem(url)
    if problem is not None:
        raise PodValueError(f"{option} {url}: {problem}")
    if variable not in env:
        return url
    allowed = listed_in_env(variable, env)
    if not endpoint_allowed(url, allowed):
        raise PodValueError(f"{option} {url}: not allowed; allowed: {', '.join(allowed) or 'none'} "
                            f"({variable}, from the chart's values)")
    return url


def check_image(image: str, allowed: Sequence[str]) -> str:
    """`image` when it is a well-formed reference that one of `allowed` (`*`: any characters) matches."""
    if len(image) > 512 or not re.fullmatch(IMAGE_REF, image):
        raise PodValueError(f"image {image[:80]!r}: not an image reference (registry/path:tag[@sha256:...])")
    if not image_allowed(image, allowed):
        raise PodValueError(f"image {image}: not allowed; allowed: {', '.join(allowed) or 'none'} "
                            "(the chart's image and operator.allowedImages)")
    return image


def check_cpu(cpu: str) -> str:
    """A cell pod's CPU request, as given, when it is a quantity within CPU_BOUNDS."""
    check_cpu_milli("cell-cpu", cpu, cpu_milli(cpu))
    return cpu


def check_memory(memory: str) -> str:
    """A cell pod's memory request and limit, as given, when it is within MEMORY_BOUNDS."""
    check_memory_bytes("cell-memory", memory, memory_bytes(memory))
    return memory


def cpu_milli(cpu: str) -> int:
    """A CPU quantity ("1", "500m", "1.5") in millicores, rounded up; PodValueError when it is none."""
    if len(cpu) > 16 or not re.fullmatch(CPU_QUANTITY, cpu):
        raise PodValueError(f"cell-cpu {cpu[:32]!r}: not a CPU quantity (e.g. 900m or 1)")
    return math.ceil(Decimal(cpu[:-1]) if cpu.endswith("m") else Decimal(cpu) * 1000)


def memory_bytes(memory: str) -> int:
    """A memory quantity ("512Mi", "1G", bytes) in bytes, rounded up; PodValueError when it is none."""
    found = re.fullmatch(MEMORY_QUANTITY, memory) if len(memory) <= 16 else None
    if found is None:
        raise PodValueError(f"cell-memory {memory[:32]!r}: not a memory quantity (e.g. 512Mi or 1Gi)")
    unit = found.group(2) or ""
    return math.ceil(Decimal(memory.removesuffix(unit)) * _MEMORY_UNITS[unit])


def check_cpu_milli(name: str, shown: str, milli: Decimal | int) -> None:
    """A CPU request of `milli` millicores (given as `name` `shown`) within CPU_MILLI_RANGE."""
    low, high = CPU_MILLI_RANGE
    if not low <= milli <= high:
        raise PodValueError(f"{name} {shown}: must be {CPU_BOUNDS}")


def check_memory_bytes(name: str, shown: str, size: Decimal | int) -> None:
    """A memory request and limit of `size` bytes (given as `name` `shown`) within MEMORY_BYTES_RANGE."""
    low, high = MEMORY_BYTES_RANGE
    if not low <= size <= high:
        raise PodValueError(f"{name} {shown}: must be {MEMORY_BOUNDS}")
