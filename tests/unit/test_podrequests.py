"""Cell pods ask for what their cells cost (ccsweep.podrequests), and a pod no node can hold is unplaceable.

The cells are the presets' own, expanded for real; the nodes are Node values as clusternodes reads
them from a node's status (reading a real API server is the e2e tier's).
"""

from __future__ import annotations

import pytest

from ccsweep.admission import prior_cost
from ccsweep.cell import Cell
from ccsweep.clusternodes import _allocatable
from ccsweep.expand import expand
from ccsweep.placement import Node, largest_room, unplaceable_cells
from ccsweep.podrequests import (
    CPU_CAP_MILLI,
    CPU_FLOOR_MILLI,
    CellSizing,
    PodRequests,
    modelled_requests,
    retry_requests,
)
from ccsweep.specload import load_spec, parse_spec

#: A node of the local cluster's kind: 2 cores, bbr and cubic.
LABELS = {"ccsweep.io/kernel": "6.18.44", "ccsweep.io/cc-bbr": "true", "ccsweep.io/cc-cubic": "true"}
TWO_CORES = Node("node-1", LABELS, cpu_milli=2000, memory_bytes=8 << 30)


def preset_cell(name: str, link: str | None = None, **wanted: float) -> Cell:
    """The first cell of preset `name` (moved to `link`) whose uplink has these values."""
    spec = load_spec(name)
    if link is not None:
        spec = parse_spec({**spec.model_dump(mode="json"),
                           "experiments": [{**e, "link": link} for e in spec.model_dump(mode="json")["experiments"]]})
    return next(c for c in expand(spec) if all(getattr(c.params.uplink, k) == v for k, v in wanted.items()))


def test_a_100_mbits_100_ms_ccsweep_link_cell_asks_for_well_under_a_core():
    """figure8's cell: every pod asked for a whole core before; now a quarter, so a 2-core node
    takes 8 such pods (Argo's wait container included) where it took 2."""
    cell = preset_cell("figure8", rate_mbps=100)
    assert cell.params.link == "ccsweep-link" and cell.params.uplink.delay_ms == 50
    first = modelled_requests(cell)
    assert (first.cpu, first.memory) == ("224m", "320Mi")
    assert first.cpu_milli < 300
    assert TWO_CORES.cpu_milli is not None and TWO_CORES.cpu_milli // first.with_executor().cpu_milli == 8


def test_a_cell_that_carries_little_asks_for_the_floor_and_one_at_the_line_rate_for_its_rate():
    """What a cell carries sets its request (ccsweep.carried): figure8's CUBIC at 1 % loss carried
    1.5 Mbit/s of 100 through Argo, BBR 84 at the same loss; a 2-core node takes 12 of the one and 8 of the other."""
    cubic, bbr = (next(c for c in expand(load_spec("figure8")) if c.params.cc_label == cc and c.params.loss == 0.01)
                  for cc in ("cubic", "bbr"))
    assert modelled_requests(cubic).cpu_milli == CPU_FLOOR_MILLI
    assert modelled_requests(bbr).cpu == "224m"
    assert TWO_CORES.cpu_milli // modelled_requests(cubic).with_executor().cpu_milli == 12


def test_a_mahimahi_cell_at_100_mbits_fits_a_2_core_node():
    """Mahimahi's shells cost more (the same cost model as admission's); 2185m before, no 2-core node's."""
    cell = preset_cell("figure8", "mahimahi", rate_mbps=100)
    first = modelled_requests(cell)
    assert first.cpu == "490m" and first.cpu_milli > modelled_requests(preset_cell("figure8", rate_mbps=100)).cpu_milli
    assert TWO_CORES.holds(first.with_executor()) and 2 * first.with_executor().cpu_milli <= 2000


def test_the_request_follows_the_cost_model_between_its_floor_and_cap():
    slow = preset_cell("bandwidth", rate_mbps=0.01)
    assert prior_cost(slow) * 1000 < CPU_FLOOR_MILLI and modelled_requests(slow).cpu_milli == CPU_FLOOR_MILLI
    gigabit = preset_cell("loss-table", rate_mbps=1000)
    assert modelled_requests(gigabit).cpu == "744m"  # 0.56 cores measured alone, with the headroom
    # loss-table's 64 MiB socket buffers: the sender's, the link's copy of what is in flight, the receiver's.
    assert modelled_requests(gigabit).memory == "448Mi"
    fast = preset_cell("figure8", "mahimahi", rate_mbps=100)
    assert modelled_requests(fast.model_copy(update={"params": fast.params.model_copy(update={
        "uplink": fast.params.uplink.model_copy(update={"rate_mbps": 2000.0})})})).cpu_milli == CPU_CAP_MILLI


def test_a_retry_asks_for_twice_as_much_within_the_largest_node():
    first = PodRequests(cpu_milli=224, memory_bytes=320 << 20)
    assert retry_requests(first) == PodRequests(448, 640 << 20)
    room = largest_room([TWO_CORES, Node("small", LABELS, cpu_milli=1000, memory_bytes=1 << 30)])
    assert room == PodRequests(1990, (8 << 30) - (128 << 20))
    assert retry_requests(PodRequests(1200, 320 << 20), room) == PodRequests(1990, 640 << 20)
    assert retry_requests(PodRequests(1995, 320 << 20), room).cpu_milli == 1995  # never less than the first
    assert largest_room([Node("unsized", LABELS)]) is None


def test_a_cell_whose_pod_no_node_can_hold_is_unplaceable_with_why():
    cells = expand(load_spec("figure8"))
    modelled = CellSizing()
    assert unplaceable_cells(cells, [TWO_CORES], modelled.pod) == {}
    whole_node = CellSizing(cpu="2")  # with Argo's wait container, 2.01 cores: Pending for ever
    reasons = unplaceable_cells(cells, [TWO_CORES], whole_node.pod)
    assert set(reasons) == {c.id for c in cells}
    assert next(iter(reasons.values())) == (
        "no node can hold its pod's requests, 2.01 CPU and 448Mi (the cell's cost model and Argo's wait "
        "container); the largest node offering its algorithms: node-1 2 CPU, 8.0Gi allocatable")
    # A node whose size is not known refuses nothing; one lacking the algorithm is not the largest named.
    assert unplaceable_cells(cells, [Node("unsized", LABELS)], whole_node.pod) == {}
    big_without_bbr = Node("big", {"ccsweep.io/kernel": "6.18.44", "ccsweep.io/cc-cubic": "true"},
                           cpu_milli=8000, memory_bytes=32 << 30)
    reasons = unplaceable_cells(cells, [TWO_CORES, big_without_bbr], whole_node.pod)
    bbr = {c.id for c in cells if c.params.cc_label == "bbr"}
    assert set(reasons) == bbr and all("node-1 2 CPU" in reasons[i] for i in bbr)


@pytest.mark.parametrize(("status", "sizes"), [
    ({"cpu": "2", "memory": "24380868Ki", "pods": "110"}, {"cpu_milli": 2000, "memory_bytes": 24380868 << 10}),
    ({"cpu": "1900m", "memory": "7Gi"}, {"cpu_milli": 1900, "memory_bytes": 7 << 30}),
    ({"cpu": "2e3"}, {"cpu_milli": None, "memory_bytes": None}),
    ({}, {"cpu_milli": None, "memory_bytes": None}),
])
def test_a_nodes_allocatable_as_its_status_gives_it(status: dict[str, str], sizes: dict[str, int | None]):
    assert _allocatable(status) == sizes
