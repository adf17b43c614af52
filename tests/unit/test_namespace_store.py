"""A sweep's name belongs to one namespace (issue 39): every Workflow pod reads and writes its own
namespace's folder of the store, STORE/namespaces/NAMESPACE, from the namespace the downward API
gives it ($CCSWEEP_NAMESPACE), and the operator plans a Sweep in the same folder for the Sweep's
namespace. Without the variable (a person's machine, the local executor) nothing changes.
The same on real MinIO and a real Pushgateway: tests/services/test_namespaces.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from ccsweep.cli import main
from ccsweep.store import open_store
from ccsweep.storeurls import NAMESPACE_ENV, NamespaceError, namespace_store
from ccsweep_operator.reconcile import OperatorSettings, SweepObject, decide

REPO = Path(__file__).resolve().parents[2]
NOT_NAMESPACES = ["", "Team", "a_b", "a/b", "..", ".", "a.b", "-a", "a-", "x" * 64, "a%2e", "a\nb", "a b"]


@pytest.mark.parametrize(("base", "expected"), [
    ("s3://ccsweep/results", "s3://ccsweep/results/namespaces/team-a"),
    ("s3://ccsweep/results/", "s3://ccsweep/results/namespaces/team-a"),
    ("s3://ccsweep", "s3://ccsweep/namespaces/team-a"),
    ("file:///srv/results", "file:///srv/results/namespaces/team-a"),
    ("results", "results/namespaces/team-a"),
])
def test_a_namespaces_store_is_a_folder_of_the_base(base: str, expected: str):
    assert namespace_store(base, "team-a") == expected


@pytest.mark.parametrize("name", NOT_NAMESPACES)
def test_a_name_that_is_no_namespace_is_refused(name: str):
    with pytest.raises(NamespaceError) as raised:
        namespace_store("s3://ccsweep/results", name)
    assert "\n" not in str(raised.value) and "not a Kubernetes namespace name" in str(raised.value)


def plan(tmp_path: Path, *args: str, namespace: str | None = None) -> Result:
    env = {NAMESPACE_ENV: namespace} if namespace is not None else {}
    return CliRunner().invoke(main, ["plan", *args], env=env, catch_exceptions=False)


@pytest.mark.parametrize("name", ["..", "a/b", "Team", ""])
def test_a_pod_whose_namespace_is_no_name_stops_before_the_store(tmp_path: Path, name: str):
    done = plan(tmp_path, "quick", f"--store=file://{tmp_path}/store", namespace=name)
    assert done.exit_code == 2
    assert done.output.startswith(f"ccsweep: error: namespace {name!r} ($CCSWEEP_NAMESPACE): not a Kubernetes "
                                  "namespace name") and done.output.count("\n") == 1
    assert not (tmp_path / "store").exists()


def test_a_pod_plans_in_its_namespaces_folder_and_a_person_at_the_base(tmp_path: Path):
    base = f"file://{tmp_path}/store"
    assert plan(tmp_path, "quick", f"--store={base}", namespace="team-a").exit_code == 0
    assert (tmp_path / "store/namespaces/team-a/sweeps/quick/manifest.json").is_file()
    assert not (tmp_path / "store/sweeps").exists()
    assert plan(tmp_path, "quick", f"--store={base}").exit_code == 0   # no $CCSWEEP_NAMESPACE: as before
    assert (tmp_path / "store/sweeps/quick/manifest.json").is_file()


def test_a_store_naming_another_namespace_ends_up_nested_under_the_pods_own(tmp_path: Path):
    """A submitter in team-a who passes team-b's folder as `store` plans in a folder of team-a's
    nested there, which none of team-b's keys (sweeps/, cells/, traces/) can name: team-b's
    manifest, under the same sweep name, stays as it was and its store lists no other sweep."""
    base = f"file://{tmp_path}/store"
    assert plan(tmp_path, "quick", f"--store={base}", namespace="team-b").exit_code == 0
    victim = tmp_path / "store/namespaces/team-b/sweeps/quick/manifest.json"
    before = victim.read_bytes()
    done = plan(tmp_path, "figure8", "--sweep=quick", "--revise", f"--store={base}/namespaces/team-b",
                namespace="team-a")
    assert done.exit_code == 0, done.output
    assert (tmp_path / "store/namespaces/team-b/namespaces/team-a/sweeps/quick/manifest.json").is_file()
    assert victim.read_bytes() == before
    assert not (victim.parent / "revisions").exists()
    assert open_store(f"{base}/namespaces/team-b").list_sweeps() == ["quick"]


def test_the_operator_and_its_workflows_pods_open_the_same_store(tmp_path: Path):
    """The operator plans a Sweep in its namespace's folder and gives its Workflow the base: the
    Workflow's pods, told only their namespace by the API, find that plan (the plan step reads it
    and writes no other; the verdict counts its cells), and a pod of another namespace does not."""
    body = yaml.safe_load((REPO / "operator/examples/quick/sweep.yaml").read_text())
    body["metadata"] |= {"namespace": "lab", "uid": "u", "generation": 1}
    decision = decide(SweepObject.from_body(body), OperatorSettings(store=f"file://{tmp_path}/store"))
    assert decision.workflow is not None, decision.status["message"]
    params = {p["name"]: p["value"] for p in decision.workflow["spec"]["arguments"]["parameters"]}
    namespace = decision.workflow["metadata"]["namespace"]
    assert params["store"] == f"file://{tmp_path}/store"   # the base: each pod adds its own namespace
    assert decision.status["store"] == namespace_store(params["store"], namespace)
    (manifest,) = (tmp_path / "store").rglob("manifest.json")
    before = manifest.read_bytes()

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(params["spec-yaml"])
    planned = plan(tmp_path, f"--spec-file={spec_file}", f"--sweep={params['sweep']}", f"--store={params['store']}",
                   namespace=namespace)
    assert planned.exit_code == 0, planned.output
    assert list((tmp_path / "store").rglob("manifest.json")) == [manifest] and manifest.read_bytes() == before

    def verdict(pod_namespace: str) -> Result:
        return CliRunner().invoke(main, ["status", f"--store={params['store']}", f"--sweep={params['sweep']}"],
                                  env={NAMESPACE_ENV: pod_namespace})

    ours = verdict(namespace)
    assert ours.exit_code == 1 and ours.output.startswith(f"sweep {params['sweep']}: 2 cells, 0 stored"), ours.output
    theirs = verdict("mallory")
    assert theirs.exit_code == 2 and theirs.output == (
        f"ccsweep: error: sweep {params['sweep']!r} has no manifest in file://{tmp_path}/store/namespaces/mallory "
        "(run `ccsweep plan` or `ccsweep run` first)\n")


def test_the_local_executor_gives_its_cells_the_store_it_opened_and_not_the_namespace(tmp_path: Path, monkeypatch):
    """`ccsweep run` where $CCSWEEP_NAMESPACE is set has opened the namespace's folder already: its
    `ccsweep cell` children get that folder as --store and no namespace to nest it again."""
    from ccsweep import executor
    from ccsweep.expand import expand
    from ccsweep.specload import load_spec

    started: dict[str, Any] = {}

    class Recorded:
        def __init__(self, cmd: list[str], **options: object):
            started.update(cmd=cmd, env=options["env"])

    monkeypatch.setattr(executor.subprocess, "Popen", Recorded)
    monkeypatch.setenv(NAMESPACE_ENV, "team-a")
    store = open_store(namespace_store(f"file://{tmp_path}/store", "team-a"))
    cell = expand(load_spec("quick"))[0]
    executor._start(executor._Queued(cell), store, tmp_path / "work", [], alone=False)
    cmd = started["cmd"]
    assert cmd[cmd.index("--store") + 1] == f"file://{tmp_path}/store/namespaces/team-a"
    assert NAMESPACE_ENV not in started["env"]
