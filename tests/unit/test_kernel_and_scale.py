"""The kernel as an axis, and time-scaled cells: both are part of what a cell is.

A cell pinned to a kernel release (`kernels:`) is another cell on each kernel, so results from two
kernels coexist in one store and are drawn as two series; a cell with no kernel is drawn per
kernel its results ran on. A time-scaled cell (a quick pass) records its scale and has its own id,
so it never stands in for the full-length cell.
"""

from __future__ import annotations

import pytest

from ccsweep.cell import Cell
from ccsweep.expand import expand
from ccsweep.figures.registry import build_section
from ccsweep.plan import node_selector
from ccsweep.result import CellResult
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import group_points, group_series, series_label, varying_facets
from ccsweep.runner.api import KernelUnavailable, check_runnable
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from synthetic import ENV, PATH, goodput

EXPERIMENT = {"name": "e", "cc": ["bbr"], "loss_percent": [0, 1], **PATH}


def cells_of(**extra: object) -> list[Cell]:
    return expand(parse_spec({"name": "s", "experiments": [{**EXPERIMENT, **extra}]}))


def test_a_kernels_axis_makes_one_cell_per_kernel_with_its_own_id_and_node_label():
    plain = cells_of()
    pinned = cells_of(kernels=["6.1.0", "6.18.0"])
    assert len(pinned) == 2 * len(plain)
    assert {c.params.kernel for c in pinned} == {"6.1.0", "6.18.0"}
    assert not {c.id for c in pinned} & {c.id for c in plain}
    assert all(c.params.kernel is None for c in plain)
    assert node_selector(pinned[0])["ccsweep.io/kernel"] in ("6.1.0", "6.18.0")
    assert "ccsweep.io/kernel" not in node_selector(plain[0])
    with pytest.raises(SpecError, match=r"kernels\[0\]"):
        cells_of(kernels=["6.18 ; rm -rf /"])


def test_a_cell_pinned_to_another_kernel_does_not_run_here():
    (cell, *_) = cells_of(kernels=["0.0.1-not-this-one"])
    with pytest.raises(KernelUnavailable, match="asks for kernel 0.0.1-not-this-one"):
        check_runnable(cell)
    check_runnable(cells_of()[0])


def results_for(cells: list[Cell], kernel: str, mbps: float) -> list[CellResult]:
    env = ENV.model_copy(update={"kernel": kernel})
    return [CellResult(cell=c, status="ok", started_at="a", finished_at="b", environment=env,
                       **goodput(lambda _c: mbps)(c)) for c in cells]


def test_two_kernels_are_two_series_pinned_or_not():
    for cells_a, cells_b in ((cells_of(kernels=["6.1.0", "6.18.0"]),) * 2, (cells_of(), cells_of())):
        a = [c for c in cells_a if c.params.kernel in (None, "6.1.0")]
        b = [c for c in cells_b if c.params.kernel in (None, "6.18.0")]
        results = results_for(a, "6.1.0", 80.0) + results_for(b, "6.18.0", 60.0)
        series = group_series(group_points(results), uplink__loss=0.0)
        assert len(series) == 2
        params = [s[0].params for s in series]
        assert "kernel" in varying_facets(params)
        assert [series_label(p, varying_facets(params)) for p in params] == ["BBR (kernel 6.1.0)",
                                                                           "BBR (kernel 6.18.0)"]
        data = ExperimentData(experiment=parse_spec({"name": "s", "experiments": [EXPERIMENT]}).experiments[0],
                              results=results)
        assert build_section(data).figures, "the goodput figure is built with both series"


def test_time_scale_shortens_flows_and_makes_other_cells():
    full = cells_of(duration_s=60, warmup_s=5)
    scaled = expand(parse_spec({"name": "s", "time_scale": 0.05, "experiments": [{**EXPERIMENT, "duration_s": 60,
                                                                                   "warmup_s": 5}]}))
    assert [c.params.duration_s for c in scaled] == [3.0] * len(full)
    assert all(c.params.warmup_s == 0.25 and c.params.time_scale == 0.05 for c in scaled)
    assert not {c.id for c in scaled} & {c.id for c in full}
    with pytest.raises(SpecError, match=r"time_scale 0.01 makes experiments\[e\].duration_s 0.3 s, below 1 s"):
        expand(parse_spec({"name": "s", "time_scale": 0.01, "experiments": [EXPERIMENT]}))


def _planned(tmp_path, spec: dict, *args: str) -> tuple[str, list[float]]:
    """`ccsweep plan` of `spec` with `args`: the sweep name it stored and its cells' time scales."""
    import subprocess
    import sys

    import yaml as _yaml

    from ccsweep.plan import planned_cells
    from ccsweep.store import open_store

    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(_yaml.safe_dump(spec))
    store = tmp_path / "store"
    done = subprocess.run([sys.executable, "-m", "ccsweep", "plan", str(path), "--store", str(store), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (sweep,) = [p.name for p in (store / "sweeps").iterdir() if (p / "manifest.json").exists()
                and p.name not in _planned.seen]
    _planned.seen.add(sweep)
    cells = planned_cells(open_store(str(store)), sweep)
    return sweep, sorted({c.params.time_scale for c in cells})


_planned.seen = set()  # type: ignore[attr-defined]


def test_an_empty_time_scale_keeps_the_specs_own(tmp_path):
    """The Argo template's default is empty: a spec's time_scale is not overridden by a default of 1."""
    _planned.seen.clear()
    spec = {"name": "scaled", "time_scale": 0.5, "experiments": [{**EXPERIMENT, "duration_s": 60}]}
    assert _planned(tmp_path, spec, "--time-scale=") == ("scaled", [0.5])


def test_a_63_character_name_scaled_is_not_the_unscaled_sweeps_name(tmp_path):
    _planned.seen.clear()
    spec = {"name": "a" * 63, "experiments": [{**EXPERIMENT, "duration_s": 60}]}
    plain = _planned(tmp_path, spec)
    scaled = _planned(tmp_path, spec, "--time-scale=0.5")
    assert plain == ("a" * 63, [1.0])
    assert scaled == ("a" * 58 + "-x0-5", [0.5]) and len(scaled[0]) == 63
