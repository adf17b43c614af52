"""Starting one fan-out the way its mode says: `argo submit` of workflows/full-sweep.yaml (sweep), a
Sweep object the operator turns into that Workflow (operator), or the cell step fed its items from
a Workflow parameter (items).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time

import yaml

from benchmarks.fanout.controlplane import BIN, NAMESPACE, REPO, ControlPlane, in_ns
from benchmarks.fanout.workload import PRESET


def submit(plane: ControlPlane, workflow: dict, *parameters: str) -> str:
    """`argo submit` of `workflow` (written to a file: a 3,900-item parameter is too long for argv)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=plane.workdir) as manifest:
        manifest.write(yaml.safe_dump(workflow))
        manifest.flush()
        extra = [arg for p in parameters for arg in ("-p", p)]
        done = subprocess.run(in_ns([str(BIN / "argo"), f"--kubeconfig={plane.kubeconfig}", "submit", "-n",
                                     NAMESPACE, manifest.name, "-o", "name", *extra]),
                              capture_output=True, text=True, check=True)
    return done.stdout.strip()


def create_sweep(plane: ControlPlane, name: str, parallelism: int) -> str:
    """A Sweep of the full-sweep preset, as a user applies one; the name of the Workflow the operator makes."""
    spec = yaml.safe_load((REPO / "src/ccsweep/presets" / f"{PRESET}.yaml").read_text())
    spec.pop("name")
    spec["run"] = {"parallelism": parallelism}
    plane.kubectl("create", "-n", NAMESPACE, "-f", "-", input=json.dumps(
        {"apiVersion": "ccsweep.io/v1alpha1", "kind": "Sweep", "metadata": {"name": name}, "spec": spec}))
    end = time.monotonic() + 120
    while time.monotonic() < end:
        workflow = plane.kubectl("get", "sweep", "-n", NAMESPACE, name, "-o", "jsonpath={.status.workflow}").stdout
        if workflow:
            return workflow
        time.sleep(0.3)
    raise RuntimeError(f"the operator made no Workflow for Sweep {name} in 120 s")
