"""`ccsweep export` and `ccsweep.load` on recorded sweeps (tests/fixtures): the same tables, read back exactly.

The fixtures are records of real short cells; each test works on them read-only, or on a copy
when it changes a record.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import ccsweep
from ccsweep.cli import main
from ccsweep.results.tidy import column_type
from ccsweep.store.base import record_key
from ccsweep.store.file import FileStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture(kind: str) -> tuple[Path, str]:
    root = FIXTURES / kind
    (sweep,) = [p.name for p in (root / "sweeps").iterdir()]
    return root, sweep


def export(store: Path, sweep: str, out: Path, fmt: str = "csv") -> None:
    done = CliRunner().invoke(main, ["export", "--store", str(store), "--sweep", sweep, "--format", fmt,
                                     "--out", str(out)])
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_round_trips_a_recorded_sweep(tmp_path: Path, fmt: str):
    root, sweep = fixture("goodput-vs-loss")
    export(root, sweep, tmp_path, fmt)
    for table in ("cells", "flows"):
        path = tmp_path / f"{sweep}-{table}.{fmt}"
        back = ccsweep.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, ccsweep.load(str(root), sweep, table=table))


def test_one_row_per_stored_cell_with_every_parameter_and_measurement():
    root, sweep = fixture("goodput-vs-loss")
    cells = ccsweep.load(f"file://{root}", sweep)
    records = {p.parent.name: json.loads(p.read_text()) for p in (root / "cells").glob("*/result.json")}
    assert sorted(cells["cell_id"]) == sorted(records), "each stored cell once"
    assert set(cells["repetition"]) == {0, 1}
    for row in cells.itertuples():
        record = records[row.cell_id]
        params = record["cell"]["params"]
        assert row.goodput_mbps == record["goodput_mbps"]
        assert row.goodput_steady_mbps == record["goodput_steady_mbps"]
        assert row.bottleneck_throughput_mbps == record["bottleneck_throughput_mbps"]
        assert row.uplink_loss == params["uplink"]["loss"] and row.loss == params["uplink"]["loss"]
        assert row.uplink_queue_bytes == params["uplink"]["queue"]["bytes"]
        assert row.tcp_rmem_max == params["buffers"]["tcp_rmem"][2]
        assert row.seed == params["seed"] and row.repetition == params["repetition"]
        assert row.kernel == record["environment"]["kernel"]
        assert row.ccsweep_version == record["environment"]["ccsweep_version"]
        assert row.link_backend == "ccsweep-link"
        # The fixture's records are older than the field: the cell reads its link's default, and the
        # emulator's echo (absent, as its binary moved packets one at a time) stays apart from it.
        assert row.link_offload == "tso" and pd.isna(row.link_offload_ran)
        assert bool(row.emulator_late) is record["link"]["selfcheck"]["late"]
        assert row.record == f"{root}/{record_key(row.cell_id)}", "where the raw record is"
    assert cells["emulator_lateness_p99_us"].dtype == "float64"
    assert cells["uplink_drops_loss"].dtype == "Int64"


def test_every_column_has_its_type_by_name():
    """Typed by name, so an all-empty column (a trace link's rate) has the same dtype in every sweep."""
    root, sweep = fixture("cellular")
    cells = ccsweep.load(str(root), sweep)
    assert cells["uplink_rate_mbps"].isna().all() and cells["uplink_rate_mbps"].dtype == "float64"
    assert cells["uplink_trace"].notna().all()
    for name in cells.columns:
        expected = {"int": "Int64", "float": "float64", "bool": "boolean", "str": "string"}[column_type(name)]
        assert cells[name].dtype == expected, name


def test_flows_table_has_one_row_per_flow():
    root, sweep = fixture("shallow-buffers")
    cells = ccsweep.load(str(root), sweep)
    flows = ccsweep.load(str(root), sweep, table="flows")
    assert len(flows) == int(cells["n_flows"].sum()) > len(cells)
    mix = flows[flows["cc"] == "bbr+cubic"]
    assert set(mix["flow_cc"]) == {"bbr", "cubic"}
    assert set(flows["cell_id"]) == set(cells["cell_id"])
    assert flows["rwnd_limited_fraction"].notna().any()


def test_unmeasured_lateness_is_empty_not_false(tmp_path: Path):
    """A record without a lateness measurement (Mahimahi's) says nothing about being on time."""
    root, sweep = fixture("goodput-vs-loss")
    shutil.copytree(root, tmp_path / "store")
    store = FileStore(tmp_path / "store")
    cell_id = sorted(p.name for p in (tmp_path / "store" / "cells").iterdir())[0]
    path = tmp_path / "store" / record_key(cell_id)
    record = json.loads(path.read_text())
    record["link"]["selfcheck"].update(lateness_p50_us=None, lateness_p99_us=None, lateness_max_us=None)
    path.write_text(json.dumps(record))
    cells = ccsweep.load(store, sweep).set_index("cell_id")
    assert cells.loc[cell_id, "emulator_late"] is pd.NA
    assert cells["emulator_late"].notna().sum() == len(cells) - 1
    export(tmp_path / "store", sweep, tmp_path / "out")
    assert ccsweep.read_csv(tmp_path / "out" / f"{sweep}-cells.csv").set_index("cell_id").loc[cell_id,
                                                                                               "emulator_late"] is pd.NA


def test_timeseries_long_form_per_flow():
    root, sweep = fixture("step-response")
    store = FileStore(root)
    series = ccsweep.load_timeseries(store, sweep)
    cells = ccsweep.load(store, sweep)
    one = cells["cell_id"].iloc[0]
    stored = store.get_timeseries(one)
    assert stored is not None
    mine = series[series["cell_id"] == one]
    assert len(mine) == sum(len(f.t) for f in stored.flows)
    assert list(mine["srtt_ms"].iloc[:3]) == pytest.approx([v / 1000 for v in stored.flows[0].rtt_us[:3]])
    bbr = series[series["cc"] == "bbr"]
    assert bbr["bbr_bw_mbps"].notna().all() and series[series["cc"] == "cubic"]["bbr_bw_mbps"].isna().all()
    link = ccsweep.load_timeseries(store, sweep, cells=[one], kind="link")
    assert set(link["cell_id"]) == {one} and "uplink_queue_bytes" in link.columns


def test_export_of_an_unknown_sweep_is_one_line_exit_2(tmp_path: Path):
    root, _ = fixture("goodput-vs-loss")
    done = CliRunner().invoke(main, ["export", "--store", str(root), "--sweep", "no-such", "--out", str(tmp_path)])
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 2 and "sweep 'no-such' has no manifest" in done.stderr
    assert not list(tmp_path.iterdir())


def figures_of(kind: str, tmp_path: Path) -> tuple[Path, str, Path, str]:
    """`ccsweep figures` on a copy of a fixture store: (store, sweep, its output folder, the report)."""
    root, sweep = fixture(kind)
    store = tmp_path / "store"
    shutil.copytree(root, store)
    done = CliRunner().invoke(main, ["figures", "--store", str(store), "--sweep", sweep])
    assert done.exit_code == 0, done.output
    folder = store / "sweeps" / sweep
    return store, sweep, folder, (folder / "report.html").read_text()


@pytest.fixture(scope="module")
def figure8(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path, str]:
    """Figure 8's fixture store drawn once for the tests that only read what was drawn."""
    return figures_of("goodput-vs-loss", tmp_path_factory.mktemp("figure8"))


def test_report_links_the_csvs_and_each_cells_record(figure8):
    store, sweep, folder, report = figure8
    assert 'href="cells.csv"' in report and 'href="flows.csv"' in report
    records = re.findall(r'href="(\.\./\.\./cells/[0-9a-f]{16}/result\.json)"', report)
    assert len(set(records)) == len(list((store / "cells").iterdir()))
    assert all((folder / link).resolve().is_file() for link in records), "links resolve beside the report"
    beside = ccsweep.read_csv(folder / "cells.csv")
    loaded = ccsweep.load(str(store), sweep)
    pd.testing.assert_frame_equal(beside.drop(columns="record"), loaded.drop(columns="record"))
    assert all((folder / link).resolve().is_file() for link in beside["record"])


def test_report_shows_each_cells_series_beside_its_row(figure8):
    """Figure 8 in small: every stored cell gets its small multiples (cwnd, RTT, delivery rate, BBR's estimate)."""
    store, _, folder, report = figure8
    cells = sorted(p.name for p in (store / "cells").iterdir())
    for cell_id in cells:
        image = folder / "cells" / f"{cell_id}.png"
        assert image.read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), cell_id
        assert f'href="cells/{cell_id}.png"' in report and f'src="cells/{cell_id}.png"' in report
