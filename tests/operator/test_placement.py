"""A Sweep whose algorithm no node offers fails at once with one line, before any Workflow exists.

The nodes are label dicts as the node probe writes them; the Sweep is the quick example planned
into a real file store. That the Sweep ends within seconds on a real cluster is the e2e's to show.
"""

from __future__ import annotations

import copy
from pathlib import Path

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.crd import SweepStatus
from ccsweep.placement import Node, unplaceable
from ccsweep_operator.reconcile import SweepObject, decide
from test_reconcile import settings, sweep_object

PROBED = {"ccsweep.io/kernel": "6.1.0-18-amd64", "ccsweep.io/cc-cubic": "true", "ccsweep.io/cc-reno": "true",
          "ccsweep.io/loadable-cc-bbr": "true", "ccsweep.io/loadable-cc-vegas": "true"}


def cell(*ccs: str) -> Cell:
    link = DirectionParams(rate_mbps=10, delay_ms=5, loss=0)
    return Cell.build("s", "e", CellParams(flows=tuple(FlowParams(cc=cc) for cc in ccs), duration_s=5, warmup_s=1,
                                           seed=1, uplink=link, downlink=link))


def test_every_cell_placed_when_some_node_offers_its_algorithms():
    nodes = [Node("a", PROBED), Node("b", {**PROBED, "ccsweep.io/cc-bbr": "true"})]
    assert unplaceable([cell("cubic"), cell("bbr"), cell("bbr", "cubic")], nodes) is None


def test_missing_algorithm_named_with_every_nodes_kernel_and_what_it_could_load():
    nodes = [Node("a", PROBED), Node("b", {"ccsweep.io/kernel": "6.18.0", "ccsweep.io/cc-cubic": "true"})]
    message = unplaceable([cell("cubic"), cell("bbr")], nodes)
    assert message == ("no node offers congestion control bbr; nodes: a 6.1.0-18-amd64 (could load bbr); "
                       "b 6.18.0 - the chart's nodeSetup.enabled=true with nodeSetup.modules loads them")
    assert "\n" not in message


def test_algorithms_offered_only_on_different_nodes_are_not_placed_together():
    nodes = [Node("a", {"ccsweep.io/cc-bbr": "true"}), Node("b", {"ccsweep.io/cc-cubic": "true"})]
    assert unplaceable([cell("bbr", "cubic")], nodes) == (
        "no node offers congestion controls bbr and cubic on one node; nodes: "
        "a kernel unknown (no node probe); b kernel unknown (no node probe)")


def test_a_big_cluster_still_gives_one_line():
    nodes = [Node(f"n{i}", {"ccsweep.io/kernel": "6.18.0"}) for i in range(40)]
    message = unplaceable([cell("westwood")], nodes)
    assert message is not None and message.endswith("n4 6.18.0; and 35 more")
    assert unplaceable([cell("westwood")], []) is None  # no nodes yet (scaled to zero): they may still come


def test_nodes_the_probe_has_not_reported_on_say_nothing_yet():
    fresh = [Node("new", {"kubernetes.io/os": "linux"})]
    assert unplaceable([cell("bbr")], fresh) is None  # the probe starts with the chart: not Failed before it reports
    assert unplaceable([cell("bbr")], [*fresh, Node("a", PROBED)]) == (
        "no node offers congestion control bbr; nodes: a 6.1.0-18-amd64 (could load bbr) - the chart's "
        "nodeSetup.enabled=true with nodeSetup.modules loads them")


def with_cc(sweep: SweepObject, cc: str) -> SweepObject:
    spec = copy.deepcopy(dict(sweep.spec))
    for experiment in spec["experiments"]:
        experiment["cc"] = [cc]
    return SweepObject(sweep.name, sweep.namespace, sweep.uid, sweep.generation, spec)


def test_sweep_fails_at_once_and_creates_no_workflow(tmp_path: Path):
    decision = decide(with_cc(sweep_object("quick"), "vegas"), settings(tmp_path), nodes=[Node("a", PROBED)])
    assert decision.workflow is None and not decision.retry
    status = SweepStatus.model_validate(decision.status)
    assert status.phase == "Failed"
    assert status.message.startswith("no node offers congestion control vegas; nodes: a 6.1.0-18-amd64 (could load")
    planned = next(c for c in status.conditions if c.type == "Planned")
    assert (planned.status, planned.reason) == ("False", "NoNodeOffers")


def test_sweep_gets_its_workflow_when_a_node_offers_the_algorithm(tmp_path: Path):
    decision = decide(with_cc(sweep_object("quick"), "cubic"), settings(tmp_path), nodes=[Node("a", PROBED)])
    assert decision.workflow is not None and decision.status["phase"] == "Pending"


def test_unknown_nodes_skip_the_check(tmp_path: Path):
    """An operator that may not list nodes (its optional ClusterRole is off) still runs sweeps."""
    assert decide(with_cc(sweep_object("quick"), "vegas"), settings(tmp_path), nodes=None).workflow is not None
