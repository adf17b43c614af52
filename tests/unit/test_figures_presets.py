"""The presets of the source studies: every one validates, expands, and matches the sources' numbers.

docs/experiments.md holds a table of each source's numbers; the presets are checked against it
row by row, so a preset that drifts from its source (or a table that drifts from the preset) fails.
"""

import re
from pathlib import Path

import pytest
import yaml

from ccsweep.expand import expand
from ccsweep.spec import Experiment, QueueSetting
from ccsweep.specload import load_spec

REPO = Path(__file__).resolve().parents[2]
PRESETS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))
REBBR = {"figure8": 26, "bandwidth": 130, "algorithms": 78, "rtt": 130, "cellular": 26}


def test_every_study_has_a_preset():
    assert set(REBBR) | {"full-sweep", "step-response", "bufferbloat", "shallow-buffers", "loss-table",
                         "rebbr-buffers", "rebbr-queue", "rebbr-rtt-buffers"} <= set(PRESETS)


def source_table() -> tuple[list[str], list[dict[str, str]]]:
    """ReBBR's loss rates as the doc states them, and the rows of its 'Sources and their numbers' table."""
    doc = (REPO / "docs" / "experiments.md").read_text()
    rebbr = re.search(r"ReBBR's 13 loss rates are ([0-9., and]+) %", doc)
    assert rebbr, "the doc states ReBBR's 13 loss rates"
    losses = re.split(r",\s*|\s+and\s+", rebbr.group(1).strip())
    section = doc[doc.index("### Sources and their numbers"):].splitlines()
    start = next(i for i, ln in enumerate(section) if ln.startswith("|"))
    end = next((i for i in range(start, len(section)) if not section[i].startswith("|")), len(section))
    lines = section[start:end]
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip().strip("`") for c in ln.strip("|").split("|")), strict=True))
            for ln in lines[2:]]
    return losses, rows


def numbers(text: str) -> list[float]:
    return [float(v) for v in re.split(r",\s*", text)]


def flows_of(exp: Experiment) -> list[str]:
    return ["+".join(f"{g.count}×{g.cc}" for g in mix) for mix in exp.flow_mixes()]


def queue_of(queue: QueueSetting) -> tuple[str, float | None, int]:
    return (queue.kind, queue.bdp, queue.min_bytes)


def queues_in(text: str) -> list[tuple[str, float | None, int]]:
    """'infinite; droptail 1 BDP, floor 15000 B' or 'droptail 0.25, 0.5 BDP' as (kind, bdp, floor) per queue."""
    found: list[tuple[str, float | None, int]] = []
    for part in text.split(";"):
        part = part.strip()
        if part == "infinite":
            found.append(("infinite", None, 0))
            continue
        match = re.fullmatch(r"droptail ([0-9., ]+) BDP(?:, floor (\d+) B)?", part)
        assert match, f"unreadable queue {part!r}"
        found += [("droptail", b, int(match.group(2) or 0)) for b in numbers(match.group(1))]
    return found


ROWS = source_table()[1]


def test_the_source_table_covers_the_reproducing_presets():
    assert {row["preset"] for row in ROWS} == set(REBBR) | {"figure8-seeds", "rebbr-buffers", "rebbr-queue",
                                                            "rebbr-rtt-buffers", "shallow-buffers", "loss-table"}
    assert all(row["source"] for row in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row['preset']}/{row['experiment']}")
def test_preset_matches_its_sources_numbers(row: dict[str, str]):
    rebbr_losses, _ = source_table()
    (exp,) = [e for e in load_spec(row["preset"]).experiments if e.name == row["experiment"]]
    assert sorted(flows_of(exp)) == sorted(row["flows"].split(", "))
    if row["Mbit/s"].startswith("trace "):
        assert [t.uplink for t in exp.trace or []] == [f"{row['Mbit/s'].removeprefix('trace ')}.up"]
    else:
        assert exp.bandwidth_mbps == numbers(row["Mbit/s"])
    assert exp.rtt_ms == numbers(row["RTT (ms)"])
    losses = rebbr_losses if row["loss (%)"] == "ReBBR's 13" else row["loss (%)"].split(", ")
    assert exp.loss_percent == [float(v) for v in losses]
    assert [queue_of(q) for q in exp.queue] == queues_in(row["queue"])
    assert exp.duration_s == float(row["flow (s)"])
    rmem, wmem = (int(v) for v in row["buffers"].split(" / "))
    assert (exp.buffers.tcp_rmem[2], exp.buffers.tcp_wmem[2]) == (rmem, wmem)
    assert expand(load_spec(row["preset"]))


def test_source_table_parser_refuses_what_it_cannot_read():
    with pytest.raises(AssertionError, match="unreadable queue"):
        queues_in("red 1 BDP")
    assert queues_in("infinite; droptail 1 BDP, floor 15000 B") == [("infinite", None, 0), ("droptail", 1.0, 15000)]


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_expands(preset):
    spec = load_spec(preset)
    assert spec.name == preset
    cells = expand(spec)
    assert cells
    # Every experiment states its queue explicitly (ReBBR's code and write-up disagreed on it once).
    raw = yaml.safe_load((REPO / "sweeps" / f"{preset}.yaml").read_text())
    stated = "queue" in raw.get("defaults", {})
    assert all(stated or "queue" in experiment for experiment in raw.get("experiments", [])), preset
    if preset in REBBR:  # ReBBR's final code, which made its official figures, used the infinite queue
        assert {c.params.uplink.queue.kind for c in cells} == {"infinite"}


