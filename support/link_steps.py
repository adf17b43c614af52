"""The per-link cell steps of workflows/templates/ccsweep-sweep.yaml, written from linkdesc.LINKS.

A cell pod's privileges depend on its link (ccsweep-cell.yaml has a template per link), so the
sweep's fan-out has a step per link, each taking the plan items of its link. Argo cannot pick a
templateRef's template from an item (argoproj/argo-workflows#9329: the reference is resolved
when the Workflow is validated, before any item exists), and a hand-written filter would send a
new link's cells to another link's pod. So the steps between the `# >>> link steps: KIND` and
`# <<< link steps: KIND` markers are generated: `default`, the head of the default link's step,
which also takes items naming no link (an older image's plan) and every link but the others;
`others`, a step per other link, each taking exactly its link's items; `aliases`, the steps
where the sweep's rounds and chunk Workflows reuse them. tests/workflows/test_link_steps.py
holds the committed file to what this writes.

`python -m support.link_steps` rewrites the file; `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ccsweep.linkdesc import DEFAULT_LINK, LINKS, LinkDescriptor

SWEEP_TEMPLATE = Path(__file__).resolve().parents[1] / "workflows" / "templates" / "ccsweep-sweep.yaml"
MARKER = re.compile(r"^(?P<indent> *)# (?P<edge>>>>|<<<) link steps: (?P<kind>[a-z]+)$")
PLAN_ITEMS = "jsonpath(steps.plan.outputs.result, '$')"


def _filter(condition: str) -> str:
    return f'"{{{{=toJson(filter({PLAN_ITEMS}, {{{condition}}}))}}}}"'


def _step(link: LinkDescriptor) -> list[str]:
    """The lines naming a link's step and its pod template (ccsweep-cell.yaml)."""
    return [f"name: {link.pod_template}", f"templateRef: {{name: ccsweep-cell, template: {link.pod_template}}}"]


def _other_step(link: LinkDescriptor) -> list[str]:
    """A step for a link other than the default: the default's step, with its own name and template,
    taking exactly the items of its link."""
    takes = _filter(f"#.link == '{link.name}'")
    return [f"- &{link.pod_template}-step", "  <<: *cell-step", *(f"  {line}" for line in _step(link)),
            f"  withParam: {takes}"]


def region(kind: str, links: Sequence[LinkDescriptor]) -> list[str]:
    """The lines of a generated region, indented as at its marker (the caller adds the indent)."""
    default, others = links[0], links[1:]
    if kind == "default":
        condition = " && ".join(f"#.link != '{o.name}'" for o in others) or "true"
        return [*_step(default), f"withParam: {_filter(condition)}"]
    if kind == "others":
        return [line for other in others for line in _other_step(other)]
    if kind == "aliases":
        return [f"- - *{default.pod_template}-step", *(f"  - *{o.pod_template}-step" for o in others)]
    raise ValueError(f"no generated region {kind!r}")


def rendered(text: str, links: Iterable[LinkDescriptor]) -> str:
    """`text` (the sweep template) with every marked region written for `links`, default first."""
    ordered = sorted(links, key=lambda link: link.name != DEFAULT_LINK)
    out: list[str] = []
    inside: str | None = None
    for line in text.splitlines(keepends=True):
        marker = MARKER.match(line.rstrip("\n"))
        if inside is None:
            out.append(line)
            if marker and marker["edge"] == ">>>":
                inside = marker["kind"]
                out += [f"{marker['indent']}{body}\n" for body in region(inside, ordered)]
        elif marker and marker["edge"] == "<<<" and marker["kind"] == inside:
            out.append(line)
            inside = None
    if inside is not None:
        raise ValueError(f"link steps: {inside} is not closed")
    return "".join(out)


def main(argv: Sequence[str]) -> int:
    text = SWEEP_TEMPLATE.read_text()
    wanted = rendered(text, LINKS.values())
    if "--check" in argv:
        if wanted != text:
            print(f"{SWEEP_TEMPLATE} is stale: run python -m support.link_steps", file=sys.stderr)
            return 1
        return 0
    SWEEP_TEMPLATE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
