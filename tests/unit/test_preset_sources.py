"""Every preset number and label that claims a source, held to the number the source printed.

test_figures_presets holds the presets to docs/experiments.md's table of sources; this holds the
presets, and so that table, to the sources themselves:

- ReBBR's grids (algorithms, loss rates, RTTs, rates, trace) to ReBBR's own data, the CSVs of its
  official figures shipped in ccsweep/published/rebbr/ and pinned by SHA-256;
- the shallow-buffer study's buffer sizes to its numbers shipped in ccsweep/published/shallow-buffers/,
  ThousandEyes' loss rates and rate to its tables shipped in ccsweep/published/thousandeyes/;
- the numbers the documents print only in prose (flow lengths, queues, socket buffers, rates) to
  PRINTED below, each with where it is printed.

A setting no source printed is listed in CHOSEN with the reason, and every number in a preset's
description or titles must be one of its own settings (held above) or listed in TEXT with its
source: a new number in a preset is either held to a source or said to be ccsweep's, never left
to look like a source's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.results import sources
from ccsweep.results.published_sets import SETS, load
from ccsweep.spec import Experiment
from ccsweep.specload import load_spec
from test_figures_presets import flows_of

REPO = Path(__file__).resolve().parents[2]
PRESETS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))

SLIDES = "ReBBR slides (Hsiao and Muindi, June 2017)"
POST = "ReBBR blog post (Hsiao and Muindi, CS244 2017)"
REBBR_CODE = "ReBBR's repository at 0100160 (ccsweep/published/rebbr/README.md)"
SHALLOW = "the shallow-buffer study (untitled write-up), its setup"
THOUSANDEYES = "ThousandEyes, Path Quality Part 3"
LINUX = "Linux v4.11 net/ipv4/tcp.c tcp_init() (docs/experiments.md, 'Linux's default socket buffers')"

#: Numbers the sources print in prose: (value, where it is printed).
PRINTED: dict[str, tuple[object, str]] = {
    "rebbr-figure8-s": (60, f"{SLIDES}: the paper's Figure 8, 100 Mbps, 100 ms, 0.001-50 % loss, 60 s flows"),
    "rebbr-algorithms-s": (30, f"{SLIDES}: other Linux algorithms (30 s)"),
    "rebbr-bandwidth-s": (30, f"{SLIDES}: bottleneck bandwidth (30 s)"),
    "rebbr-rtt-s": (120, f"{SLIDES}: RTT (120 s)"),
    "rebbr-cellular-s": (140, f"{SLIDES}: Verizon LTE trace (140 s); ReBBR's run_experiment4.sh left its "
                         "runs at the script's default 60 s, which docs/experiments.md says"),
    "rebbr-queue": ("infinite", f"{SLIDES}: Mahimahi with an infinite bottleneck buffer"),
    "rebbr-old-queue": (("droptail", 1.0, 15000), f"{POST}: a BDP-sized queue with a \"15KB floor\" made no "
                        "difference against the infinite one (KB read as 1,000 bytes)"),
    "rebbr-buffers": (((4096, 87380, 6553600), (4096, 65536, 6553600)),
                      f"{REBBR_CODE}: initialize_congestion_control.sh, tcp_rmem 4096 87380 6553600, tcp_wmem "
                      f"4096 65536 6553600 (the slides print \"6.25 MB\", 6,553,600 B = 6.25 MiB)"),
    "rebbr-message-bytes": (1024, "ReBBR's repository, mahimahi/client.py: run_client(size=1024) sends one "
                            "1024-byte message over and over"),
    "rebbr-runs": (1, f"{SLIDES}; {REBBR_CODE}: one run per point"),
    "linux-default-buffers": (((4096, 87380, 6291456), (4096, 16384, 4194304)),
                              f"{LINUX}: rmem 4096 87380 6 MiB, wmem 4096 16K 4 MiB on a machine with 768 MiB free"),
    "shallow-rates": ([40.0, 80.0, 120.0], f"{SHALLOW}: link rates 40, 80, 120 \"mbit\""),
    "shallow-rtt": ([25.0], f"{SHALLOW}: RTT 25 ms"),
    "shallow-flows": (["4×bbr"], f"{SHALLOW}: standing-queue and shallow-buffer tests, 4 BBR flows"),
    "shallow-cubic-flows": (["4×cubic"], f"{SHALLOW}: the CUBIC reference, 4 CUBIC flows (left as a TODO)"),
    "shallow-mix": (["2×bbr+2×cubic"], f"{SHALLOW}: BBR vs CUBIC, 2 BBR + 2 CUBIC flows"),
    "shallow-queue-bytes-80": (200_000, f"{SHALLOW}: the standing-queue test's router queue, 200,000 B at 80 Mbit/s"),
    "shallow-mix-queue-bytes-80": (125_000, f"{SHALLOW}: BBR vs CUBIC at 125,000 B, \"roughly 0.5 BDP\""),
    "shallow-cyclic-bdp": ([1.75, 2.0], f"{SHALLOW}: the cyclic-throughput plots at 1.75 and 2 BDP"),
    "shallow-mix-trace-s": (100, f"{SHALLOW}: the 1.75 BDP trace runs to at least ~100 s"),
    "te-losses": ([0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], f"{THOUSANDEYES}: a loss-free baseline and 1 % to 10 % "
                  "in steps of 1 % (Tables 1, 2, 5, 6)"),
    "te-cc": (["bbr", "cubic"], f"{THOUSANDEYES}: BBR and CUBIC"),
    "te-iperf3-write": (131072, f"{THOUSANDEYES}: traffic from iperf3; iperf3's manual: -l, the length of each "
                        "write, defaults to 128 KB for TCP (128 KiB, its DEFAULT_TCP_BLKSIZE)"),
    "te-peak-sample": (900.31, f"{THOUSANDEYES}: Table 1's largest sample, 900.31 Mbps (the largest printed)"),
    "paper-step": ([2.0, 1.0], "BBR paper (ACM Queue 2016): BBR follows a 2× rise and a 2× fall of the bottleneck"),
}

#: Settings no source printed, so ccsweep chose them, and why; (preset, field) or (preset, experiment, field).
CHOSEN = {
    "warmup_s": "no source prints one; the steady-state claims leave start-up out",
    "seed": "no source seeds its runs",
    ("figure8-seeds", "repetitions"): "10 runs a cell where one says little (ReBBR ran one)",
    ("quick", "duration_s"): "a quick look: 20 s (its description says ReBBR's flows were 60 s)",
    ("quick", "queue"): "1 BDP of drop-tail (its description says ReBBR's was infinite)",
    ("quick", "loss_percent"): "four of ReBBR's 13 rates",
    ("figure8-seeds", "loss_percent"): "Figure 8's rates where one run says little on Linux 6.18",
    ("shallow-buffers", "queue"): "the study does not print the sizes it swept: 0.25-8 BDP around the ones it "
                                  "names (0.8, 0.5, 1.5, 1.75, 2, 5 BDP)",
    ("shallow-buffers", "duration_s"): "not printed (60 s; the mix 120 s, past the study's ~100 s trace)",
    ("shallow-buffers", "loss_percent"): "the study adds no random loss",
    ("shallow-buffers", "buffers"): "not printed (ReBBR's 6.25 MB, enough for 8 BDP at 120 Mbit/s)",
    ("shallow-buffers", "repetitions"): "not printed",
    ("shallow-buffers", "message_bytes"): "not printed (no tool is named): ReBBR's 1 KB writes, at 120 Mbit/s at most",
    ("loss-table", "rtt_ms"): "not printed by ThousandEyes (50 ms)",
    ("loss-table", "reverse"): "not printed: an asymmetric path whose ACKs come back in 75 ms",
    ("loss-table", "queue"): "not printed (1 BDP of drop-tail)",
    ("loss-table", "buffers"): "not printed (64 MiB, enough for 1 Gbit/s at 100 ms)",
    ("loss-table", "duration_s"): "not printed (30 s)",
    ("loss-table", "repetitions"): "not printed (the post gives no run count)",
    ("step-response", "*"): "the BBR paper is not among the documents read here: only its 2× step and "
                            "\"about 2 s\" (quoted by ReBBR) are held; 10 Mbit/s, 40 ms, 20 s, the queue, the "
                            "flow length and the repetitions are ccsweep's",
    ("rebbr-pacing", "cc"): "the question asked: the kernel's BBR beside the same code through BPF, paced and "
                            "unpaced (ReBBR ran bbr and cubic)",
    ("rebbr-pacing", "repetitions"): "where the cliff sits needs an interval: at least 5 runs a cell (ReBBR ran one)",
    ("rebbr-pacing", "pacing-loss-before", "loss_percent"): "ReBBR's rates where the cliff is (15-50 %)",
    ("rebbr-pacing", "pacing-single-packets", "loss_percent"): "ReBBR's rates where the cliff is (15-50 %)",
    ("figure8-bursty", "cc"): "the question asked: the kernel's BBR and BBR unpaced, where BBR's cliff moves, "
                              "beside CUBIC (ReBBR ran bbr and cubic, under independent loss only)",
    ("figure8-bursty", "repetitions"): "where a cliff sits needs an interval: at least 3 runs a cell, up to 8 "
                                       "until settled (ReBBR ran one)",
    ("link-effects", "*"): "ccsweep's own showcase of its link effects, held to no source: 50 Mbit/s, 40 ms, 30 s, "
                           "3 runs, the loss rates, bursts and policers are ccsweep's",
    ("bufferbloat", "*"): "the BBR paper is not among the documents read here: its bufferbloat plot prints no "
                          "numbers, so 10 Mbit/s, 40 ms, 10 BDP, 60 s and 3 runs are ccsweep's",
}

#: ReBBR's published set behind each experiment that runs ReBBR's grid (or a subset of it: `subset`).
REBBR_GRID = {
    ("figure8", "figure8"): "rebbr-figure8", ("figure8-seeds", "figure8"): "rebbr-figure8",
    ("quick", "quick"): "rebbr-figure8", ("algorithms", "algorithms"): "rebbr-algorithms",
    ("bandwidth", "bandwidth"): "rebbr-bandwidth", ("rtt", "rtt"): "rebbr-rtt", ("cellular", "cellular"):
    "rebbr-cellular", ("rebbr-buffers", "buffers-linux-default"): "rebbr-figure8",
    ("rebbr-buffers", "buffers-rebbr"): "rebbr-figure8", ("rebbr-queue", "queue-infinite-vs-bdp"): "rebbr-figure8",
    ("rebbr-rtt-buffers", "rtt-linux-default-buffers"): "rebbr-rtt",
    **{("rebbr-pacing", name): "rebbr-figure8" for name in ("pacing", "pacing-loss-before", "pacing-single-packets")},
    **{("figure8-bursty", name): "rebbr-figure8"
       for name in ("bursts-1", "bursts-2", "bursts-4", "bursts-8", "independent")},
    **{("full-sweep", name): f"rebbr-{name}" for name in ("figure8", "bandwidth", "algorithms", "rtt", "cellular")},
}
SUBSET = {"quick", "figure8-seeds"}
#: ReBBR's flow length per published set (PRINTED).
REBBR_SECONDS = {name: f"{name}-s" for name in ("rebbr-figure8", "rebbr-algorithms", "rebbr-bandwidth", "rebbr-rtt",
                                                 "rebbr-cellular")}


def printed(key: str) -> object:
    return PRINTED[key][0]


def experiments() -> list[tuple[str, Experiment]]:
    return [(preset, exp) for preset in PRESETS for exp in load_spec(preset).experiments]


def chosen(preset: str, experiment: str, field: str) -> bool:
    return any(key in CHOSEN for key in (field, (preset, field), (preset, experiment, field), (preset, "*")))


def buffers_of(exp: Experiment) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(exp.buffers.tcp_rmem), tuple(exp.buffers.tcp_wmem)


def held(preset: str, exp: Experiment) -> set[str]:
    """Assert every setting of one experiment that a source printed; return the fields held."""
    done: set[str] = set()
    grid = REBBR_GRID.get((preset, exp.name))
    if grid is not None:
        rows = load(SETS[grid])
        losses = sorted({round(r.loss_rate * 100, 6) for r in rows})
        if not chosen(preset, exp.name, "cc"):
            assert set(exp.cc or []) == {r.congestion_control for r in rows}, "ReBBR's algorithms"
        # Under bursty loss the mean loss rates are the grid's (the bursts are the experiment's own).
        rates = ([g.mean_loss_percent for g in exp.gilbert_elliott] if exp.gilbert_elliott is not None
                 else exp.loss_percent)
        if preset in SUBSET or chosen(preset, exp.name, "loss_percent"):
            assert set(rates or []) < set(losses), "a subset of ReBBR's loss rates"
        else:
            assert rates == losses, "ReBBR's 13 loss rates, in order"
        assert exp.loss_direction == "uplink"  # mm-loss uplink: the data direction
        assert exp.rtt_ms == sorted({float(r.rtt_ms) for r in rows})
        if SETS[grid].trace_uplink:
            assert [t.uplink for t in exp.trace or []] == [SETS[grid].trace_uplink]
        else:
            assert exp.bandwidth_mbps == sorted({r.specified_bw_Mbps for r in rows})
        assert exp.message_bytes == printed("rebbr-message-bytes")
        done |= {"cc", "loss_percent", "rtt_ms", "bandwidth_mbps", "trace", "message_bytes"}
        if not chosen(preset, exp.name, "duration_s"):
            assert exp.duration_s == printed(REBBR_SECONDS[grid]), PRINTED[REBBR_SECONDS[grid]][1]
            done.add("duration_s")
        if not chosen(preset, exp.name, "repetitions"):
            assert exp.repetitions == printed("rebbr-runs")
            done.add("repetitions")
        queues = [(q.kind, q.bdp, q.min_bytes) for q in exp.queue]
        if preset == "rebbr-queue":
            assert queues == [("infinite", None, 0), printed("rebbr-old-queue")]
            done.add("queue")
        elif not chosen(preset, exp.name, "queue"):
            assert queues == [(printed("rebbr-queue"), None, 0)]
            done.add("queue")
        default = "linux-default" in exp.name
        assert buffers_of(exp) == printed("linux-default-buffers" if default else "rebbr-buffers")
        done.add("buffers")
    elif preset == "shallow-buffers":
        numbers = sources.shallow_numbers()
        rate = 80.0
        bdp_bytes = rate * 1e6 / 8 * 0.025
        bdps = [q.bdp for q in exp.queue]
        assert exp.rtt_ms == printed("shallow-rtt")
        if exp.name == "shallow-mix":
            assert exp.bandwidth_mbps == [rate] and set(exp.bandwidth_mbps) < set(printed("shallow-rates"))
            assert flows_of(exp) == printed("shallow-mix")
            assert printed("shallow-mix-queue-bytes-80") / bdp_bytes in bdps  # the study's 0.5 BDP
            assert set(printed("shallow-cyclic-bdp")) <= set(bdps)
            assert numbers["mix_cubic_dominates_at"] in bdps and numbers["edge"] in bdps
            assert exp.duration_s >= printed("shallow-mix-trace-s")
        else:
            assert exp.bandwidth_mbps == printed("shallow-rates")
            assert flows_of(exp) == printed("shallow-flows" if exp.name == "shallow-bbr" else "shallow-cubic-flows")
            assert printed("shallow-queue-bytes-80") / bdp_bytes in bdps  # the study's 200,000 B: 0.8 BDP
            assert numbers["edge"] in bdps
        assert all(q.kind == "droptail" for q in exp.queue)
        done |= {"rtt_ms", "bandwidth_mbps", "cc", "flows"}
    elif preset == "loss-table":
        assert exp.loss_percent == printed("te-losses")
        assert exp.cc == printed("te-cc")
        table = sources.thousandeyes()
        assert sorted({r.loss_percent for r in table}) == exp.loss_percent
        assert {r.topology for r in table} == {p.label for p in exp.reverse or []}
        (rate,) = exp.bandwidth_mbps or []
        assert max(r.mean for r in table) < printed("te-peak-sample") <= rate  # "near 1 Gbit/s": ours
        assert exp.message_bytes == printed("te-iperf3-write")
        done |= {"loss_percent", "cc", "bandwidth_mbps", "message_bytes"}
    elif preset == "step-response":
        assert [s.factor for s in exp.rate_schedule] == printed("paper-step")
        done.add("rate_schedule")
    return done


#: The settings that carry a source's number wherever a preset claims a source.
FIELDS = ("cc", "loss_percent", "rtt_ms", "bandwidth_mbps", "queue", "duration_s", "buffers", "repetitions",
          "message_bytes")


@pytest.mark.parametrize(("preset", "exp"), experiments(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_setting_is_the_sources_or_said_to_be_ccsweeps(preset: str, exp: Experiment):
    done = held(preset, exp)
    loose = [f for f in FIELDS if f not in done and not chosen(preset, exp.name, f)]
    assert not loose, f"{preset}/{exp.name}: {loose} neither held to a source (PRINTED) nor listed in CHOSEN"


def test_the_reproducing_presets_run_the_full_grid_of_reBBRs_data():
    """ReBBR's 390 cells are its five CSVs' rows: one cell per row, ReBBR's own one run each."""
    rows = sum(len(load(SETS[name])) for name in ("rebbr-figure8", "rebbr-bandwidth", "rebbr-algorithms",
                                                  "rebbr-rtt", "rebbr-cellular"))
    assert rows == len(expand(load_spec("full-sweep"))) == 390


