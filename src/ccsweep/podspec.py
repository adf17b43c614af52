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

#: An OCI image reference: [registry[:port]/]repository[:tag][@sha256:digest] (no spaces or quotes).
IMAGE_REF = (r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
             r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$")
#: Kubernetes quantities such as "1", "500m", "1.5" (cell CPU requests).
CPU_QUANTITY = r"^([0-9]+m|[0-9]+(\.[0-9]+)?)$"
#: Memory as the chart's values.schema.json takes it: binary (512Mi) or decimal (1G) units, or bytes.
MEMORY_QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$"
#: A cell's main container at less than 0.1 core misses the emulator's 1 ms budget; more than 64
#: cores is no node's. Memory: the runner and its flows take about 150 MiB (64 Mi is refused by the
#: kubelet's OOM killer at start-up); 64 GiB is no cell's.
CPU_MILLI_RANGE = (100, 64_000)
MEMORY_BYTES_RANGE = (128 << 20, 64 << 30)
_MEMORY_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
                 "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


class PodValueError(ValueError):
    """A value that may not reach a pod; str() is one line naming the parameter and what is allowed."""


def image_allowed(image: str, allowed: Sequence[str]) -> bool:
    """Whether one of the patterns `allowed` (exact references, `*` matching any characters) names `image`."""
    return any(fnmatch.fnmatchcase(image, pattern) for pattern in allowed)


def endpoint_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether one of the patterns `allowed` names a store URL or Pushgateway address (`*` matches any
    characters, a trailing '/' on either side is ignored), as image_allowed does for images: where
    a pod writes results or sends metrics is the chart's choice, like the code it runs."""
    target = url.rstrip("/")
    return any(fnmatch.fnmatchcase(target, pattern.rstrip("/")) for pattern in allowed)


#: Set by the chart in every workflow pod (and the operator): the stores and Pushgateways a Workflow's
#: parameters, or a Sweep, may name, comma-separated. Unset (no chart): no list.
ALLOWED_STORES_ENV = "CCSWEEP_ALLOWED_STORES"
ALLOWED_PUSHGATEWAYS_ENV = "CCSWEEP_ALLOWED_PUSHGATEWAYS"


def listed_in_env(variable: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The comma-separated list in `variable`, without empty entries."""
    return tuple(item.strip() for item in env.get(variable, "").split(",") if item.strip())


def check_endpoint(option: str, url: str, variable: str, env: Mapping[str, str]) -> str:
    """`url` (a store or a Pushgateway given as `option`) when the chart's list in `variable` allows it,
    or when no list is set (not in a pod of the chart's). One line naming the option otherwise."""
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


def check_cpu(cpu: str) -> str:
    """A cell pod's CPU request, as given, when it is a quantity of 100m to 64 cores."""
    low, high = CPU_MILLI_RANGE
    if not low <= cpu_milli(cpu) <= high:
        raise PodValueError(f"cell-cpu {cpu}: must be {low}m to {high // 1000} cores")
    return cpu


def check_memory(memory: str) -> str:
    """A cell pod's memory request and limit, as given, when it is 128Mi to 64Gi."""
    low, high = MEMORY_BYTES_RANGE
    if not low <= memory_bytes(memory) <= high:
        raise PodValueError(f"cell-memory {memory}: must be {low >> 20}Mi to {high >> 30}Gi")
    return memory
