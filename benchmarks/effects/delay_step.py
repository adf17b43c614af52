"""The route-change experiments' tables from a store: their runs, and BBR's own estimates over time.

    python -m benchmarks.effects.delay_step --store STORE --out FOLDER

The link-effects preset steps the data's one-way delay from 20 to 120 ms and back, at 10 and 20 s
(delay-step) and at 15 and 25 s (delay-step-late), beside the same path with the delay fixed
(fixed-delay). A run's goodput alone cannot say why BBR loses by one step and not by the other;
its estimates can. This writes, from the stored records of those three experiments:
  delay-step-cells.csv   one row per run, as `ccsweep export` writes it (records named STORE/...)
  delay-step-series.csv  every BBR run's 100 ms samples: tcp_info's srtt, cwnd and delivery rate,
                         and BBR's own bandwidth and min_rtt estimates and pacing gain
which `python -m benchmarks.effects.delay_step_report` reads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ccsweep.analysis import load_timeseries
from ccsweep.results.data import load_sweep
from ccsweep.results.tidy import tables, write_csv
from ccsweep.store import open_store

SWEEP = "link-effects"
#: The route changes and their control.
EXPERIMENTS = ("delay-step", "delay-step-late", "fixed-delay")
CELLS_FILE = "delay-step-cells.csv"
SERIES_FILE = "delay-step-series.csv"
#: The run's keys, then the samples; a sample's values to 4 significant digits (the 100 ms
#: series is for reading a filter's steps, not for more digits than tcp_info's units give).
SERIES_KEYS = ("cell_id", "experiment", "loss", "repetition", "flow")
SERIES_VALUES = ("t", "srtt_ms", "cwnd", "delivery_rate_mbps", "bbr_bw_mbps", "bbr_min_rtt_ms", "bbr_pacing_gain")


def extract(store_url: str, out: Path) -> tuple[int, int]:
    """Write both tables into `out`; the number of runs and of BBR samples written."""
    store = open_store(store_url)
    cells, _ = tables(load_sweep(store, SWEEP), lambda key: f"STORE/{key}")
    runs = [row for row in cells if row["experiment"] in EXPERIMENTS]
    bbr = [row["cell_id"] for row in runs if row["cc"] == "bbr"]
    series = load_timeseries(store, SWEEP, bbr)[[*SERIES_KEYS, *SERIES_VALUES]]
    out.mkdir(parents=True, exist_ok=True)
    (out / CELLS_FILE).write_text(write_csv(runs))
    series.sort_values(["experiment", "loss", "repetition", "flow", "t"]).to_csv(
        out / SERIES_FILE, index=False, float_format="%.4g")
    return len(runs), len(series)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="the store the link-effects preset ran into")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write both tables into")
    args = parser.parse_args()
    runs, samples = extract(args.store, args.out)
    print(f"wrote {args.out / CELLS_FILE} ({runs} runs) and {args.out / SERIES_FILE} ({samples} samples)")


if __name__ == "__main__":
    main()
