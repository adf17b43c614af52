"""Adaptive repetitions on stored results (no flows run): runs are added only where the target is not met.

The goodput numbers are runs of this kernel's Figure 8 cells as an outside review recorded them
(BBR at 100 Mbit/s, 100 ms, 30 s flows): a calm cell near the link rate, and BBR at 15 % loss, whose
runs sit near 43 Mbit/s or below 5.
"""

from __future__ import annotations

import functools
import html
import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from ccsweep import storedplan
from ccsweep.adaptive import judge_points, next_count, round_bound, target_met, target_value, unwanted_ids
from ccsweep.admission import Admission
from ccsweep.cell import PackedParams
from ccsweep.cli import main
from ccsweep.executor import run_sweep
from ccsweep.expand import expand
from ccsweep.plan import cells_to_run, plan_counts
from ccsweep.result import CellResult
from ccsweep.results.data import load_sweep
from ccsweep.spec import AdaptiveRepetitions, PrecisionTarget, SpecError
from ccsweep.specload import parse_spec
from ccsweep.stats import median_ci
from ccsweep.store import open_store
from ccsweep.storedplan import get_manifest, with_cells
from ccsweep.sweep_status import judged_whole, sweep_status
from synthetic import ENV
from wholeplan import chunk_cells, pending_chunks, plan_sweep, replan

RULE = {"min": 3, "max": 20, "target": {"ci_relative": 0.05}}
CALM = [94.8, 95.1, 94.9, 95.0, 95.2, 94.7, 95.0, 94.9, 95.1, 95.0]
BIMODAL = [24.4, 2.2, 43.5, 41.0, 2.9, 36.2, 42.1, 3.3, 40.8, 42.9, 39.5, 4.1, 43.0, 41.7, 2.6, 42.2, 38.9, 43.1,
           3.8, 42.4]


def spec(repetitions: object, name: str = "adaptive") -> dict:
    return {"name": name, "experiments": [{
        "name": "fig8", "cc": ["bbr"], "loss_percent": [1, 15], "rtt_ms": [100], "bandwidth_mbps": [100],
        "duration_s": 30, "warmup_s": 5, "repetitions": repetitions}]}


def store_runs(store, cells, upto: int | None = None) -> list[str]:
    """Store results for `cells` (those below repetition `upto`); goodput from the recorded runs above."""
    stored = []
    for cell in cells:
        rep = cell.params.repetition
        if upto is not None and rep >= upto:
            continue
        value = CALM[rep % len(CALM)] if cell.params.loss < 0.05 else BIMODAL[rep]
        assert store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV,
                                         goodput_mbps=value, goodput_steady_mbps=value))
        stored.append(cell.id)
    return stored


def by_loss(cells) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for cell in cells:
        out.setdefault(round(cell.params.loss * 100), []).append(cell.params.repetition)
    return {k: sorted(v) for k, v in out.items()}


def test_the_issue_form_validates_and_plain_counts_keep_their_ids():
    parsed = parse_spec(spec(RULE))
    assert isinstance(parsed.experiments[0].repetitions, AdaptiveRepetitions)
    assert parsed.experiments[0].max_runs == 20 and parsed.experiments[0].cell_count() == 40
    # Run i of the adaptive rule is run i of `repetitions: n`: the same cell, the same id, the same seed.
    adaptive = expand(parsed)
    counted = expand(parse_spec(spec(3)))
    assert {c.id for c in counted} <= {c.id for c in adaptive}
    assert [c.params.seed for c in adaptive if c.params.loss == 0.01] == list(range(1, 21))


@pytest.mark.parametrize(("rule", "message"), [
    ({"min": 5, "max": 4, "target": {"ci_relative": 0.05}}, "repetitions: min 5 is above max 4"),
    ({"min": 1, "max": 4, "target": {"ci_relative": 0.05}}, "repetitions.min: Input should be greater than or equal"),
    ({"min": 3, "max": 20, "target": {}}, "repetitions.target.ci_relative: Field required"),
    ({"min": 3, "max": 20, "target": {"ci_relative": 2}}, "repetitions.target.ci_relative: Input should be less"),
    ({"min": 3, "max": 101, "target": {"ci_relative": 0.05}}, "repetitions.max: Input should be less than or equal"),
])
def test_bad_rules_are_one_line_naming_the_field(rule: dict, message: str):
    with pytest.raises(SpecError, match=message.replace("[", r"\[")):
        parse_spec(spec(rule))