#: Numbers in a preset's description and titles that are not its own settings: each with its source, or
#: what ccsweep measured (the quick preset's description quotes a run).
TEXT: dict[str, dict[str, str]] = {
    "figure8": {"2016": "BBR paper, ACM Queue 2016", "8": "the paper's Figure 8 (ACM Queue)",
                "10": "its Figure 10 in the CACM reprint"},
    "figure8-seeds": {"8": "Figure 8", "5": "above 5 % loss (the rates held)", "0": "run 0",
                      "9": "runs 1-9 added"},
    "full-sweep": {"8": "Figure 8", "390": "cells (test above)", "8.5": f"{SLIDES}: about 8.5 hours",
                   "26": "the shared cells (tests/unit/test_figures_presets.py)"},
    "quick": {"8": "Figure 8", "4.11.1": f"{SLIDES}: Linux kernel v4.11.1", "6.18": "this machine's kernel",
              "88": "measured here (steady state, 1 %)", "67": "measured here (5 %)",
              "85": "ReBBR's figure8.csv: BBR 85.37 at 1 %", "77": "ReBBR's figure8.csv: BBR 76.89 at 5 %",
              "60": "ReBBR's 60 s (PRINTED)"},
    "rebbr-buffers": {"6": "Figure 6 is the RTT experiment (the rebbr-rtt-buffers preset)",
                      "80": "ReBBR: about 80 % of the link with Linux's defaults",
                      "6.25": f"{SLIDES}: 6.25 MB", "6,553,600": "ReBBR's buffers (PRINTED)",
                      "8": "Figure 8"},
    "rebbr-pacing": {"4.11.1": f"{SLIDES}: Linux kernel v4.11.1", "45": "ReBBR: BBR holds to about 45 % loss",
                     "20": "the BBR paper's Figure 8 and this kernel fall at 20 %",
                     "4.13": "Linux 4.13 added TCP's internal pacing (\"tcp: internal implementation for "
                             "pacing\"; docs/runner.md, BPF congestion controls)",
                     "8": "the BBR paper's Figure 8"},
    "rebbr-queue": {"15": "the 15 KB floor (PRINTED)", "8": "Figure 8"},
    "rebbr-rtt-buffers": {"6": "ReBBR's Figure 6, its RTT experiment", "6.25": f"{SLIDES}: 6.25 MB",
                          "80": "ReBBR: about 80 % of the link with Linux's defaults"},
    "loss-table": {"868": f"{THOUSANDEYES}: BBR's symmetric baseline 868.50 (Table 1)",
                   "128": "iperf3's default write, 128 KiB (PRINTED te-iperf3-write)",
                   "25": "the asymmetric path's way out (50 ms RTT / 2)", "100": "25 + 75 ms"},
    "shallow-buffers": {"0.8": "the study's 200,000 B at 80 Mbit/s (PRINTED)", "200,000": "PRINTED",
                        "20": f"{SHALLOW}: shares alternate with a 20 s period"},
    "step-response": {"2": "the BBR paper: within about 2 s"},
}


