"""Rendering the chart as Helm does: straight from this clone, as `helm install charts/ccsweep` would.

The chart has no dependencies, so nothing is downloaded or stood in for; its files/ symlinks
(workflows, dashboards, monitoring) point into this clone and Helm follows them.
Imported by tests/chart, tests/operator, tests/release and tests/e2e (also through support.clusterlib),
which also read docs/install.md's commands and values here (install_doc), so the documented install
is the tested one.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from support.versions import KUBERNETES_VERSION

REPO = Path(__file__).resolve().parents[1]
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


INSTALL_DOC = REPO / "docs/install.md"
_BLOCK = re.compile(r"^```(?P<lang>\w+)\n(?P<body>.*?)^```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class InstallDoc:
    """What docs/install.md tells a user to run, read from its code blocks (not a copy of them)."""

    helm_install: list[str]       # the `helm install` command's arguments after `helm`
    values: str                   # the ccsweep-values.yaml block it installs with
    monitoring_values: str        # the optional monitoring values block
    label_namespace: list[str]    # the `kubectl label namespace` command's arguments after `kubectl`
    commands: list[list[str]]     # every command line of its sh blocks, split as a shell would
    sections: dict[str, list[list[str]]]  # those command lines under each `## ` heading, in order


#: The page's shell substitution for the cell image's tag (the clone's build identity).
IMAGE_TAG_COMMAND = "$(make -s image-tag)"


def _sh_commands(text: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for m in _BLOCK.finditer(text) if m["lang"] == "sh"
            for line in m["body"].splitlines() if line.strip() and not line.lstrip().startswith("#")]


def install_doc() -> InstallDoc:
    text = INSTALL_DOC.read_text()
    blocks = [(m["lang"], m["body"]) for m in _BLOCK.finditer(text)]
    commands = _sh_commands(text)
    sections = {part.split("\n", 1)[0].strip(): _sh_commands(part) for part in re.split(r"^## ", text, flags=re.M)[1:]}

    def command(*start: str) -> list[str]:
        """The one command line starting with these words, without the program's name."""
        (found,) = [c[1:] for c in commands if c[:len(start)] == list(start)]
        return found

    def yaml_block(first_line: str) -> str:
        (found,) = [body for lang, body in blocks if lang == "yaml" and body.startswith(first_line)]
        return found

    return InstallDoc(helm_install=command("helm", "install", "ccsweep", "charts/ccsweep"),
                      values=yaml_block("# ccsweep-values.yaml"),
                      monitoring_values=yaml_block("serviceMonitor:"),
                      label_namespace=command("kubectl", "label", "namespace"), commands=commands,
                      sections=sections)
