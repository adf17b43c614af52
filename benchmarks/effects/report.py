"""The quoted numbers of the link-effects result's README, from its committed cell table alone.

    python -m benchmarks.effects.report          # rewrite the numbers between the markers
    python -m benchmarks.effects.report --check  # exit 1 if the README differs from its data

Each folder of FOLDERS (benchmarks/results/2026-11-29-link-effects/, the preset's first 96 runs;
2026-12-01-link-effects/, all 144 cells' runs, with ECN and the delay step) holds the `ccsweep export`
cell table of the preset (`link-effects-cells.csv`, one row per stored run). From it: per experiment, effect setting,
algorithm and loss rate, the median steady-state goodput of the runs and what the link dropped
or held, so each effect reads beside its own control on BBR and CUBIC.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from functools import partial
from pathlib import Path

from benchmarks.cluster.argo_vs_local import read_cells, spans
from benchmarks.quoted import block, regenerate_all
from ccsweep.results.study import occupancy

REPO = Path(__file__).resolve().parents[2]
#: Each run's folder, oldest first.
FOLDERS = [REPO / "benchmarks/results/2026-11-29-link-effects", REPO / "benchmarks/results/2026-12-01-link-effects"]

Row = dict[str, str]


def setting(row: Row) -> str:
    """What effect a run's data direction (or, for slots, its ACK direction) ran under, in words."""
    if row["uplink_gilbert_elliott"]:
        model = json.loads(row["uplink_gilbert_elliott"])
        burst = 1 / model["r"]
        return f"mean burst {burst:g} packet{'' if burst == 1 else 's'}"
    if row["uplink_policer"]:
        policer = json.loads(row["uplink_policer"])
        return f"policer {policer['rate_mbps']:g} Mbit/s, {policer['burst_bytes'] / 1000:g} kB"
    if row["uplink_jitter"]:
        jitter = json.loads(row["uplink_jitter"])
        return f"jitter {jitter['jitter_ms']:g} ms {jitter['distribution']}, order {jitter['order']}"
    if row["downlink_slot"]:
        slot = json.loads(row["downlink_slot"])
        room = f"{slot['packets']} packets" if slot["packets"] else "any number"
        return f"ACK slots {slot['min_ms']:g}-{slot['max_ms']:g} ms, {room}"
    if row.get("uplink_delay_schedule"):  # a table exported before the column has none
        steps = json.loads(row["uplink_delay_schedule"])
        return f"delay {float(row['uplink_delay_ms']):g} ms, then " + ", ".join(
            f"{step['delay_ms']:g} ms at {step['at_s']:g} s" for step in steps)
    if row["uplink_queue_kind"] == "codel":
        return "CoDel marking ECN" if row["uplink_queue_ecn"] == "true" else "CoDel dropping"
    return f"delay {float(row['uplink_delay_ms']):g} ms fixed"


def table(rows: list[Row]) -> list[str]:
    grouped: dict[tuple[str, str, str, float], list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row["experiments"], setting(row), row["cc"], float(row["loss"])].append(row)
    lines = ["| experiment | effect | algorithm | loss % | median goodput, Mbit/s (runs) "
             "| dropped or marked by the effect (median per run) |", "|---|---|---|---|---|---|"]
    for (experiment, effect, cc, loss), runs in sorted(grouped.items()):
        goodput = statistics.median(float(r["goodput_steady_mbps"]) for r in runs)
        policed = statistics.median(float(r["uplink_drops_policer"] or 0) for r in runs)
        marked = statistics.median(float(r.get("uplink_marks_aqm") or 0) for r in runs)
        dropped = (f"{policed:.0f} by the policer" if effect.startswith("policer")
                   else f"{marked:.0f} marked CE" if effect.startswith("CoDel marking") else "–")
        lines.append(f"| {experiment} | {effect} | {cc} | {loss * 100:.3g} | {goodput:.3g} ({len(runs)}) | {dropped} |")
    return lines


def compute(folder: Path = FOLDERS[-1]) -> dict[str, str]:
    """Every value a folder's README quotes."""
    rows = read_cells(folder / "link-effects-cells.csv")
    return {
        "effects.runs": str(len(rows)),
        "effects.busy-min": f"{occupancy(spans(rows)).busy_s / 60:.0f}",
        "effects.table": block(table(rows)),
    }


def main() -> None:
    regenerate_all([(folder / "README.md", partial(compute, folder)) for folder in FOLDERS], __doc__)


if __name__ == "__main__":
    main()