def settings_numbers(preset: str) -> set[float]:
    """Every number a preset's settings hold, with the count of its loss rates and its cells."""
    values: set[float] = set()
    for exp in load_spec(preset).experiments:
        values |= set(exp.loss_percent or []) | set(exp.rtt_ms) | set(exp.bandwidth_mbps or [])
        values |= {exp.duration_s, float(len(exp.loss_percent or [])), float(exp.flows)}
        values |= {q.bdp for q in exp.queue if q.bdp is not None} | {float(g.count) for m in exp.mixes or [] for g in m}
        values |= {float(r.delay_ms) for r in exp.reverse or [] if r.delay_ms is not None}
        values |= {s.at_s for s in exp.rate_schedule} | {(exp.bandwidth_mbps or [0])[0] * s.factor
                                                          for s in exp.rate_schedule}
        values |= {float(exp.repetitions)} if isinstance(exp.repetitions, int) else set()
        values |= {v for g in exp.gilbert_elliott or [] for v in (g.mean_loss_percent, g.mean_burst_packets)
                   if v is not None}
        values |= {p.rate_mbps for p in exp.policer or []}
        values |= {v for s in (exp.delay_schedule.steps if exp.delay_schedule else []) for v in (s.at_s, s.delay_ms)}
    return values


#: A number in a label, and the rate unit after it if any (a rate in Gbit/s or kbit/s is compared in Mbit/s).
NUMBER = re.compile(r"(\d[\d,.]*\d|\d)(?:\s*([Gk])bit/s)?")
SCALE = {"G": 1000.0, "k": 0.001, "": 1.0}


