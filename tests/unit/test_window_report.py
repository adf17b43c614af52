"""The window-share result's README quotes what its committed samples give
(benchmarks/pacing/window_report.py), and its steady state is read the way the kernel defines it."""

from __future__ import annotations

import pytest

from benchmarks.pacing.window_report import README, compute, load
from benchmarks.pacing.window_share import STEADY_AFTER_S, summarise
from benchmarks.quoted import fill, names


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = README.read_text()
    assert {"window.table", "window.share", "window.cap-4-11", "window.limited"} <= set(names(text))
    assert fill(text, compute()) == text


def test_a_quoted_number_changed_by_hand_no_longer_matches_its_data() -> None:
    text = README.read_text()
    edited = text.replace("<!-- value: window.cap-4-11 -->3,", "<!-- value: window.cap-4-11 -->4,", 1)
    assert edited != text and fill(edited, compute()) == text


def test_every_flow_of_the_committed_run_has_both_ends_sampled_through_the_steady_state() -> None:
    record = load()
    assert [flow["loss_percent"] for flow in record["flows"]] == [0, 1, 10, 20, 30, 40]
    for flow in record["flows"]:
        for end in ("sender", "receiver"):
            times = [s["t"] for s in flow[end] if s["t"] >= STEADY_AFTER_S]
            assert times and times[-1] - times[0] >= record["seconds"] - STEADY_AFTER_S - 1, (flow["loss_percent"], end)


def _flow(clamp: int, rcvbuf: int, seconds: int = 20) -> dict:
    """A synthetic flow: 10 packets of 1448 bytes a 100 ms sample, the sender limited half its busy time."""
    receiver = [{"t": t / 10, "rcvbuf": rcvbuf, "window_clamp": clamp, "bytes_received": t * 14_480}
                for t in range(seconds * 10 + 1)]
    sender = [{"t": t / 10, "snd_wnd": clamp // 2, "rtt_us": 200_000, "busy_us": t * 100_000,
               "rwnd_limited_us": t * 50_000} for t in range(seconds * 10 + 1)]
    return {"loss_percent": 1.0, "receiver": receiver, "sender": sender}


def test_the_share_is_the_clamp_over_the_buffer_and_4_11_s_window_is_half_the_buffer() -> None:
    summary = summarise(_flow(clamp=4_096_000, rcvbuf=6_553_600), rmem_max=6_553_600)
    assert summary["clamp_share_median"] == pytest.approx(0.625)
    assert summary["linux_4_11_window_cap"] == 3_276_800
    assert summary["rwnd_limited_share"] == pytest.approx(0.5)
    assert summary["goodput_mbps"] == pytest.approx(14_480 * 10 * 8 / 1e6)
    assert summary["rtt_ms_median"] == pytest.approx(200)