def test_a_stored_sweep_gains_runs_only_where_the_target_is_not_met(tmp_path: Path):
    store = open_store(str(tmp_path))
    first = plan_sweep(parse_spec(spec(RULE)), store)
    assert first.rounds == round_bound(AdaptiveRepetitions.model_validate(RULE)) == 6  # 3, 5, 8, 12, 18, 20
    assert by_loss(first.pending) == {1: [0, 1, 2], 15: [0, 1, 2]}  # min runs first, of 40 planned
    assert len(first.cells) == 40 and len(first.wanted) == 6
    stored = store_runs(store, first.pending)
    second = replan(store, "adaptive")
    calm, bimodal = sorted(second.points, key=lambda p: p.params.loss)
    assert (calm.state, calm.runs, calm.wanted) == ("target met", 3, 3)
    assert "half-width" in calm.reason and "target 5 %" in calm.reason
    assert (bimodal.state, bimodal.runs) == ("needs more runs", 3)
    # Only the unsettled cell gets runs, the next ones by index, and nothing stored is planned again.
    assert by_loss(second.pending) == {15: list(range(3, bimodal.wanted))}
    assert not {c.id for c in second.pending} & set(stored)
    # Round after round, the bimodal cell grows to its max and stops there; the calm one never moves.
    rounds = 1
    plan = second
    while plan.pending:
        stored += store_runs(store, plan.pending)
        plan = replan(store, "adaptive")
        rounds += 1
    assert rounds <= first.rounds
    calm, bimodal = sorted(plan.points, key=lambda p: p.params.loss)
    assert (calm.runs, bimodal.runs, bimodal.state) == (3, 20, "max reached")
    assert len(stored) == len(set(stored)) == 23
    # `ccsweep status` counts the wanted runs only: the 17 unasked runs of the calm cell are not missing.
    status = CliRunner().invoke(main, ["status", "--store", str(tmp_path), "--sweep", "adaptive"])
    assert status.exit_code == 0 and "23 cells, 23 stored, 0 without a result" in status.output
    assert all(not e.missing for e in load_sweep(store, "adaptive").experiments)
    # The report says per cell how many runs it took and why it stopped, with the numbers.
    built = CliRunner().invoke(main, ["figures", "--store", str(tmp_path), "--sweep", "adaptive"])
    assert built.exit_code == 0, built.output
    report = html.unescape((tmp_path / "sweeps" / "adaptive" / "report.html").read_text())
    runs = report[report.index('id="runs"'):report.index('id="selfcheck"')]
    rows = re.findall(r"<tr><td>fig8</td><td>([^<]*)</td><td class=\"num\">(\d+)</td>.*?"
                      r"<td class=\"(?:pass|late)\">([^<]*)</td>", runs, re.S)
    assert [(cell.split(", ")[1], int(n), state) for cell, n, state in rows] == [
        ("1 % loss", 3, "target met"), ("15 % loss", 20, "max reached")]
    assert "95 % bootstrap CI of the median, n = 20" in runs
    assert "<td class=\"num\">0.3</td>" in runs  # 6 of the bimodal cell's 20 runs below 5 Mbit/s
    assert "23 cells (23 distinct)" in report and "0 missing" in report


def test_a_stricter_target_later_only_adds_runs(tmp_path: Path):
    store = open_store(str(tmp_path))
    stored = store_runs(store, plan_sweep(parse_spec(spec(RULE)), store).pending)
    strict = {**RULE, "target": {"ci_relative": 0.0005}}
    revised = plan_sweep(parse_spec(spec(strict)), store, revise=True)
    assert {c.id for c in revised.cached} == set(stored)  # the same cells: everything stored still counts
    assert by_loss(revised.pending) == {1: [3, 4, 5], 15: [3, 4, 5]}  # the calm cell too, now: only new runs


