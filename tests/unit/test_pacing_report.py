"""The rebbr-pacing result's README quotes what its committed cell tables give
(benchmarks/pacing/report.py), and a number changed by hand no longer matches."""

from __future__ import annotations

from benchmarks.pacing.report import MAIN, README, candidate_lines, compute
from benchmarks.quoted import fill, names


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = README.read_text()
    assert {"pacing.runs", "pacing.cliffs", "pacing.medians"} <= set(names(text))
    assert fill(text, compute()) == text


def test_a_quoted_table_changed_by_hand_no_longer_matches_its_data() -> None:
    text = README.read_text()
    edited = text.replace("| 20 | ", "| 21 | ", 1)
    assert edited != text and fill(edited, compute()) == text


def test_a_candidate_moves_the_cliff_only_when_the_intervals_part() -> None:
    """Synthetic curves on 20-50 %: a candidate whose runs hold to 40 % moves the collapse of a main
    curve that collapses at 20 %; one that collapses where the main does, does not."""
    losses = [0.2, 0.3, 0.4, 0.5]
    collapsed = {loss: [0.5, 0.6, 0.4, 0.5, 0.55] for loss in losses}
    holding = {0.2: [60.0, 62, 61, 59, 60], 0.3: [50.0, 52, 49, 51, 50], 0.4: [40.0, 41, 39, 42, 40],
               0.5: [0.5, 0.4, 0.6, 0.5, 0.5]}
    grid = {MAIN: losses, "candidate": losses}
    moved = candidate_lines({"ccsweep-link": {(MAIN, "bbr_bpf"): collapsed, ("candidate", "bbr_bpf"): holding}}, grid)
    also_collapsed = {loss: [v + 0.1 for v in runs] for loss, runs in collapsed.items()}
    kept = candidate_lines({"ccsweep-link": {(MAIN, "bbr_bpf"): collapsed, ("candidate", "bbr_bpf"): also_collapsed}},
                           grid)
    # A candidate whose runs are the main experiment's own (a link that cannot vary it) is not listed.
    shared = candidate_lines({"ccsweep-link": {(MAIN, "bbr_bpf"): collapsed, ("candidate", "bbr_bpf"): collapsed}},
                             grid)
    assert len(shared) == 2
    assert moved[2].endswith("| 20 % → 50 % | 20 % → 50 % | moves the cliff (half and tenth) |"), moved[2]
    assert kept[2].endswith("| does not move the cliff |"), kept[2]
    waiting = candidate_lines({"ccsweep-link": {(MAIN, "bbr_bpf"): collapsed, ("candidate", "bbr_bpf"): {0.2: [1.0]}}},
                              grid)
    assert waiting[2].endswith("| – | – | not yet: runs missing |")


def test_every_marker_is_read_underscores_too() -> None:
    """A value named for an algorithm (`pacing.tenth.bbr_unpaced.mahimahi`) is a marker like any other:
    filled, and checked, not left as typed."""
    assert "pacing.tenth.bbr_unpaced.mahimahi" in names(README.read_text())
    stale = "<!-- value: pacing.tenth.bbr_unpaced.ccsweep-link -->49 %<!-- /value -->"
    assert "49 %" not in fill(stale, compute())
