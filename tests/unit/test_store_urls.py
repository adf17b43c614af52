"""Store prefixes match segment by segment, and '..', '//' and encoded forms are refused the same
way on every path: a CLI option, a Workflow parameter in a pod of the chart's, a Sweep (issue 39,
item 5). Before, the chart's lists were matched with fnmatch, whose `*` crossed '/': with
`s3://ccsweep/teams/*` listed, `s3://ccsweep/teams/a/../b` and any deeper prefix matched."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccsweep.cli import main
from ccsweep.crd import RunSettings
from ccsweep.podspec import endpoint_allowed
from ccsweep.store import StoreError, open_store
from ccsweep.storeurls import path_problem
from ccsweep_operator.reconcile import OperatorSettings, SweepObject, decide

TEAMS = "s3://ccsweep/teams/*"
#: Each names another place than it seems to, or the same by another spelling.
HOSTILE = ["s3://ccsweep/teams/a/../b", "s3://ccsweep/teams/..", "s3://ccsweep/teams//a", "s3://ccsweep/teams/.",
           "s3://ccsweep/teams/%2e%2e", "s3://ccsweep/teams/a%2fb", "s3://ccsweep/teams/%2E%2E/b"]


@pytest.mark.parametrize(("url", "allowed", "expected"), [
    ("s3://ccsweep/teams/a", [TEAMS], True),
    ("s3://ccsweep/teams/a/", [TEAMS], True),
    ("s3://ccsweep/teams/a/b", [TEAMS], False),          # `*` stays within one segment
    ("s3://ccsweep/teams", [TEAMS], False),
    ("s3://ccsweep/x/results", ["s3://ccsweep/*/results"], True),
    ("s3://ccsweep/x/y/results", ["s3://ccsweep/*/results"], False),
    ("s3://ccsweep/team-a-x", ["s3://ccsweep/team-*-x"], True),
    ("s3://ccsweep/teams/a?", ["s3://ccsweep/teams/a?"], True),   # only `*` is special
    ("s3://ccsweep/teams/ab", ["s3://ccsweep/teams/a?"], False),
    ("s3://ccsweep.evil/teams/a", [TEAMS], False),
    ("http://pushgateway.monitoring:9091", ["http://pushgateway.monitoring:*"], True),
])
def test_patterns_match_segment_by_segment(url: str, allowed: list[str], expected: bool):
    assert endpoint_allowed(url, allowed) is expected


@pytest.mark.parametrize("url", HOSTILE)
def test_a_dot_dot_an_empty_or_an_encoded_segment_matches_no_pattern(url: str):
    assert fnmatch.fnmatchcase(url, TEAMS)  # the old match let each through
    assert not endpoint_allowed(url, [TEAMS, "s3://ccsweep/*", "*"])
    assert path_problem(url) is not None


@pytest.mark.parametrize("url", HOSTILE + ["file:///tmp/ccsweep/../etc", "results/../../x", "file:///tmp//x"])
def test_every_path_refuses_it_with_the_same_line(url: str):
    """The CLI (a person's --store), a chart's pod (a Workflow parameter, with the chart's list set)
    and opening the store directly all say the same; no store is opened."""
    line = f"ccsweep: error: --store {url}: {path_problem(url)}\n"
    for env in ({}, {"CCSWEEP_ALLOWED_STORES": f"{TEAMS},s3://ccsweep/*"}):
        done = CliRunner().invoke(main, ["plan", "quick", "--store", url], env=env)
        assert (done.exit_code, done.output) == (2, line), env
    with pytest.raises(StoreError) as raised:
        open_store(url)
    assert f"ccsweep: error: {raised.value}\n" == line


@pytest.mark.parametrize("url", ["./results", "results", "/tmp/ccsweep-results", "file:///tmp/x/", "s3://b/p"])
def test_a_folder_named_as_a_person_names_it_is_taken(url: str):
    assert path_problem(url) is None


@pytest.mark.parametrize("url", HOSTILE)
def test_a_sweep_naming_it_is_invalid(tmp_path: Path, url: str):
    """The CRD's pattern refuses it at admission (and the operator, for a Sweep an older CRD let
    in); the operator's allowlist check refuses it on its own too."""
    body = {"metadata": {"name": "s", "namespace": "lab", "uid": "u", "generation": 1},
            "spec": {"experiments": [{"name": "e", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [10],
                                      "bandwidth_mbps": [10], "duration_s": 1}], "run": {"store": url}}}
    settings = OperatorSettings(store=f"file://{tmp_path}", allowed_stores=(TEAMS, "s3://ccsweep/*"))
    decision = decide(SweepObject.from_body(body), settings)
    assert decision.status["phase"] == "Invalid" and decision.workflow is None
    assert "run.store" in decision.status["message"]
    refused = settings.refusal("s", RunSettings.model_construct(store=url))
    assert refused is not None and refused.startswith(f"Sweep s: run.store {url} is not allowed")
    assert not any(tmp_path.iterdir())
