"""A Sweep's name in the store is derived from its namespace and name (crd.store_name), and where a
Sweep may write or send metrics is matched against the chart's lists (podspec.endpoint_allowed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccsweep.crd import MAX_SWEEP_NAME, crd, store_name, sweep_from_resource
from ccsweep.podspec import endpoint_allowed
from ccsweep.spec import SLUG, SpecError
from ccsweep.storeurls import namespace_store

QUICK = {"experiments": [{"name": "loss", "cc": ["bbr"], "loss_percent": [1], "rtt_ms": [20], "bandwidth_mbps": [10],
                          "queue": [{"kind": "droptail", "packets": 100}], "duration_s": 3, "warmup_s": 1}]}


def test_the_derivation_is_stable():
    """Pinned: a changed derivation would plan every existing Sweep again under a new name."""
    assert store_name("ccsweep", "quick-e2e") == "ccsweep-quick-e2e-77225731318f"
    assert store_name("lab", "quick-e2e") == "lab-quick-e2e-27a5781e8eff"


@pytest.mark.parametrize(("namespace", "name"), [
    ("a", "b"), ("a" * 63, "b" * 63), ("lab", "q" * 63), ("l" * 63, "q"), ("lab", "v1.2.three"),
    ("lab", "x" + "-" * 61 + "y"), ("lab-", "-"),  # the readable part cut at a '-': stripped, never a trailing '-'
])
def test_every_namespace_and_name_give_a_store_name_within_a_label(namespace: str, name: str):
    derived = store_name(namespace, name)
    assert re.fullmatch(SLUG, derived) and len(derived) <= 63, derived


@pytest.mark.parametrize(("first", "second"), [
    (("a-b", "c"), ("a", "b-c")),                              # the same readable NAMESPACE-NAME
    (("lab", "v1.2"), ("lab", "v1-2")),                        # '.' written as '-'
    (("lab", "x" * 60 + "1"), ("lab", "x" * 60 + "2")),        # cut short to the same prefix
    (("team-a", "figure8"), ("team-b", "figure8")),            # one name in two namespaces
])
def test_different_sweeps_never_share_a_store_name(first: tuple[str, str], second: tuple[str, str]):
    assert store_name(*first) != store_name(*second)


def test_a_sweep_is_stored_under_the_derived_name_and_may_not_choose_another():
    spec, _ = sweep_from_resource(QUICK, "quick", store_name("lab", "quick"))
    assert spec.name == store_name("lab", "quick")
    same, _ = sweep_from_resource({**QUICK, "name": "quick"}, "quick", store_name("lab", "quick"))
    assert same == spec
    with pytest.raises(SpecError, match=r"^Sweep quick: spec.name 'figure8' is not allowed: .* leave spec.name unset$"):
        sweep_from_resource({**QUICK, "name": "figure8"}, "quick", store_name("lab", "quick"))


def test_the_crd_refuses_a_long_name_and_a_chosen_spec_name_at_admission():
    """What the API server enforces (tests/operator/test_operator.py sends it such Sweeps)."""
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["metadata"]["properties"]["name"]["maxLength"] == MAX_SWEEP_NAME == 63
    rules = [r["rule"] for r in schema["x-kubernetes-validations"]]
    assert rules == ["!has(self.spec.name) || self.spec.name == self.metadata.name"]


@pytest.mark.parametrize(("url", "allowed", "expected"), [
    ("s3://ccsweep/results", ["s3://ccsweep/results"], True),
    ("s3://ccsweep/results/", ["s3://ccsweep/results"], True),          # a trailing '/' names the same prefix
    ("s3://ccsweep/results", ["s3://ccsweep/results/"], True),
    ("s3://ccsweep/results-b", ["s3://ccsweep/results"], False),        # a look-alike prefix
    ("s3://ccsweep/results/b", ["s3://ccsweep/results"], False),        # below it only with a pattern
    ("s3://ccsweep/teams/a", ["s3://ccsweep/teams/*"], True),
    ("s3://ccsweep.evil/teams/a", ["s3://ccsweep/teams/*"], False),
    ("pushgateway.monitoring:9091", ["pushgateway.monitoring:9091"], True),
    ("pushgateway.monitoring:9092", ["pushgateway.monitoring:9091"], False),
    ("169.254.169.254", [], False),                                     # an empty list allows nothing
])
def test_endpoints_match_the_charts_list_exactly_or_by_pattern(url: str, allowed: list[str], expected: bool):
    assert endpoint_allowed(url, allowed) is expected


def test_the_install_page_prints_the_derived_report_path():
    page = (Path(__file__).resolve().parents[2] / "docs/install.md").read_text()
    # In namespace ccsweep's folder of the store (storeurls.namespace_store), under its derived name.
    folder = namespace_store("s3://ccsweep/results", "ccsweep")
    assert f"{folder}/sweeps/{store_name('ccsweep', 'quick-e2e')}/report.html" in page
    assert f"{folder}/sweeps/my-sweep/report.html" in page


def test_in_a_charts_pod_a_store_or_pushgateway_off_the_list_exits_2(tmp_path: Path):
    """Every workflow pod's ccsweep reads the chart's lists from its environment: a Workflow parameter
    naming another store or Pushgateway stops the pod before anything is opened or sent."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CCSWEEP_ALLOWED_STORES": f"file://{tmp_path}/allowed/*",
           "CCSWEEP_ALLOWED_PUSHGATEWAYS": ""}

    def plan(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ccsweep", "plan", "quick", *args], capture_output=True,
                              text=True, env=env, timeout=120)

    other = plan(f"--store=file://{tmp_path}/victim")
    assert other.returncode == 2 and other.stderr == (
        f"ccsweep: error: --store file://{tmp_path}/victim: not allowed; allowed: file://{tmp_path}/allowed/* "
        "(CCSWEEP_ALLOWED_STORES, from the chart's values)\n")
    pushed = plan(f"--store=file://{tmp_path}/allowed/a", "--pushgateway=169.254.169.254:80")
    assert pushed.returncode == 2 and pushed.stderr.startswith(
        "ccsweep: error: --pushgateway 169.254.169.254:80: not allowed; allowed: none (CCSWEEP_ALLOWED_PUSHGATEWAYS")
    assert not (tmp_path / "victim").exists() and not (tmp_path / "allowed").exists()
    listed = plan(f"--store=file://{tmp_path}/allowed/a", "--pushgateway=")
    assert listed.returncode == 0, listed.stderr
    assert (tmp_path / "allowed" / "a" / "sweeps" / "quick" / "manifest.json").is_file()
