"""The sweep's per-link fan-out is generated from the link registry (support/link_steps.py).

The committed workflows/templates/ccsweep-sweep.yaml is what the generator writes; and a link
registered only in linkdesc.LINKS (the `extra_link` fixture) gets a step of its own, in the
sweep, its rounds and its chunk Workflows alike, taking exactly its items to its pod template.
"""

from __future__ import annotations

import json

import yaml

from ccsweep.linkdesc import DEFAULT_LINK, LINKS, LinkDescriptor
from support.link_steps import SWEEP_TEMPLATE, rendered
from test_lint import takes


def test_the_committed_fan_out_is_the_generated_one():
    assert SWEEP_TEMPLATE.read_text() == rendered(SWEEP_TEMPLATE.read_text(), LINKS.values()), \
        "regenerate: python -m support.link_steps"


def _cell_steps(text: str, template: str) -> list[dict]:
    templates = {t["name"]: t for t in yaml.safe_load(text)["spec"]["templates"]}
    return [step for group in templates[template]["steps"] for step in group
            if step.get("templateRef", {}).get("name") == "ccsweep-cell"]


def test_a_registered_link_gets_its_own_step_everywhere_cells_fan_out(extra_link: LinkDescriptor):
    text = rendered(SWEEP_TEMPLATE.read_text(), LINKS.values())
    for template in ("sweep", "round", "chunk-sweep"):
        steps = _cell_steps(text, template)
        assert sorted(s["templateRef"]["template"] for s in steps) == sorted(d.pod_template for d in LINKS.values())
        for link in LINKS.values():
            (taken,) = [s for s in steps if takes(s, {"id": "x", "link": link.name})]
            assert taken["templateRef"]["template"] == link.pod_template and taken["name"] == link.pod_template
        (default,) = [s for s in steps if takes(s, {"id": "x"})]
        assert default["templateRef"]["template"] == LINKS[DEFAULT_LINK].pod_template
        # Apart from which items and which template, the steps are one: the same arguments and outcome.
        strip = ("name", "templateRef", "withParam")
        assert len({json.dumps({k: v for k, v in s.items() if k not in strip}) for s in steps}) == 1
    assert "{#.link != 'mahimahi' && #.link != 'test-link'}" in text
