"""A link is one descriptor (linkdesc.LINKS) and one runner module: every layer reads the registry.

The `extra_link` fixture (tests/conftest.py) registers a test-only link in that one place; these
tests then plan it, price it, size its pods and draw it, with nothing else told of it. The real
links' descriptors are held to what the rest of the repository says of them: the cell pod
templates' privileges and the runner's Link for each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ccsweep.admission import BASE_CORES, TCP_CORES_PER_100MBIT, cost_class, prior_cost, release_window
from ccsweep.cell import CellParams
from ccsweep.cli import main
from ccsweep.expand import expand
from ccsweep.figures.links import links_section
from ccsweep.linkdesc import LINKS, LinkDescriptor, PodPrivileges, VersionProbe
from ccsweep.podrequests import modelled_requests
from ccsweep.result import CellResult
from ccsweep.results.data import load_sweep
from ccsweep.runner.links import LINKS as RUNNER_LINKS
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from ccsweep.store import open_store
from synthetic import ENV
from wholeplan import plan_sweep

REPO = Path(__file__).resolve().parents[2]
PATH = {"cc": ["bbr"], "loss_percent": [1], "rtt_ms": [40], "bandwidth_mbps": [100], "duration_s": 20}


def sweep(*links: str, **extra: object) -> dict:
    """A sweep of one cell per link, the same path on each."""
    return {"name": "links", "experiments": [{"name": f"on-{link}", "link": link, **PATH, **extra} for link in links]}


def test_a_registered_link_is_planned_with_its_own_offloads_and_leaves_every_other_cell_id(
        extra_link: LinkDescriptor):
    plain, mahimahi, extra = expand(parse_spec(sweep("ccsweep-link", "mahimahi", extra_link.name)))
    assert extra.params.link == extra_link.name and extra.params.link_offload == "none"
    assert mahimahi.params.link_offload == "none" and plain.params.link_offload == "tso"
    # Registering a link moves no cell of the others: the same ids as with the real links alone.
    LINKS.pop(extra_link.name)
    assert [c.id for c in expand(parse_spec(sweep("ccsweep-link", "mahimahi")))] == [plain.id, mahimahi.id]


def test_expansion_refuses_what_the_registered_link_cannot_express(extra_link: LinkDescriptor):
    policed = sweep(extra_link.name, policer=[{"rate_mbps": 50, "burst_bytes": 30000}])
    with pytest.raises(SpecError, match=r"^experiments\[on-test-link\]\.link: test-link cannot police uplink "
                                        r"packets \(policer\): the test link has no token bucket"):
        expand(parse_spec(policed))
    with pytest.raises(SpecError, match=r"link_offload: tso needs link ccsweep-link; test-link moves one packet "
                                        r"at a time \(give none, or leave it unset\)"):
        expand(parse_spec(sweep(extra_link.name, link_offload="tso")))
    with pytest.raises(ValueError, match="link_offload tso: Test link moves one packet at a time"):
        CellParams.model_validate({**expand(parse_spec(sweep(extra_link.name)))[0].params.model_dump(),
                                   "link_offload": "tso"})


def test_an_unregistered_link_is_refused_by_every_model():
    params = expand(parse_spec(sweep("ccsweep-link")))[0].params.model_dump()
    with pytest.raises(ValueError, match="link 'test-link': one of ccsweep-link, mahimahi"):
        CellParams.model_validate({**params, "link": "test-link"})


def test_admission_and_pod_requests_price_the_link_by_its_own_cost_model(extra_link: LinkDescriptor):
    plain, extra = expand(parse_spec(sweep("ccsweep-link", extra_link.name)))
    assert release_window(extra) == 500.0
    assert prior_cost(extra) == pytest.approx(BASE_CORES + TCP_CORES_PER_100MBIT + 0.5)
    assert prior_cost(extra) != prior_cost(plain) and cost_class(extra)[0] == extra_link.name
    assert modelled_requests(extra).cpu_milli == -(-round(prior_cost(extra) * 4 / 3 * 1000, 6) // 1)


def test_the_plan_step_prints_the_links_items(extra_link: LinkDescriptor, tmp_path: Path):
    spec = tmp_path / "links.json"
    spec.write_text(json.dumps(sweep("ccsweep-link", extra_link.name)))
    done = CliRunner().invoke(main, ["plan", str(spec), "--store", str(tmp_path / "store")])
    assert done.exit_code == 0, done.output
    assert sorted(item["link"] for item in json.loads(done.stdout)) == ["ccsweep-link", "test-link"]


def test_the_figures_set_every_link_beside_the_first(extra_link: LinkDescriptor, tmp_path: Path):
    store = open_store(str(tmp_path))
    spec = sweep("ccsweep-link", "mahimahi", extra_link.name)
    for experiment in spec["experiments"]:
        experiment.update(loss_percent=[1, 5], repetitions=3)
    factor = {"ccsweep-link": 1.0, "mahimahi": 0.9, extra_link.name: 0.8}
    for cell in plan_sweep(parse_spec(spec), store).cells:
        value = factor[cell.params.link] * (90 + cell.params.repetition)
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                  goodput_mbps=value, goodput_steady_mbps=value))
    section = links_section(load_sweep(store, "links"))
    assert section is not None
    assert [t.name for t in section.tables] == ["links-compare-mahimahi", "links-compare-test-link"]
    assert section.tables[1].title.startswith("ccsweep-link against Test link, cell by cell")
    (overlay,) = section.figures
    assert overlay.title == "All links: median goodput with its interval, ccsweep-link, Mahimahi and Test link"
    assert overlay.caption.startswith("Filled markers, solid: ccsweep-link; hollow, dashed: Mahimahi; "
                                      "hollow, dotted: Test link, each set a little apart")
    labels = [label for line in overlay.figure.axes[0].get_lines() if not (label := line.get_label()).startswith("_")]
    assert [label.rpartition(", ")[2] for label in labels] == ["ccsweep-link", "mahimahi", "test-link"]
    assert [n.split(":")[0] for n in section.notes] == ["2 cells on ccsweep-link and Mahimahi",
                                                         "2 cells on ccsweep-link and Test link"]


def test_every_real_link_has_a_runner_link():
    """The other half of a link: a runner module implementing Link, named in runner/links.py."""
    assert set(RUNNER_LINKS) == set(LINKS)


def _cell_templates() -> dict[str, dict]:
    path = REPO / "workflows" / "templates" / "ccsweep-cell.yaml"
    return {t["name"]: t for t in yaml.safe_load(path.read_text())["spec"]["templates"]}


@pytest.mark.parametrize("link", sorted(LINKS))
def test_each_links_cell_template_has_the_privileges_its_descriptor_names(link: str):
    wanted = LINKS[link].privileges
    context = _cell_templates()[LINKS[link].pod_template]["container"]["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": list(wanted.capabilities)}
    assert context["allowPrivilegeEscalation"] is wanted.allow_privilege_escalation
    assert context["privileged"] is False


@pytest.mark.parametrize("name", ["Test", "test link", "cell;rm", "-x", "x-", "x--y", ""])
def test_a_descriptor_takes_only_plain_names(extra_link: LinkDescriptor, name: str):
    """Its name and template become YAML and Argo expressions (support/link_steps.py)."""
    fields = {**extra_link.__dict__, "privileges": PodPrivileges(("NET_ADMIN",), False),
              "version": VersionProbe(kind="summary-field", key="version")}
    with pytest.raises(ValueError, match="is not a plain name"):
        LinkDescriptor(**{**fields, "name": name})
    with pytest.raises(ValueError, match="is not a plain name"):
        LinkDescriptor(**{**fields, "pod_template": name})
