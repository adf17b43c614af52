"""What keeps the figures step's memory from growing with a sweep: dense dots drawn as one image in
the SVG, the both-links section decided without a pass over the records, and a point per setting
that holds its parameters as JSON, and the plan's entries kept as packed ids.

That the step's peak stays flat from 400 to 40,000 cells is measured by benchmarks/memory, not here.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from matplotlib.collections import PathCollection

from ccsweep.cell import CellParams
from ccsweep.figures.goodput_vs_loss import build
from ccsweep.figures.links import links_comparisons
from ccsweep.figures.style import DENSE_DOTS, new_figure, rasterize_dense, render
from ccsweep.manifest import SweepManifest
from ccsweep.result import CellResult
from ccsweep.results.data import PlanEntries, PlannedEntry, SweepData, load_sweep
from ccsweep.results.points import Point, group_points
from ccsweep.specload import parse_spec
from ccsweep.store import open_store
from ccsweep.storedplan import get_manifest, with_cells
from synthetic import ENV, experiment, goodput
from wholeplan import plan_sweep


def dots(ax, count: int) -> PathCollection:
    return ax.scatter(range(count), range(count))


def test_dots_up_to_the_threshold_stay_shapes_and_the_caption_says_nothing() -> None:
    _, (ax,) = new_figure()
    few = [dots(ax, DENSE_DOTS // 2), dots(ax, DENSE_DOTS // 2)]
    assert rasterize_dense(few) == ""
    assert not any(c.get_rasterized() for c in few)


def test_more_dots_than_the_threshold_are_one_image_in_the_svg_and_the_caption_says_so() -> None:
    fig, (ax,) = new_figure()
    many = [dots(ax, DENSE_DOTS // 2), dots(ax, DENSE_DOTS // 2 + 1)]
    caption = rasterize_dense(many)
    assert all(c.get_rasterized() for c in many)
    assert f"{DENSE_DOTS + 1:,} dots are drawn as an image in the SVG" in caption
    svg = render(fig)["svg"].decode()
    assert "<image" in svg and svg.count("<use ") < 100  # one image, not a <use> per dot


def test_a_dense_figure_says_so_in_its_caption_and_its_svg_stays_small() -> None:
    losses = [round(0.001 * (i + 1), 4) for i in range(60)]  # 60 settings x 2 algorithms x 20 runs: 2,400 dots
    data = experiment({"cc": ["cubic", "bbr"], "loss_percent": losses, "repetitions": 20},
                      goodput(lambda c: 90 * (1 - c.params.loss) + c.params.repetition / 10))
    (figure, *_) = build(data).figures
    assert "2,400 dots are drawn as an image" in figure.caption
    svg = io.BytesIO(render(figure.figure)["svg"])
    assert len(svg.getvalue()) < 600_000  # about 150 bytes a dot as shapes: 2,400 dots alone were 360 KB


def test_the_links_section_reads_no_record_unless_both_links_ran() -> None:
    class Unread(list):
        def __iter__(self):
            raise AssertionError("the records were read")

    manifest = SweepManifest(name="s", spec={}, cells=[], created_at="t", ccsweep_version="0")
    sweep = SweepData(manifest=manifest, description="", experiments=[], failures=[], stored=Unread([object()]),
                      links={"ccsweep-link"})
    assert links_comparisons(sweep) == []
    sweep.links = None  # a sweep built by hand: its records tell
    try:
        links_comparisons(sweep)
    except AssertionError as exc:
        assert "read" in str(exc)
    else:
        raise AssertionError("a sweep without `links` was not read")


def test_a_point_holds_its_setting_as_json_and_gives_back_equal_parameters() -> None:
    data = experiment({"cc": ["bbr"], "loss_percent": [1, 2], "repetitions": 3}, goodput(lambda c: 50.0))
    first = data.results[0].cell.params
    point = Point(first, data.results[:3])
    assert point.params == first and point.params is not point.params  # parsed at each use, equal each time
    assert not any(isinstance(v, CellParams) for v in vars(point).values())
    # A kernel recorded by the host (group_points' stand-in for a cell that names none) need not be
    # one a spec may name: it is kept as it is, never validated again.
    hosted = Point(first.model_copy(update={"kernel": "none"}), data.results[:3])
    assert hosted.params.kernel == "none" and hosted.params.model_copy(update={"kernel": None}) == first
    assert [p.params for p in group_points(data.results)] == [r.cell.params.model_copy(update={"kernel": "k"})
                                                             for r in data.results[::3]]


def test_the_plan_is_kept_as_packed_ids_and_a_cell_under_two_experiments_finds_its_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ccsweep.storedplan.PLAN_CHUNK_CELLS", 4)
    axes = {"cc": ["bbr"], "loss_percent": [1, 2, 5], "rtt_ms": [40], "bandwidth_mbps": [20], "duration_s": 30,
            "warmup_s": 5, "repetitions": 2}
    spec = parse_spec({"name": "twice", "experiments": [{"name": "a", **axes}, {"name": "b", **axes}]})
    store = open_store(str(tmp_path))
    planned = plan_sweep(spec, store)
    cells = planned.cells[:4]  # two of the three settings stored; the rest missing in both experiments
    for cell in cells:
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                  goodput_mbps=10.0, goodput_steady_mbps=10.0))
    data = load_sweep(store, "twice")
    manifest = with_cells(store, get_manifest(store, "twice"))  # type: ignore[arg-type]
    assert isinstance(data.plan, PlanEntries) and len(data.plan) == 12 == len(manifest.cells)
    assert list(data.plan) == [PlannedEntry(e.id, e.experiment) for e in manifest.cells]
    a, b = data.experiments
    assert [r.cell.id for r in a.results] == [r.cell.id for r in b.results] == [c.id for c in cells]
    assert [m.cell_id for m in a.missing] == [m.cell_id for m in b.missing] == [c.id for c in planned.cells[4:6]]
    assert [r.cell.id for r in data.distinct_results()] == [c.id for c in cells]


def test_a_plan_entry_that_is_no_cell_id_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="cell id 'x1': not 16 hex digits"):
        PlanEntries([PlannedEntry("x1", "a")])
