"""Published numbers beside measured ones: ReBBR's shipped CSVs, pinned by hash, drawn as labelled series.

The expected numbers are read here from the shipped files with the csv module alone, not through
the code under test, so a parser or a plotting slip shows as a difference.
"""

from __future__ import annotations

import csv
import hashlib
import re
import shutil
from pathlib import Path
from typing import Any, get_args

import pytest
from matplotlib.axes import Axes

from ccsweep.cell import Cell
from ccsweep.figures.published import LABEL, published_section
from ccsweep.figures.registry import build_section
from ccsweep.results.data import ExperimentData
from ccsweep.results.published_sets import COMMIT, DATA, SETS, PublishedDataError, load
from ccsweep.spec import PublishedName, SpecError
from ccsweep.specload import load_spec, parse_spec
from synthetic import experiment

FOLDER = Path(str(DATA))
README = FOLDER / "README.md"
LOSSES = [0.001, 0.01, 0.1, 1, 2, 5, 10, 15, 20, 25, 30, 40, 50]


def csv_rows(name: str) -> list[dict[str, str]]:
    """A shipped file's rows as text, by ReBBR's header names (spaces after commas dropped)."""
    with open(FOLDER / name, newline="") as f:
        return list(csv.DictReader(f, skipinitialspace=True))


def measured(cell: Cell) -> dict[str, Any]:
    """Made-up measurements: a bottleneck throughput that tells algorithm and loss apart."""
    p = cell.params
    rate = p.bandwidth_mbps or 6.0
    through = rate * (0.9 if p.cc_label == "bbr" else 0.5) * (1 - p.loss)
    return {"goodput_mbps": through * 0.9, "bottleneck_throughput_mbps": through, "capacity_mbps": rate * 1.0027}


def rebbr_experiment(published: list[str], **exp: Any) -> ExperimentData:
    return experiment({"cc": ["cubic", "bbr"], "loss_percent": LOSSES, "published": published, **exp}, measured)


def published_axes(data: ExperimentData) -> Axes:
    section = build_section(data)
    (figure,) = [f for f in section.figures if f.name == f"{data.name}-published"]
    return figure.figure.axes[0]


def lines_by_label(ax: Axes) -> dict[str, Any]:
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_every_spec_name_has_a_shipped_file_with_its_license_and_readme():
    assert set(SETS) == set(get_args(PublishedName))
    assert (FOLDER / "LICENSE").read_text().startswith("BSD 2-Clause License")
    readme = README.read_text()
    assert COMMIT in readme and "https://github.com/jervisfm/rebbr" in readme
    table = dict(re.findall(r"^\| `([\w.]+)` \|.*\| `([0-9a-f]{64})` \|$", readme, re.MULTILINE))
    for published in SETS.values():
        data = (FOLDER / published.file).read_bytes()
        assert hashlib.sha256(data).hexdigest() == published.sha256 == table[published.file], published.file
        assert len(load(published)) == len(csv_rows(published.file))
    assert hashlib.sha256((FOLDER / "LICENSE").read_bytes()).hexdigest() == table["LICENSE"]


def test_figure8_overlay_draws_rebbrs_exact_numbers_with_its_label_and_source():
    data = rebbr_experiment(["rebbr-figure8"])
    ax = published_axes(data)
    lines = lines_by_label(ax)
    rows = csv_rows("figure8.csv")
    for cc, name in (("bbr", "BBR"), ("cubic", "CUBIC")):
        line = lines[f"{LABEL}: {name}"]
        expected = sorted((float(r["loss_rate"]) * 100, float(r["goodput_Mbps"])) for r in rows
                          if r["congestion_control"] == cc)
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == expected
        assert line.get_linestyle() == "--"
        # The published series takes its measured twin's colour.
        assert line.get_color() == lines[name].get_color()
    assert lines["BBR"].get_ydata()[0] == pytest.approx(90 * (1 - 1e-5))  # measured: throughput, not goodput
    assert ax.get_ylabel() == "bottleneck throughput (Mbit/s)"
    # Its ceiling is the link rate: bytes leave the bottleneck before the loss takes its share.
    ceiling = lines["link rate (bottleneck throughput's ceiling)"]
    assert set(ceiling.get_ydata()) == {100}
    (figure,) = [f for f in build_section(data).figures if f.name.endswith("-published")]
    assert "github.com/jervisfm/rebbr" in figure.caption and COMMIT[:7] in figure.caption
    assert "figure8.csv" in figure.caption and "Linux 4.11" in figure.caption
    # The overlay speaks through ccsweep compare: one run per cell on both sides settles no cell, and the
    # pooled line says where the measured cells sit against ReBBR's.
    (note,) = published_section(data).notes
    assert note.startswith("ccsweep compare e published:rebbr-figure8 (the bottleneck throughput): ")
    assert "cells compared: 0 agree, 0 differ," in note and "Wilcoxon signed-rank" in note


