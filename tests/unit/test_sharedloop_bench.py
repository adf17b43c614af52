"""The shared-loop bench's offline parts: the links both arms run, the CPU it reads, the rows it writes."""

from __future__ import annotations

import json

import pytest

from benchmarks.sharedloop.bench import goodput_mbps, link_options, link_rows, links_file, mix, schedstat_ns, wake_rate


def test_one_link_in_four_is_heavy():
    assert mix(8) == ["heavy", "light", "light", "light"] * 2
    assert mix(16).count("heavy") == 4


def test_the_kinds_differ_only_in_loss_and_every_link_has_its_own_namespaces():
    heavy, light = link_options("t", 0, "heavy"), link_options("t", 1, "light")
    assert heavy[heavy.index("--uplink-loss") + 1] == "0"
    assert light[light.index("--uplink-loss") + 1] == "0.01"
    differing = {index for index, (a, b) in enumerate(zip(heavy, light, strict=True)) if a != b}
    assert differing == {1, 3, heavy.index("--uplink-loss") + 1}, "namespaces and loss, nothing else"
    for options in (heavy, light):
        assert options[options.index("--release-window") + 1] == "250us"
        assert options[options.index("--realtime-priority") + 1] == "10"
    names = [link_options("t", index, kind)[i] for index, kind in enumerate(mix(16)) for i in (1, 3)]
    assert len(set(names)) == 32


def test_the_shared_loops_file_carries_each_links_options_as_they_are():
    option_lists = [link_options("t", index, kind) for index, kind in enumerate(mix(4))]
    text = links_file(option_lists)
    assert [json.loads(line) for line in text.splitlines()] == option_lists
    assert "droptail packets=834" in json.loads(text.splitlines()[0]), "a value with a space stays one value"


def test_cpu_is_the_first_schedstat_field_of_every_task():
    assert schedstat_ns(["1500000000 20 3\n", "250 1 1\n", ""]) == 1_500_000_250


def test_goodput_is_the_receivers_rate_or_none():
    report = json.dumps({"end": {"sum_received": {"bits_per_second": 94_500_000.0}}})
    assert goodput_mbps(report) == pytest.approx(94.5)
    assert goodput_mbps("") is None
    assert goodput_mbps(json.dumps({"error": "unable to connect"})) is None


def summary(p99: float) -> dict:
    return {"event": "summary", "lateness_us": {"p50": 10.0, "p99": p99, "max": 2 * p99, "count": 1000}}


def test_rows_give_each_link_its_own_lateness_and_in_processes_its_own_cpu():
    lines = [summary(300.0), summary(450.0)]
    rows = link_rows({"rep": 1, "links": 2, "arm": "processes"}, ["heavy", "light"], lines, [90.0, None],
                     [2.0, 0.1], 10.0)
    assert [(r["kind"], r["lateness_p99_us"], r["cpu_cores"], r["goodput_mbps"]) for r in rows] == [
        ("heavy", 300.0, 0.2, 90.0), ("light", 450.0, 0.01, None)]
    shared = [*lines, {"event": "summary-process", "wall_s": 20.0, "wake": {"timed_sleeps": 40_000}}]
    rows = link_rows({"rep": 1, "links": 2, "arm": "shared"}, ["heavy", "light"], shared, [90.0, 1.0], None, 10.0)
    assert [r["cpu_cores"] for r in rows] == [None, None], "one process: no CPU of a link's own"
    with pytest.raises(RuntimeError, match="1 link summaries for 2 links"):
        link_rows({}, ["heavy", "light"], lines[:1], [None, None], None, 10.0)


def test_the_wake_up_rate_sums_every_loop_of_the_run():
    loops = [{"event": "summary", "wall_s": 20.0, "wake": {"timed_sleeps": 40_000}},
             {"event": "summary", "wall_s": 10.0, "wake": {"timed_sleeps": 5_000}},
             {"event": "summary", "lateness_us": {}}]
    assert wake_rate(loops) == pytest.approx(2_500.0)
