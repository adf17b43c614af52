"""Rendering the chart as Helm does: straight from this clone, as `helm install charts/ccsweep` would.

The chart has no dependencies, so nothing is downloaded or stood in for; its files/ symlinks
(workflows, dashboards, monitoring) point into this clone and Helm follows them.
Imported by tests/chart, tests/operator and tests/e2e.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from versions import KUBERNETES_VERSION

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts/ccsweep"
HELM = REPO / "bin/helm"
# The Kubernetes release the chart is rendered and validated for: the one the tools build.
KUBE_VERSION = KUBERNETES_VERSION.removeprefix("v")


def helm() -> Path:
    """The pinned Helm CLI (hack/tools/helm.sh builds it once into the cache)."""
    if not HELM.exists():
        subprocess.run([str(REPO / "hack/tools/helm.sh")], check=True, timeout=1800)
    return HELM


def run_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(helm()), *args], capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def values_args(values_files: Iterable[Path] = (), set_values: Iterable[str] = ()) -> list[str]:
    return [*(a for f in values_files for a in ("-f", str(f))), *(a for s in set_values for a in ("--set", s))]


def render(values_files: Iterable[Path] = (), set_values: Iterable[str] = (), namespace: str = "ccsweep",
           release: str = "rel") -> list[dict[str, Any]]:
    """The manifests `helm template` renders, as parsed documents."""
    out = run_helm("template", release, str(CHART), "-n", namespace,
                   "--kube-version", KUBE_VERSION, *values_args(values_files, set_values)).stdout
    return [d for d in yaml.safe_load_all(out) if d]