@pytest.mark.parametrize(("preset", "count"), REBBR.items())
def test_rebbr_experiment_cell_counts(preset, count):
    assert len(expand(load_spec(preset))) == count


def test_full_sweep_is_rebbrs_390_cells():
    spec = load_spec("full-sweep")
    cells = expand(spec)
    assert len(cells) == 390
    assert [e.name for e in spec.experiments] == list(REBBR)
    # bandwidth at 100 Mbit/s and algorithms' BBR/CUBIC cells are the same 26 cells: run once.
    assert len({c.id for c in cells}) == 390 - 26
    assert sum(c.params.duration_s for c in cells) == 27_040


def test_step_response_doubles_then_halves():
    (cell, *_) = expand(load_spec("step-response"))
    rates = [cell.params.uplink.rate_mbps * s.factor for s in cell.params.uplink.rate_schedule]
    assert rates == [2 * cell.params.uplink.rate_mbps, cell.params.uplink.rate_mbps]


def test_shallow_buffers_cover_quarter_to_eight_bdp():
    cells = expand(load_spec("shallow-buffers"))
    multiples = {round(c.params.uplink.queue.bytes / (c.params.uplink.rate_mbps * 1e6 / 8 * 0.025), 6) for c in cells}
    assert sorted(multiples) == [0.25, 0.5, 0.8, 1, 1.25, 1.5, 1.75, 2, 3, 5, 8]
    # The study's 0.8 BDP at 80 Mbit/s is its 200,000 bytes.
    assert any(c.params.uplink.rate_mbps == 80 and c.params.uplink.queue.bytes == 200_000 for c in cells)
    assert {c.params.cc_label for c in cells} == {"bbr", "cubic", "bbr+cubic"}
    assert all(len(c.params.flows) == 4 for c in cells)
    assert all(c.params.duration_s >= 120 for c in cells if c.params.cc_label == "bbr+cubic")
    assert all(c.params.warmup_s > 0 for c in cells)  # the loss rate leaves start-up out


def test_loss_table_has_a_baseline_and_a_symmetric_and_an_asymmetric_path():
    cells = expand(load_spec("loss-table"))
    paths = {(c.params.downlink.delay_ms, c.params.downlink.loss) for c in cells}
    assert paths == {(25, 0.0), (75, 0.0)}  # ThousandEyes names no ACK loss, and its baselines had none
    assert sorted({round(c.params.loss * 100, 6) for c in cells}) == list(range(0, 11))
    assert {c.params.uplink.rate_mbps for c in cells} == {1000}


def preset_text(preset: str) -> str:
    """A preset's description and experiment titles: the labels a report prints."""
    spec = load_spec(preset)
    return " ".join([spec.description, *(e.title or "" for e in spec.experiments)])


def test_preset_labels_say_what_their_sources_say():
    """Each label held to its source: what the source documents print, not what was once believed."""
    # ReBBR's Figure 6 is its RTT experiment; the socket-buffer challenge is in its text.
    buffers = preset_text("rebbr-buffers")
    assert "Figure 6 is the RTT experiment" in buffers and buffers.count("Figure 6") == 1
    assert "Figure 6" in preset_text("rebbr-rtt-buffers")
    rtt, default = load_spec("rtt").experiments[0], load_spec("rebbr-rtt-buffers").experiments[0]
    assert (default.rtt_ms, default.loss_percent, default.cc, default.duration_s) == \
        (rtt.rtt_ms, rtt.loss_percent, rtt.cc, rtt.duration_s)
    assert (default.buffers.tcp_rmem[2], default.buffers.tcp_wmem[2]) == (6291456, 4194304)  # Linux 4.11's
    # The shallow-buffer text names no authors: it is not the ICNP paper, and says it ran 40, 80, 120 Mbit/s.
    for text in (preset_text("shallow-buffers"), (REPO / "docs" / "experiments.md").read_text()):
        assert "Hock" not in text and "ICNP" not in text
    assert "40, 80 and 120" in preset_text("shallow-buffers")
    # ReBBR's earlier queue had a 15 KB floor (its write-up), not 30 kB.
    (queue,) = [q for q in load_spec("rebbr-queue").experiments[0].queue if q.kind == "droptail"]
    assert queue.min_bytes == 15000 and "15 KB" in preset_text("rebbr-queue")
    assert "30 kB floor" not in (REPO / "docs" / "experiments.md").read_text()


def test_loss_table_baselines_are_loss_free_and_its_title_states_each_paths_rtt():
    cells = expand(load_spec("loss-table"))
    assert all(c.params.downlink.loss == 0 for c in cells if c.params.uplink.loss == 0)
    stated = {float(v) for v in re.findall(r"(\d+) ms RTT", preset_text("loss-table"))}
    assert stated == {c.params.rtt_ms for c in cells} == {50, 100}