def test_the_argo_round_plan_prints_only_wanted_cells(tmp_path: Path):
    """`ccsweep plan --round N` (each later round of the Argo sweep) replans from the manifest alone."""
    store = open_store(str(tmp_path))
    store_runs(store, plan_sweep(parse_spec(spec(RULE)), store).pending)
    rounds, pending = tmp_path / "rounds", tmp_path / "pending"
    result = CliRunner().invoke(main, ["plan", "--sweep", "adaptive", "--store", str(tmp_path), "--round", "2",
                                       "--rounds-file", str(rounds), "--pending-file", str(pending)])
    assert result.exit_code == 0, result.output
    assert "round 2 of at most 6: 9 cells wanted (of 40 planned; 1 of 2 settings settled)" in result.output
    assert (rounds.read_text(), pending.read_text()) == ("6", "3")
    bad = CliRunner().invoke(main, ["plan", "--round", "2", "--store", str(tmp_path)])
    assert bad.exit_code == 2 and "--round reads a planned sweep's manifest: give --sweep" in bad.output


@pytest.mark.parametrize(("runs", "relative", "expected"), [
    (3, 0.10, 6),   # 3 x (0.10 / 0.05)^2 = 12, at most twice as many
    (4, 0.055, 6),  # 4 x 1.21 = 4.84, but at least half again as many
    (12, 0.06, 18),
    (18, 0.5, 20),  # never above max
    (3, float("inf"), 6),
])
def test_next_count(runs: int, relative: float, expected: int):
    assert next_count(runs, relative, 0.05, 20) == expected


@pytest.mark.parametrize(("values", "absolute", "met"), [
    ([50.0, 51.0, 52.0], None, True),     # half-width about 1 of a 51 median: under 5 %
    ([0.4, 0.6, 0.9], None, False),       # wide relative to its median...
    ([0.4, 0.6, 0.9], 1.0, True),         # ...but within an absolute 1 Mbit/s
    ([10.0, 40.0, 45.0], 1.0, False),     # wide either way
    ([51.0], 1.0, False),                 # one run: no interval, never settled
])
def test_the_target_is_met_relative_to_the_median_or_in_mbps(values: list[float], absolute: float | None, met: bool):
    target = PrecisionTarget(ci_relative=0.05, ci_absolute_mbps=absolute)
    assert target_met(target, median_ci(values)) is met


