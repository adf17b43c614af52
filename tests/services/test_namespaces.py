"""Two namespaces sharing one store and one Pushgateway, on a real MinIO and a real Pushgateway
(issue 39: a sweep's name belongs to one namespace).

Each `ccsweep` here runs as a Workflow pod runs it: a process whose $CCSWEEP_NAMESPACE is the
namespace the downward API gives its pod, with the Workflow's parameters as its options. Team A
plans and finishes a sweep named quick; team B, in the same bucket under the same base URL and
sweep name, can neither read A's manifest, results or report, nor replace them (even when its
`store` names A's folder, or it says revise), nor push or delete A's metric groups. And a store
URL with '..', '//' or an encoded segment is refused on every path before MinIO sees a request.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from ccsweep.cell import Cell
from ccsweep.metrics import CellMetrics
from ccsweep.plan import planned_cells
from ccsweep.store import REPORT_FILE, ResultStore, StoreError, open_store
from ccsweep.storeurls import NAMESPACE_ENV, namespace_store, path_problem
from servers import Server
from sweeps import ccsweep, sweep_env
from test_s3_store import result_of

A, B = "team-a", "team-b"


def as_pod(namespace: str | None, s3: dict[str, str], spool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ccsweep ARGS` as a pod of `namespace` runs it (None: on a person's machine)."""
    extra = {NAMESPACE_ENV: namespace} if namespace is not None else {}
    return ccsweep(*args, env=sweep_env(s3, spool, **extra), timeout=180)


def store_of(base: str, namespace: str) -> ResultStore:
    return open_store(namespace_store(base, namespace))


def finish_cells(store: ResultStore, pushgateway: str, namespace: str) -> list[Cell]:
    """Store a result for every planned cell of quick and push each cell's group, as its pod would."""
    cells = planned_cells(store, "quick")
    for seed, cell in enumerate(cells):
        result = result_of(seed).model_copy(update={"cell": cell})
        assert store.put_cell(result)
        metrics = CellMetrics(pushgateway, cell, namespace=namespace)
        metrics.finish(result)
    return cells


def groups(gateway: Server) -> set[tuple[tuple[str, str], ...]]:
    """Every group the Pushgateway holds, as its sorted grouping labels (job included)."""
    with urllib.request.urlopen(f"{gateway.url}/api/v1/metrics", timeout=5) as answer:
        data = json.load(answer)["data"]
    return {tuple(sorted(group["labels"].items())) for group in data}


def group(namespace: str, job: str, **labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"namespace": namespace, "job": job, **labels}.items()))