def loose_numbers(text: str, settings: set[float], listed: dict[str, str]) -> list[str]:
    """The numbers in a label that are neither a setting (in its unit) nor listed with their source."""
    return [number for number, unit in NUMBER.findall(text)
            if number not in listed and float(number.replace(",", "")) * SCALE[unit] not in settings]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_number_in_a_presets_labels_is_a_setting_or_has_its_source(preset: str):
    spec = load_spec(preset)
    text = " ".join([spec.description, *(e.title for e in spec.experiments)])
    loose = loose_numbers(text, settings_numbers(preset), TEXT.get(preset, {}))
    assert not loose, f"{preset}: numbers {loose} in its labels are neither its settings nor listed in TEXT"
    stale = [n for n in TEXT.get(preset, {}) if n not in [number for number, _ in NUMBER.findall(text)]]
    assert not stale, f"{preset}: TEXT lists {stale}, which its labels no longer print"


def test_every_printed_number_is_held_somewhere():
    """No entry of PRINTED sits unused: each key is read by the checks above."""
    module = Path(__file__).read_text()
    unused = [key for key in PRINTED if module.count(f'"{key}"') < 2 and key not in REBBR_SECONDS.values()]
    assert not unused


def test_a_number_no_source_printed_is_caught():
    """The checks above can fail: a ReBBR grid off by one RTT, a title with a number of nowhere."""
    exp = load_spec("rtt").experiments[0].model_copy(update={"rtt_ms": [2.0, 10.0, 100.0, 200.0, 400.0]})
    with pytest.raises(AssertionError):
        held("rtt", exp)
    assert loose_numbers("100 Mbit/s, 100 ms RTT (BBR paper Figure 9)", settings_numbers("figure8"), {}) == ["9"]
    # A rate is compared in its unit: 1 Gbit/s is loss-table's 1000 Mbit/s, not its 1 % loss; 2 Gbit/s is nowhere.
    table = settings_numbers("loss-table")
    assert loose_numbers("1 Gbit/s", table, {}) == [] and loose_numbers("2 Gbit/s", table, {}) == ["2"]
