"""The full-length Argo run's results README quotes what its committed files give
(benchmarks/cluster/argo_report.py), and a number changed by hand no longer matches."""

from __future__ import annotations

import re

from benchmarks.cluster.argo_report import README, compute
from benchmarks.quoted import fill, names


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = README.read_text()
    assert {"argo.cells", "argo.busy-min", "argo.attempts", "argo.comparison", "argo.estimate"} <= set(names(text))
    assert fill(text, compute()) == text


def test_a_quoted_number_changed_by_hand_no_longer_matches_its_data() -> None:
    text = README.read_text()
    quoted = re.search(r"<!-- value: argo\.busy-min -->([^<]*)<!-- /value -->", text)
    assert quoted is not None
    edited = text.replace(quoted.group(0), "<!-- value: argo.busy-min -->1.0<!-- /value -->", 1)
    assert edited != text and fill(edited, compute()) == text