def test_two_namespaces_sharing_a_store_and_a_pushgateway_keep_apart(s3: dict[str, str], bucket_url: str,
                                                                     own_pushgateway: Server, tmp_path: Path):
    gateway = own_pushgateway.address
    spool = tmp_path / "spool"
    plan = ("plan", "quick", f"--store={bucket_url}", f"--pushgateway={gateway}")
    for namespace in (A, B):
        planned = as_pod(namespace, s3, spool, *plan)
        assert planned.returncode == 0, planned.stderr
    a_store, b_store = store_of(bucket_url, A), store_of(bucket_url, B)
    a_cells = finish_cells(a_store, gateway, A)
    b_cells = finish_cells(b_store, gateway, B)
    assert [c.id for c in a_cells] == [c.id for c in b_cells]   # one spec, one name: the same cell ids
    figures = as_pod(A, s3, spool, "figures", f"--store={bucket_url}", "--sweep=quick", f"--pushgateway={gateway}")
    assert figures.returncode == 0, figures.stderr
    manifest = a_store.read_bytes("sweeps/quick/manifest.json")
    report = a_store.read_bytes(f"sweeps/quick/{REPORT_FILE}")
    assert manifest and report
    a_keys = a_store.list_keys("")

    # Metric groups: A's figures step deleted A's cell groups only; B's, same sweep and cell ids, stay.
    held = groups(own_pushgateway)
    assert group(A, "ccsweep_sweep", sweep="quick") in held and group(B, "ccsweep_sweep", sweep="quick") in held
    for cell in a_cells:
        assert group(A, "ccsweep_cell", sweep="quick", cell=cell.id) not in held
        assert group(B, "ccsweep_cell", sweep="quick", cell=cell.id) in held
    # B finishes too: its figures step deletes its own cell groups, and A's sweep group keeps A's final results.
    assert as_pod(B, s3, spool, "figures", f"--store={bucket_url}", "--sweep=quick",
                  f"--pushgateway={gateway}").returncode == 0
    held = groups(own_pushgateway)
    assert not [g for g in held if ("job", "ccsweep_cell") in g]
    assert group(A, "ccsweep_sweep", sweep="quick") in held

    # B cannot read A's results: its quick has its own cells, none of A's results stored.
    status = as_pod(B, s3, spool, "status", f"--store={bucket_url}", "--sweep=quick")
    assert status.stdout.startswith(f"sweep quick: {len(b_cells)} cells, {len(b_cells)} stored"), status.stdout
    for cell in a_cells:
        assert a_store.has_result(cell.id)
    # ... nor, naming A's folder as its store, anything of A's: it lands in a folder of its own there.
    peek = as_pod(B, s3, spool, "status", f"--store={namespace_store(bucket_url, A)}", "--sweep=quick")
    assert peek.returncode == 2 and "has no manifest in" in peek.stderr
    assert f"{namespace_store(bucket_url, A)}/namespaces/{B}" in peek.stderr

    # Inside B's own namespace, another spec under its stored name is refused in one line...
    other = as_pod(B, s3, spool, "plan", "figure8", "--sweep=quick", f"--store={bucket_url}")
    (line,) = other.stderr.strip().splitlines()
    assert other.returncode == 2 and line.startswith("ccsweep: error:") and "--revise" in line
    # ... unless the submission says to replace it; and either way, A's manifest, report and keys stay.
    for store_url in (bucket_url, namespace_store(bucket_url, A)):
        replaced = as_pod(B, s3, spool, "plan", "figure8", "--sweep=quick", "--revise-if=true", f"--store={store_url}")
        assert replaced.returncode == 0, replaced.stderr
        rebuilt = as_pod(B, s3, spool, "figures", f"--store={store_url}", "--sweep=quick")
        assert rebuilt.returncode == 0, rebuilt.stderr
    assert b_store.list_keys("sweeps/quick/revisions/")   # B's own old plan, kept as a revision
    assert a_store.read_bytes("sweeps/quick/manifest.json") == manifest
    assert a_store.read_bytes(f"sweeps/quick/{REPORT_FILE}") == report
    assert a_store.list_sweeps() == ["quick"]
    assert [k for k in a_store.list_keys("") if not k.startswith(f"namespaces/{B}/")] == a_keys


HOSTILE_TAILS = ["/a/../b", "/..", "//a", "/.", "/%2e%2e/b", "/a%2fb", "/%2E%2E"]


@pytest.mark.parametrize("tail", HOSTILE_TAILS, ids=range(len(HOSTILE_TAILS)))   # the id names the test's prefix
def test_dot_dot_empty_and_encoded_segments_are_refused_on_every_path(s3: dict[str, str], bucket_url: str,
                                                                       tmp_path: Path, tail: str):
    """As a person's --store, as a pod's `store` parameter (with and without the chart's list) and
    opened directly: the same one line, exit 2, and MinIO holds nothing under the test's prefix."""
    url = bucket_url + tail
    line = f"ccsweep: error: --store {url}: {path_problem(url)}\n"
    spool = tmp_path / "spool"
    for namespace in (None, A):
        done = as_pod(namespace, s3, spool, "plan", "quick", f"--store={url}")
        assert (done.returncode, done.stderr) == (2, line), namespace
    listed = ccsweep("plan", "quick", f"--store={url}",
                     env=sweep_env(s3, spool, CCSWEEP_ALLOWED_STORES=f"{bucket_url}/*", **{NAMESPACE_ENV: A}))
    assert (listed.returncode, listed.stderr) == (2, line)
    with pytest.raises(StoreError) as raised:
        open_store(url)
    assert f"ccsweep: error: {raised.value}\n" == line
    assert open_store(bucket_url).list_keys("") == []
