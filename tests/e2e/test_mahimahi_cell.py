"""A cell on Mahimahi through Argo on the real cluster, in the pod its template gives it.

One short cell (BBR, 10 Mbit/s, 100 ms, 10 s) submitted as `argo submit workflows/full-sweep.yaml
-p link=mahimahi` with its spec inline and no `sweep` parameter: the spec names no link, the
workflow's `link` parameter moves it, and the plan names the sweep NAME-mahimahi for every later
step. The plan's item says `link: mahimahi`, the fan-out sends it to the `cell-mahimahi` template
(workflows/templates/ccsweep-cell.yaml), whose pod holds Mahimahi's privileges and no more, and
the result lands in MinIO with `link.backend == "mahimahi"`.

The node is this machine's kernel: Mahimahi's nested namespaces forward only when the host does
or when new namespaces inherit their creator's settings, so the run is wrapped in
tests/integration/mahimahi_host.py's mahimahi_host (net.core.devconf_inherit_init_net=3 for its
duration, the old value written back after), as the host tests do. Skipped, saying so, when the
cluster's cell image has no Mahimahi.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import pytest
import yaml

from support.clusterlib import REPO, NodeServices, PodWatch, template_of
from support.mahimahi_host import mahimahi_host
from support.versions import read_versions
from test_argo_sweep import SweepRun, param, run_sweep

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

pytestmark = pytest.mark.e2e

SPEC = """\
name: {name}
description: One short cell, put on upstream Mahimahi's link by the workflow's link parameter, for the
  end-to-end test on the local cluster.
experiments:
  - name: mahimahi
    title: "e2e: BBR on Mahimahi, 10 Mbit/s, 100 ms RTT"
    figure: goodput-vs-loss
    cc: [bbr]
    loss_percent: [0]
    rtt_ms: [100]
    bandwidth_mbps: [10]
    duration_s: 10
    warmup_s: 2
"""
RATE_MBPS = 10
#: Where the image's CCSWEEP_MAHIMAHI points: a link to the build's own folder, mahimahi-<commit>.
IMAGE_MAHIMAHI = "/opt/ccsweep/mahimahi/bin"


def template(name: str) -> dict:
    templates = yaml.safe_load((REPO / "workflows/templates/ccsweep-cell.yaml").read_text())["spec"]["templates"]
    return next(t for t in templates if t["name"] == name)


@pytest.fixture(scope="module")
def image_mahimahi(cluster: TestCluster, cell_image: str) -> str:
    """What the runner finds in the cluster's cell image: Mahimahi's folder and build (skip if none)."""
    pod = cluster.run_pod(f"t-mm-{uuid.uuid4().hex[:6]}", image=cell_image)
    try:
        shells = " ".join(f"{IMAGE_MAHIMAHI}/{n}" for n in ("mm-delay", "mm-loss", "mm-link"))
        listed = cluster.exec(pod, f"ls -ln {shells}")
        if listed.returncode != 0:
            pytest.skip(f"the cluster's cell image {cell_image} has no Mahimahi ({listed.stderr.strip()}): "
                        "build it from images/cell/Dockerfile (the e2e cluster's buildah image)")
        # The three shells, setuid root, and the runner's own lookup finds them ($CCSWEEP_MAHIMAHI).
        modes = [line.split()[:4] for line in listed.stdout.splitlines()]
        assert all(m[0] == "-rwsr-xr-x" and m[2:4] == ["0", "0"] for m in modes), listed.stdout
        found = cluster.exec(pod, "python3 -c 'from ccsweep.runner.mahimahi import find_mahimahi, mahimahi_version; "
                                  "f = find_mahimahi(); print(f, mahimahi_version(f))'")
        assert found.returncode == 0, found.stderr
    finally:
        cluster.delete_pod(pod)
    folder, version = found.stdout.split()
    # The runner names where the files are, not the link to them (find_mahimahi resolves it).
    assert folder == f"/opt/ccsweep/{version}/bin" and version.startswith("mahimahi-"), found.stdout
    return version


@pytest.fixture(scope="module")
def sweep(argo: TestCluster, sweep_namespace: str, node_services: NodeServices, image_mahimahi: str) -> SweepRun:
    name = f"e2e-mm-{uuid.uuid4().hex[:6]}"
    run = run_sweep(argo, sweep_namespace, node_services, SPEC.format(name=name), f"{name}-mahimahi",
                    parallelism=1, cell_cpu="1", around=lambda: mahimahi_host(("bbr",)), named_by_plan=True,
                    link="mahimahi")
    print(f"\n[e2e] mahimahi sweep {run.name}: {run.workflow['status'].get('phase')} "
          f"in {run.finished_at - run.submitted_at:.0f} s")
    return run


def test_the_workflow_succeeded(argo: TestCluster, sweep: SweepRun):
    assert sweep.workflow["status"]["phase"] == "Succeeded", sweep.failure_report(argo)


def test_the_cell_ran_from_the_mahimahi_template_only(sweep: SweepRun):
    (item,) = sweep.planned()
    assert item["link"] == "mahimahi"
    (plan,) = sweep.nodes("plan")
    assert param(plan, "sweep", "outputs") == sweep.name  # the name every later step was given
    assert {param(n, "id") for n in sweep.nodes("cell-mahimahi")} == {item["id"]}
    assert sweep.nodes("cell") == []   # the ccsweep-link step had no items: Skipped, no pod
    skipped = [n for n in sweep.workflow["status"]["nodes"].values()
               if template_of(n) == "cell" or n.get("displayName") == "cell"]
    assert skipped and all(n["phase"] == "Skipped" for n in skipped), skipped


def test_its_pod_holds_mahimahis_privileges_and_no_more(sweep: SweepRun):
    (events,) = sweep.cell_pods().values()
    assert PodWatch.first(events, PodWatch.main_started), "the cell's main container never started"
    pod = next(e.pod for e in reversed(events) if e.pod.get("spec", {}).get("containers"))
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    wanted = template("cell-mahimahi")["container"]["securityContext"]
    assert main["securityContext"] == wanted
    assert main["securityContext"] != template("cell")["container"]["securityContext"]
    assert pod["spec"]["serviceAccountName"] == "ccsweep-workflow"


def test_the_stored_result_is_mahimahis(sweep: SweepRun, image_mahimahi: str):
    (item,) = sweep.planned()
    raw = sweep.services.s3_get(f"{sweep.store_prefix}/cells/{item['id']}/result.json")
    assert raw is not None, f"no result for cell {item['id']}"
    result = json.loads(raw)
    assert result["status"] == "ok", result.get("error")
    assert result["cell"]["params"]["link"] == "mahimahi"
    assert result["link"]["backend"] == "mahimahi"
    assert result["link"]["version"] == image_mahimahi == f"mahimahi-{read_versions()['MAHIMAHI_COMMIT']}"
    assert result["environment"]["executor"] == "argo"
    assert result["link"]["uplink"]["out_packets"] > 0
    assert result["goodput_mbps"] > RATE_MBPS / 2, result["goodput_mbps"]
