"""The Argo-against-local comparison of benchmarks/cluster/argo_vs_local.py, on small tables."""

from __future__ import annotations

from benchmarks.cluster.argo_vs_local import apart, report, seed_spread


def row(cell: str, goodput: float, start: str, end: str, experiment: str = "figure8", seed: str = "1",
        loss: str = "0.01") -> dict[str, str]:
    return {"sweep": "s", "experiment": experiment, "cell_id": cell, "cc": "bbr", "loss": loss, "seed": seed,
            "repetition": seed, "status": "ok", "attempt": "1", "started_at": start, "finished_at": end,
            "goodput_mbps": str(goodput)}


def test_apart_is_symmetric_and_relative_to_the_mean():
    assert apart(90, 110) == apart(110, 90) == 0.2
    assert apart(0, 0) == 0.0


def test_seed_pairs_are_formed_within_a_cell_only():
    seeds = [row("a", 10, "2026-11-29T10:00:00", "2026-11-29T10:01:00", seed="1"),
             row("b", 30, "2026-11-29T10:00:00", "2026-11-29T10:01:00", seed="2"),
             row("c", 50, "2026-11-29T10:00:00", "2026-11-29T10:01:00", seed="1", loss="0.02")]
    assert seed_spread(seeds) == [1.0]  # 10 against 30; the cell at another loss has no pair


def test_report_gives_the_wall_time_ratio_and_the_differences_per_experiment():
    argo = [row("a", 90, "2026-11-29T10:00:00", "2026-11-29T10:02:00"),
            row("b", 50, "2026-11-29T10:00:00", "2026-11-29T10:02:00", experiment="rtt")]
    local = [row("a", 110, "2026-11-25T10:00:00", "2026-11-25T10:01:00"),
             row("b", 50, "2026-11-25T10:01:00", "2026-11-25T10:02:00", experiment="rtt")]
    lines = report(argo, local, argo + local)
    assert "| Argo | 2 | 2.0 min | 2, 2.0 |" in lines
    assert "| local executor | 2 | 2.0 min | 1, 1.0 |" in lines
    assert "Wall-time ratio, Argo / local: **1.00** (busy wall time: pauses between sittings are not counted)." in lines
    assert "| figure8 | 1 | 20.0 % |" in lines and "| rtt | 1 | 0.0 % |" in lines