def test_an_adaptive_sweep_is_judged_a_chunk_of_its_plan_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`status` and the figures judge an adaptive sweep whole, yet never read its plan whole: a
    first pass keeps each run's id and value, a second gives each chunk's states; the answer is the
    one judging the whole plan at once gives."""
    monkeypatch.setattr("ccsweep.storedplan.PLAN_CHUNK_CELLS", 7)
    store = open_store(str(tmp_path))
    first = plan_sweep(parse_spec(spec(RULE)), store)
    store_runs(store, first.cells, upto=5)
    manifest = get_manifest(store, "adaptive")
    assert manifest is not None and manifest.layout is not None and manifest.layout.chunks == 6
    whole = with_cells(store, manifest)
    expected = judge_points(parse_spec(manifest.spec).experiments,
                            [entry.to_cell("adaptive") for entry in whole.cells],
                            lambda cell_id: target_value(store.get_result(cell_id)))

    def not_whole(*_args: object) -> None:
        raise AssertionError("the whole plan was read at once")

    monkeypatch.setattr("ccsweep.plan.with_cells", not_whole)
    monkeypatch.setattr("ccsweep.storedplan.with_cells", not_whole)
    chunks_read = []
    read_chunk = storedplan.manifest_chunk

    def counted_chunk(store, manifest, index):
        chunks_read.append(index)
        return read_chunk(store, manifest, index)

    monkeypatch.setattr("ccsweep.storedplan.manifest_chunk", counted_chunk)
    points, chunks = judged_whole(store, manifest, {}, parse_spec(manifest.spec).experiments)
    assert points == expected and {p.state for p in points} == {"target met", "needs more runs"}
    assert chunks_read == list(range(6))  # the first pass, one chunk at a time
    states = [(c.index, s.cell.id, s.state) for c, statuses in chunks for s in statuses]
    assert chunks_read == list(range(6)) * 2
    unwanted = unwanted_ids(points)
    assert [(cell_id, state) for _, cell_id, state in states] == [
        (c.id, "stored" if c.params.repetition < 5 else "unwanted" if c.id in unwanted else "missing")
        for c in whole.distinct_cells()]
    assert all(isinstance(cell_id, str) for p in points for cell_id in p.ids)  # ids a run, no Cell held
    firsts = {c.id: c.params for c in whole.distinct_cells() if c.params.repetition == 0}
    assert all(isinstance(p.setting, PackedParams) and p.params == firsts[p.ids[0]] for p in points)  # JSON a setting
    assert sweep_status(store, "adaptive").by_state == {"stored": 10, "unwanted": len(unwanted),
                                                        "missing": 30 - len(unwanted)}


@pytest.mark.parametrize("stored_upto", [None, 5])  # the first round (nothing stored), a later one
@pytest.mark.parametrize("chunk_size", [4, 500])  # the cells to run cut in chunks, or one Workflow
def test_the_plan_step_judges_an_adaptive_sweep_a_chunk_of_its_plan_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored_upto: int | None, chunk_size: int):
    """`ccsweep plan` (first round and --round) and the operator's plan counts never read an adaptive
    sweep's plan whole, yet add exactly the runs judging the whole plan at once adds."""
    monkeypatch.setattr("ccsweep.storedplan.PLAN_CHUNK_CELLS", 7)
    store = open_store(str(tmp_path / "store"))
    first = plan_sweep(parse_spec(spec(RULE)), store)
    if stored_upto is not None:
        store_runs(store, first.cells, upto=stored_upto)
    whole = replan(store, "adaptive")  # judged with the whole plan in memory
    manifest = get_manifest(store, "adaptive")
    assert manifest is not None and manifest.layout is not None and manifest.layout.chunks == 6
    assert whole.pending and len(whole.pending) < len(whole.cells) - len(whole.cached)  # some runs unwanted
    expected_chunks = pending_chunks(whole, chunk_size)
    assert bool(expected_chunks) is (chunk_size == 4)

    def not_whole(*_args: object) -> None:
        raise AssertionError("the whole plan was read at once")

    monkeypatch.setattr("ccsweep.plan.with_cells", not_whole)
    monkeypatch.setattr("ccsweep.storedplan.with_cells", not_whole)
    spec_path = tmp_path / "adaptive.yaml"
    spec_path.write_text(json.dumps(spec(RULE)))
    for args in ([str(spec_path)], ["--sweep", "adaptive", "--round", "2"]):
        files = {name: tmp_path / name for name in ("chunks", "rounds", "pending")}
        result = CliRunner().invoke(main, ["plan", *args, "--store", str(tmp_path / "store"), "--chunk-size",
                                           str(chunk_size), *(f"--{n}-file={p}" for n, p in files.items())])
        assert result.exit_code == 0, result.output
        items = json.loads(result.stdout)
        assert [i["id"] for i in items] == ([] if expected_chunks else [c.id for c in whole.pending])
        assert json.loads(files["chunks"].read_text()) == expected_chunks
        assert (files["rounds"].read_text(), files["pending"].read_text()) == (str(whole.rounds),
                                                                               str(len(whole.pending)))
        assert (f"{len(whole.wanted)} cells wanted (of {len(whole.cells)} planned; "
                f"{sum(p.settled for p in whole.points)} of 2 settings settled), {len(whole.cached)} already "
                f"stored, {len(whole.pending)} to run") in result.stderr
    counts = plan_counts(parse_spec(spec(RULE)), store)
    assert (counts.wanted, counts.cached, counts.pending, counts.rounds, counts.chunks) == (
        len(whole.wanted), len(whole.cached), len(whole.pending), whole.rounds, len(pending_chunks(whole, 500)))
    # Each chunk Workflow's first step (`plan --chunk`) prints the runs of its slice of the plan the
    # whole plan would, and every run to run is in one chunk.
    todo = {c.id for c in whole.pending}
    printed = []
    for index in range(-(-len(whole.cells) // chunk_size)):
        result = CliRunner().invoke(main, ["plan", "--sweep", "adaptive", "--store", str(tmp_path / "store"),
                                           "--chunk", str(index), "--chunk-size", str(chunk_size)])
        assert result.exit_code == 0, result.output
        items = [i["id"] for i in json.loads(result.stdout)]
        assert items == [c.id for c in chunk_cells(whole.cells, index, chunk_size) if c.id in todo]
        printed += items
    assert printed == [c.id for c in whole.pending]


def executor_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sweep: dict, stored_upto: int | None):
    """A six-chunk adaptive plan (7 entries a stored chunk), its whole plan as the oracle, then the
    store closed to reading the plan whole; returns (store, whole plan, the cells the executor reads
    as it reads them)."""
    monkeypatch.setattr("ccsweep.storedplan.PLAN_CHUNK_CELLS", 7)
    monkeypatch.setattr("ccsweep.executor.CHUNK_SIZE", 4)  # the cells to run read 4 at a time
    store = open_store(str(tmp_path / "store"))
    first = plan_sweep(parse_spec(sweep), store)
    if stored_upto is not None:
        store_runs(store, first.cells, upto=stored_upto)
    whole = replan(store, "adaptive")
    assert len(whole.pending) > 4 and len(whole.pending) < len(whole.cells) - len(whole.cached)

    def not_whole(*_args: object) -> None:
        raise AssertionError("the whole plan was read at once")

    monkeypatch.setattr("ccsweep.plan.with_cells", not_whole)
    monkeypatch.setattr("ccsweep.storedplan.with_cells", not_whole)
    read_chunks: list[list[str]] = []

    def by_chunks(*args):
        for chunk in cells_to_run(*args):
            read_chunks.append([c.id for c in chunk])
            yield chunk

    monkeypatch.setattr("ccsweep.executor.cells_to_run", by_chunks)
    return store, whole, read_chunks


@pytest.mark.parametrize("stored_upto", [None, 5])
def test_the_local_executor_counts_an_adaptive_sweep_a_chunk_of_its_plan_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored_upto: int | None, link_binary_stand_in: None):
    """`ccsweep run` judges and counts an adaptive sweep without reading its plan whole, and meets
    the runs to run in the order and number the whole plan gives. No flow runs: a CPU budget no
    cell fits in makes every run to run `unavailable`, said once."""
    store, whole, read_chunks = executor_fixture(tmp_path, monkeypatch, spec(RULE), stored_upto)
    console = Console(file=io.StringIO(), width=400)
    summary = run_sweep(parse_spec(spec(RULE)), store, workdir=tmp_path / "work", cpu_budget=0.001,
                        console=console)
    assert list(summary.tried.items()) == [(c.id, "unavailable") for c in whole.pending]
    assert all(len(ids) <= 4 for ids in read_chunks) and sum(read_chunks, []) == [c.id for c in whole.pending]
    assert summary.cached == ({"fig8": len(whole.cached)} if whole.cached else {})
    said = console.file.getvalue()
    assert (f"{len(whole.wanted)} cells, {len(whole.cached)} already stored, 0 to run" in said
            and said.count("skipping cells: a 100 Mbit/s cell needs about") == 1)