def test_bandwidth_overlay_divides_by_the_capacity_as_rebbr_did():
    data = rebbr_experiment(["rebbr-bandwidth"], bandwidth_mbps=[10, 100], cc=["bbr"], figure="capacity-share-vs-loss")
    lines = lines_by_label(published_axes(data))
    assert set(lines) == {"BBR (10 Mbit/s)", "BBR (100 Mbit/s)", f"{LABEL}: BBR (10 Mbit/s)",
                          f"{LABEL}: BBR (100 Mbit/s)", "the whole capacity (bottleneck throughput's ceiling)"}
    rows = [r for r in csv_rows("experiment1.csv") if r["congestion_control"] == "bbr"
            and float(r["specified_bw_Mbps"]) == 10]
    expected = sorted((float(r["loss_rate"]) * 100, float(r["goodput_Mbps"]) / float(r["bandwidth_Mbps"]))
                      for r in rows)
    line = lines[f"{LABEL}: BBR (10 Mbit/s)"]
    assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == expected


def test_only_the_experiments_own_series_are_drawn():
    """ReBBR's RTT experiment at 10 ms alone: 2 algorithms x 13 losses, no RTT in the labels."""
    lines = lines_by_label(published_axes(rebbr_experiment(["rebbr-rtt"], rtt_ms=[10])))
    published = {k: v for k, v in lines.items() if k.startswith(LABEL)}
    assert set(published) == {f"{LABEL}: BBR", f"{LABEL}: CUBIC"}
    bbr_10 = sorted(float(r["goodput_Mbps"]) for r in csv_rows("experiment3.csv")
                    if r["congestion_control"] == "bbr" and r["rtt_ms"] == "10")
    assert sorted(published[f"{LABEL}: BBR"].get_ydata()) == bbr_10
    algorithms = rebbr_experiment(["rebbr-algorithms"], cc=["reno", "bbr"])
    assert {k for k in lines_by_label(published_axes(algorithms)) if k.startswith(LABEL)} == {
        f"{LABEL}: Reno", f"{LABEL}: BBR"}


def test_cellular_overlay_matches_the_trace_not_the_rate_columns():
    trace = [{"name": "verizon-lte-short", "uplink": "Verizon-LTE-short.up", "downlink": "Verizon-LTE-short.down"}]
    exp = {"cc": ["cubic", "bbr"], "loss_percent": LOSSES, "published": ["rebbr-cellular"], "figure": "cellular",
           "rtt_ms": [100], "bandwidth_mbps": None, "trace": trace}
    lines = lines_by_label(published_axes(experiment(exp, measured)))
    expected = sorted(float(r["goodput_Mbps"]) for r in csv_rows("experiment4.csv") if r["congestion_control"] == "bbr")
    assert sorted(lines[f"{LABEL}: BBR"].get_ydata()) == expected


def test_nothing_matching_is_said_and_an_empty_list_draws_nothing():
    section = build_section(rebbr_experiment(["rebbr-figure8"], rtt_ms=[40]))
    assert not [f for f in section.figures if f.name.endswith("-published")]
    assert any("no series has this experiment's" in note for note in section.notes)
    off = build_section(rebbr_experiment([]))
    assert [f.name for f in off.figures] == ["e"] and not off.notes


def test_a_changed_or_missing_file_fails_loudly(tmp_path: Path):
    for name in ("figure8.csv", "LICENSE", "README.md"):
        shutil.copy(FOLDER / name, tmp_path / name)
    data = rebbr_experiment(["rebbr-figure8"])
    assert published_section(data, tmp_path).figures  # the copy itself is accepted
    text = (tmp_path / "figure8.csv").read_text()
    (tmp_path / "figure8.csv").write_text(text.replace("bbr, 0.01, 85.37", "bbr, 0.01, 95.37"))
    changed = r"rebbr-figure8: .*figure8.csv is not ReBBR's file: sha256 [0-9a-f]{64}, expected 74f8dc82"
    with pytest.raises(PublishedDataError, match=changed):
        published_section(data, tmp_path)
    (tmp_path / "figure8.csv").unlink()
    with pytest.raises(PublishedDataError, match=r"rebbr-figure8: .*figure8.csv is missing"):
        published_section(data, tmp_path)


def test_spec_field_is_checked_and_the_rebbr_presets_name_their_sets():
    with pytest.raises(SpecError, match="published: figure bufferbloat draws no published numbers"):
        parse_spec({"name": "s", "experiments": [{"name": "e", "figure": "bufferbloat", "cc": ["bbr"], "loss": [0],
                                                  "rtt_ms": [40], "bandwidth_mbps": [10], "duration_s": 10,
                                                  "published": ["rebbr-figure8"]}]})
    with pytest.raises(SpecError, match="published\\[0\\]: 'rebbr-fig8'"):
        parse_spec({"name": "s", "experiments": [{"name": "e", "cc": ["bbr"], "loss": [0], "rtt_ms": [40],
                                                  "bandwidth_mbps": [10], "duration_s": 10,
                                                  "published": ["rebbr-fig8"]}]})
    named = {e.name: e.published for e in load_spec("full-sweep").experiments}
    assert named == {"figure8": ["rebbr-figure8"], "bandwidth": ["rebbr-bandwidth"],
                     "algorithms": ["rebbr-algorithms"], "rtt": ["rebbr-rtt"], "cellular": ["rebbr-cellular"]}
