"""Rendering the chart as Helm does, here where no chart repository can be reached.

The chart declares four optional dependencies (Chart.yaml) that `helm dependency build` would
download. Helm refuses to render a chart whose declared dependencies are missing from charts/,
even when their conditions are off, so the chart is copied and each dependency gets an empty
stand-in chart of the declared name and version. With
its condition off, as in every scenario here, a dependency renders nothing either way.
Imported by tests/chart, tests/operator and tests/e2e.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
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


def dependencies() -> list[dict[str, Any]]:
    return yaml.safe_load((CHART / "Chart.yaml").read_text()).get("dependencies") or []


def chart_copy(dest: Path | None = None) -> Path:
    """A renderable copy of the chart, dependencies stood in for.

    Its symlinks (files/workflows, files/dashboards) point to the same places in this clone,
    so Helm follows them as it does for `helm install charts/ccsweep`.
    """
    dest = Path(tempfile.mkdtemp(prefix="ccsweep-chart-")) if dest is None else dest
    copy = dest / "ccsweep"
    shutil.copytree(CHART, copy, symlinks=True)
    for link in [p for p in copy.rglob("*") if p.is_symlink()]:
        target = (CHART / link.relative_to(copy)).resolve()
        link.unlink()
        link.symlink_to(target)
    for dep in dependencies():
        stub = copy / "charts" / dep["name"]
        stub.mkdir(parents=True)
        (stub / "Chart.yaml").write_text(yaml.safe_dump({
            "apiVersion": "v2", "name": dep["name"], "version": dep["version"],
            "description": "stand-in for the dependency (not downloadable here)"}))
    return copy


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
    with tempfile.TemporaryDirectory(prefix="ccsweep-chart-") as tmp:
        out = run_helm("template", release, str(chart_copy(Path(tmp))), "-n", namespace,
                       "--kube-version", KUBE_VERSION, *values_args(values_files, set_values)).stdout
    return [d for d in yaml.safe_load_all(out) if d]
