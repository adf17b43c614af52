"""The numbers README.md's first paragraph, docs/experiments.md and the full study's results README
quote are what the committed data gives, and a number changed by hand no longer is.

`python -m benchmarks.rebbr.report` computes every quoted value from the CSVs committed in
benchmarks/results/2026-11-25-rebbr-full/ and writes it between its markers; these tests
regenerate the committed files in memory (no file is written) and compare them byte for byte.
"""

from __future__ import annotations

import re

import pytest

from benchmarks.quoted import QuoteError, fill, names
from benchmarks.rebbr.report import FOLDER, QUOTING, REPO, regenerate

#: The numbers of README.md's first paragraph that have no data in the repository, each with where
#: it comes from: the full-sweep preset's size and its own estimate of one-at-a-time time
#: (sweeps/full-sweep.yaml), the machine's core count (the results README's Machine line), and
#: the seed counts of the two comparisons (the presets figure8-seeds and bbr-seeds30.yaml), and
#: the name of the BBR paper's Figure 8.
SOURCED_ELSEWHERE = {"390", "8.5", "2", "10", "30", "8"}


def committed() -> dict:
    return {path: path.read_text() for path in QUOTING}


def first_paragraph(text: str) -> str:
    return text.split("\n\n")[1]


def test_regenerating_reproduces_every_quoting_file_byte_for_byte() -> None:
    texts = committed()
    assert all(names(text) for text in texts.values())  # each file quotes through markers
    assert regenerate(texts) == texts


def test_a_quoted_number_changed_by_hand_no_longer_matches_its_data() -> None:
    texts = committed()
    for path, name, by_hand in ((REPO / "README.md", "link.busy-min", "89.6"),
                                (FOLDER / "README.md", "mm.peak", "38"),
                                (REPO / "docs/experiments.md", "mm.busy-min", "139.4")):
        quoted = re.search(rf"<!-- value: {re.escape(name)} -->([^<]*)<!-- /value -->", texts[path])
        assert quoted is not None, f"{path.name} does not quote {name}"
        edited = texts[path].replace(quoted.group(0), f"<!-- value: {name} -->{by_hand}<!-- /value -->", 1)
        assert edited != texts[path]
        assert regenerate({path: edited})[path] == texts[path] != edited  # the data puts its own number back


def test_the_first_paragraph_quotes_the_study_from_its_data() -> None:
    paragraph = first_paragraph((REPO / "README.md").read_text())
    study = {"link.cells", "link.flow-h", "link.busy-min", "mm.cells", "mm.flow-h", "mm.busy-min"}
    assert study <= set(names(paragraph))
    unquoted = re.sub(r"<!-- value: [^>]* -->[^<]*<!-- /value -->", "", paragraph)
    unquoted = re.sub(r"\([^)]*\.(md|yaml)\)|`[^`]*`", "", unquoted)  # links and commands: no figures
    assert set(re.findall(r"\d+(?:\.\d+)?", unquoted)) <= SOURCED_ELSEWHERE


def test_the_wall_times_are_the_stored_records_own() -> None:
    """The issue's recomputation: 84.6 and 123.2 minutes, 26 and 36 cells at once, from cells.csv."""
    readme = (FOLDER / "README.md").read_text()
    for name, value in (("link.busy-min", "84.6"), ("mm.busy-min", "123.2"), ("link.peak", "26"), ("mm.peak", "36"),
                        ("mm.shared-bandwidth-algorithms", "26"), ("mm.part-last.peak", "16"),
                        ("rtt2.cubic1", "41.3"), ("rtt2.bbr1", "98.7")):
        assert f"<!-- value: {name} -->{value}<!-- /value -->" in readme, name


def test_fill_keeps_a_table_inside_its_list_item_and_refuses_a_value_it_cannot_compute() -> None:
    text = "- item:\n\n  <!-- value: t -->old<!-- /value -->\n"
    assert fill(text, {"t": "\n\n| a |\n|---|\n\n"}) == (
        "- item:\n\n  <!-- value: t -->\n\n  | a |\n  |---|\n\n  <!-- /value -->\n")
    with pytest.raises(QuoteError, match="quoted but not computed: gone"):
        fill("<!-- value: gone -->1<!-- /value -->", {})
