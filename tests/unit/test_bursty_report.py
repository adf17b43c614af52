"""The bursty-loss report (benchmarks/bursty/report.py): its independent-loss references come from
the committed runs, and a burst series moves a cliff only where the intervals part."""

from __future__ import annotations

import json

import pytest

from benchmarks.bursty.report import (
    FOLDERS,
    INDEPENDENT_NAME,
    cliff_lines,
    compute,
    curves,
    independent_rows,
    measured_loss_lines,
    preset_losses,
    report,
    series_cliffs,
    with_references,
)
from benchmarks.quoted import fill, names
from ccsweep.results.quantities import payload_ideal_mbps

LOSSES = [0.001, 0.01, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5]


def chain(burst: float, loss: float) -> str:
    """The simple Gilbert model's parameters as the export writes them (r = 1 / burst)."""
    r = 1 / burst
    return json.dumps({"p": loss * r / (1 - loss), "r": r, "one_minus_h": 1.0, "one_minus_k": 0.0})


def rows(cc: str, burst: float, holds_to: float, runs: int = 5, drawn: float = 1.0) -> list[dict[str, str]]:
    """Runs at 0.9 of the ideal up to `holds_to` and 0.5 Mbit/s past it; each run's link drew
    `drawn` times the asked loss of 100,000 packets."""
    out = []
    for loss in LOSSES:
        good = 0.9 * payload_ideal_mbps(100, loss) if loss <= holds_to else 0.5
        for run in range(runs):
            out.append({"cell_id": f"{cc}-{burst}-{loss}-{run}", "cc": cc, "loss": str(loss),
                        "experiments": f"bursts-{burst:g}", "goodput_steady_mbps": str(good * (1 + 0.01 * run)),
                        "uplink_gilbert_elliott": chain(burst, loss), "uplink_in_packets": "100000",
                        "uplink_drops_loss": str(round(100000 * loss * drawn))})
    return out


def test_the_independent_references_are_the_committed_curves():
    """bbr and bbr_unpaced from rebbr-pacing, CUBIC from the full study and its seeds: every algorithm
    has all 13 of Figure 8's loss rates, and run 0 of figure8-seeds is counted once."""
    found = curves(independent_rows())
    for cc in ("bbr", "bbr_unpaced", "cubic"):
        assert len(found[cc, INDEPENDENT_NAME]) == 13, cc
    assert len(found["cubic", INDEPENDENT_NAME][0.1]) == 10  # figure8's run and nine more seeds
    assert min(len(runs) for runs in found["bbr", INDEPENDENT_NAME].values()) >= 5


def test_a_burst_series_moves_a_cliff_only_where_the_intervals_part():
    curves_rows = rows("bbr", 8, holds_to=0.4) + rows("bbr", 2, holds_to=0.15)
    found = {("bbr", INDEPENDENT_NAME): {loss: [0.9 * payload_ideal_mbps(100, loss) if loss <= 0.15 else 0.5] * 5
                                         for loss in LOSSES}}
    found |= curves(curves_rows)
    lines = cliff_lines(series_cliffs(found, LOSSES))
    bbr = [line for line in lines if line.startswith("| bbr |")]
    assert bbr[0].startswith("| bbr | independent | 5 | 20 % [20, 20 %] | 20 % [20, 20 %] | – |"), bbr[0]
    assert bbr[1] == "| bbr | bursts of 2 | 5 | 20 % [20, 20 %] | 20 % [20, 20 %] | does not move the cliff |", bbr[1]
    assert bbr[2].endswith("| 50 % [50, 50 %] | 50 % [50, 50 %] | moves the cliff (half and tenth) |"), bbr[2]


def test_a_series_with_a_missing_loss_rate_is_not_read():
    partial = [row for row in rows("bbr", 4, holds_to=0.4) if row["loss"] != "0.5"]
    table = "\n".join(report(partial, LOSSES))
    assert "not yet: no run at 50 %" in table


def test_the_grid_is_the_presets_thirteen_mean_loss_rates():
    assert preset_losses() == sorted(curves(independent_rows())["bbr", INDEPENDENT_NAME])


def test_a_chain_that_drew_the_wrong_share_shows():
    """Runs whose link lost 0.8 of the asked mean read 0.8; a run with under 100 loss drops is left out."""
    assert measured_loss_lines(rows("cubic", 4, 0.1))[2] == "| bursts of 4 | 40 | 1.000 [1.000, 1.000] |"
    assert measured_loss_lines(rows("cubic", 4, 0.1, drawn=0.8))[2].startswith("| bursts of 4 | 35 | 0.800")


def test_the_presets_own_independent_runs_join_the_reference_each_cell_once():
    """CUBIC's independent experiment in the preset adds its runs to the committed reference's; a run
    whose cell id the reference has already is counted once."""
    reference = curves(independent_rows())["cubic", INDEPENDENT_NAME][0.01]
    known = next(row for row in independent_rows() if row["cc"] == "cubic" and float(row["loss"]) == 0.01)
    new_runs = [{**known, "experiments": "independent", "goodput_steady_mbps": "1.0"},  # the same cell
                {**known, "cell_id": "f" * 16, "experiments": "independent", "goodput_steady_mbps": "2.0"}]
    joined = with_references(new_runs)["cubic", INDEPENDENT_NAME][0.01]
    assert joined == [*reference, 2.0]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_the_committed_readme_quotes_what_its_cell_table_gives(folder):
    """Each committed result: regenerating reproduces it byte for byte, and a verdict changed by
    hand is put back."""
    text = (folder / "README.md").read_text()
    assert {"bursty.runs", "bursty.cliffs", "bursty.verdict.bbr.8"} <= set(names(text))
    values = compute(folder)
    assert fill(text, values) == text
    quoted = "<!-- value: bursty.verdict.bbr.8 -->"
    start = text.index(quoted) + len(quoted)
    edited = text[:start] + "moves the cliff (half and tenth)" + text[text.index("<!-- /value -->", start):]
    assert edited != text and fill(edited, values) == text
