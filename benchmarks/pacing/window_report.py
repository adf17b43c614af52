"""The quoted numbers of the window-share result's README, from its committed samples alone.

    python -m benchmarks.pacing.window_report          # rewrite the numbers between the markers
    python -m benchmarks.pacing.window_report --check  # exit 1 if the README differs from its data

benchmarks/results/2026-11-30-window-share/window-share.json.gz holds every 100 ms sample of both
ends of each flow `python -m benchmarks.pacing.window_share` ran; the summaries are computed again
from them here (`window_share.summarise`), never read from the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.pacing.window_share import buffer_max, summarise, table
from benchmarks.quoted import block, regenerate_main
from ccsweep.gunzip import gunzip

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-30-window-share"
SAMPLES = FOLDER / "window-share.json.gz"
README = FOLDER / "README.md"
#: The most the samples may unpack to (a 60 s flow's 600 samples a side are about 0.2 MB).
MAX_SAMPLES_BYTES = 64 << 20


def load(path: Path = SAMPLES) -> dict[str, Any]:
    return json.loads(gunzip(path.read_bytes(), MAX_SAMPLES_BYTES))


def compute(record: dict[str, Any] | None = None) -> dict[str, str]:
    """Every value the README quotes."""
    record = record if record is not None else load()
    summaries = [summarise(flow, buffer_max(record["rmem"])) for flow in record["flows"]]
    shares = sorted(s["clamp_share_median"] for s in summaries)
    limited = sorted(s["rwnd_limited_share"] for s in summaries if s["loss_percent"] > 0)
    given = sorted(s["snd_wnd_median"] for s in summaries if s["loss_percent"] > 0)
    return {
        "window.table": block(table(summaries)),
        "window.kernel": record["kernel"],
        "window.cc": record["cc"],
        "window.rmem": record["rmem"],
        "window.share": f"{shares[0]:.3f}" if shares[0] == shares[-1] else f"{shares[0]:.3f}-{shares[-1]:.3f}",
        "window.clamp": f"{max(s['window_clamp_median'] for s in summaries):,.0f}",
        "window.cap-4-11": f"{summaries[0]['linux_4_11_window_cap']:,}",
        "window.given": f"{given[0] / 1e6:.1f}-{given[-1] / 1e6:.1f} MB",
        "window.limited": f"{limited[0]:.0%}-{limited[-1]:.0%}",
    }


if __name__ == "__main__":
    regenerate_main(README, compute, __doc__)