def test_the_local_executor_starts_an_adaptive_sweeps_runs_a_chunk_at_a_time(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             link_binary_stand_in: None):
    """The runs the first round wants start as real `ccsweep cell` processes, a chunk of the plan
    at a time in plan order; no flow runs, as another run stores each chunk's results just before
    its cells start (each process finds its result and reports `cached`). Those results are calm,
    so every setting is settled after the one round. Cells start without the usual 1 s between them."""
    cubic = spec(RULE)
    cubic["experiments"][0]["cc"] = ["cubic"]  # every Linux kernel offers it
    store, whole, read_chunks = executor_fixture(tmp_path, monkeypatch, cubic, None)
    monkeypatch.setattr("ccsweep.executor.Admission", functools.partial(Admission, stagger_s=0.0))
    counting = whole.pending  # the first pass counts them; the second starts them

    def stored_meanwhile(*args):
        for chunk in cells_to_run(*args):
            read_chunks.append([c.id for c in chunk])
            if len(sum(read_chunks, [])) > len(counting):
                for cell in chunk:
                    assert store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b",
                                                     environment=ENV, goodput_mbps=95.0, goodput_steady_mbps=95.0))
            yield chunk

    monkeypatch.setattr("ccsweep.executor.cells_to_run", stored_meanwhile)
    summary = run_sweep(parse_spec(cubic), store, workdir=tmp_path / "work", cpu_budget=64.0,
                        console=Console(file=io.StringIO(), width=400))
    # Several start at once (the executor opens with half its budget), so they end in any order.
    assert summary.tried == {c.id: "cached" for c in whole.pending}
    assert all(len(ids) <= 4 for ids in read_chunks) and len(read_chunks) == 4
    assert sum(read_chunks, []) == [c.id for c in whole.pending] * 2
    assert summary.rounds == 1 and plan_counts(parse_spec(cubic), store).pending == 0  # settled
