"""ccsweep-link and upstream Mahimahi give the same goodput on the same cells (issue 13's cross-check).

The grid and the rule are those of `make bench-crosscheck` (tests/integration/crosscheck.py): BBR
and CUBIC at 0, 1 and 5 % loss, 100 Mbit/s, 100 ms, infinite queue, and over the Verizon LTE
traces; BBR within 5 %, CUBIC within 25 % or 1 Mbit/s, on means of 3 runs of 30 s: the bench
(24 min of flows) holds that rule, and agreed on all 8 cells (benchmarks/results/2026-11-23-
crosscheck.md). This test runs each cell once (CCSWEEP_CROSSCHECK_SECONDS and _REPETITIONS
change that) at 0 and 1 % loss: 12 cells of 30 s, the two links of a cell side by side (under the
same load at the same moment), about 3 minutes; one cell at a time took 6. One pair of single
runs scatters more than a mean of 3: the bench measured a single 30 s BBR run's standard deviation at up to 2.5 Mbit/s
(3 % of 84 Mbit/s, Mahimahi at 1 % loss), so the difference of one pair has about 3 %, its
worst pair was 6 %, and a 5 % margin would fail about one cell in ten on noise alone. BBR's
margin here is 10 % (over 3 standard deviations; a link that differs by that much, as one with
the wrong loss position or rate would, still fails). Shorter flows do not fit that margin: with
20 s flows one ccsweep-link run of BBR at 5 % loss gave 50.4 Mbit/s against Mahimahi's 60.3
(its 30 s runs: 62.5 to 65.6), start-up weighing more.
Without loss both links give CUBIC the line rate within 1 %, and the bench's rule
(25 % or 1 Mbit/s) holds it. Under loss one run of CUBIC is the noisiest number here:
at 1 % loss a 30 s flow lives on about 35 loss events, and CI once measured one Mahimahi run at
2.54 Mbit/s against ccsweep-link's 1.41 (the Mathis et al. estimate, MSS/RTT x 1.22/sqrt(p), is
1.41); ten more runs here (5 per link, same cell) gave 1.23-1.54 and 1.23-1.66, means 1.37 and
1.44. So under loss a single pair also agrees within a factor of 2. By the same estimate goodput
goes as 1/sqrt(p): a factor of 2 is a factor of 4 in the loss rate the flow met, and a link that
drops nothing (60 x), drops on the wrong direction (CUBIC at the line rate), or takes a percentage
for a fraction still fails. It also holds a Mahimahi cell's record to what a ccsweep-link one carries.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccsweep.result import CellResult
from support.crosscheck import Comparison, compare, grid, pair_key, run_grid
from support.mahimahi_host import mahimahi_host, mahimahi_missing

SECONDS = float(os.environ.get("CCSWEEP_CROSSCHECK_SECONDS", "30"))
REPETITIONS = int(os.environ.get("CCSWEEP_CROSSCHECK_REPETITIONS", "1"))
#: BBR's margin for this test's single short runs (the bench holds the issue's 5 % on means of 3).
BBR_RELATIVE_SINGLE_RUN = 0.10
#: CUBIC's margin under loss for single runs (the bench holds 25 % or 1 Mbit/s on means of 3).
CUBIC_LOSSY_FACTOR_SINGLE_RUN = 2.0
#: The loss rates compared on single runs. At 5 % loss one BBR run scatters too much for any single
#: pair to say which link is off: alone on this VM its goodput spread 48-63 Mbit/s over 3 runs
#: (benchmarks/results/2026-11-23-density.md), and single pairs here differed by 14 % and 38 %
#: under load; the bench (means of 3) keeps 5 % in the grid and agreed within 0.7 %.
SINGLE_RUN_LOSS_PERCENT = [0.0, 1.0]
#: A pair that disagrees on single runs is run until each link has this many runs, and their medians
#: decide, by the same margins. One run's start-up can end early on random loss (BBR leaves start-up
#: after three rounds without 25 % more delivery rate, and 1 % loss can fake that): the cold
#: `make test` of 2026-12-01 had Mahimahi's BBR at 1 % take 10 s to reach the link (4, 14, 22, 25,
#: 27, 34, 43, 57, 75, 88 Mbit/s in its first seconds, its link's delivery opportunities never over
#: 1 ms apart) against ccsweep-link's 2 s, 71.3 against 83.8 Mbit/s of steady goodput. Either link
#: can draw that; a link that is off on every run still fails on the medians.
RUNS_ON_DISAGREEMENT = 3
MISSING = mahimahi_missing()

pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"Mahimahi is not built ({MISSING})")


def comparisons_of(results: list[CellResult]) -> list[Comparison]:
    return compare(results, bbr_relative=BBR_RELATIVE_SINGLE_RUN, cubic_lossy_factor=CUBIC_LOSSY_FACTOR_SINGLE_RUN,
                   summary="median")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[CellResult]:
    """The grid's runs, and more of each pair that disagreed on them (RUNS_ON_DISAGREEMENT)."""
    workdir = Path(tmp_path_factory.mktemp("crosscheck"))
    with mahimahi_host():
        first = run_grid(grid(SECONDS, REPETITIONS, SINGLE_RUN_LOSS_PERCENT), workdir, pairs_side_by_side=True)
        disagreeing = {comparison.key for comparison in comparisons_of(first) if not comparison.agrees}
        more = [cell for cell in grid(SECONDS, max(REPETITIONS, RUNS_ON_DISAGREEMENT), SINGLE_RUN_LOSS_PERCENT)
                if pair_key(cell) in disagreeing and cell.params.repetition >= REPETITIONS]
        return first + run_grid(more, workdir, pairs_side_by_side=True)


def test_both_links_give_the_same_goodput(results: list[CellResult]):
    comparisons = comparisons_of(results)
    print("\n".join(c.line() for c in comparisons))  # shown with -rP, and when an assertion fails
    assert len(comparisons) == 6
    disagree = [c.line() for c in comparisons if not c.agrees]
    assert not disagree, "\n".join(disagree)


def test_a_mahimahi_record_carries_what_a_ccsweep_link_record_does(results: list[CellResult]):
    mahimahi = [r for r in results if r.cell.params.link == "mahimahi"]
    assert mahimahi
    for r in mahimahi:
        assert r.link is not None and r.link.backend == "mahimahi" and r.link.version.startswith("mahimahi-")
        check = r.link.selfcheck
        # Its timing, measured from outside (the shells' run-queue delay): a verdict either way, never unmeasured.
        assert check.lateness_from == "run-queue" and check.lateness_p99_us is not None
        assert check.late is (check.lateness_p99_us > check.threshold_us) and "lateness" not in r.link.not_measured
        assert check.cpu_share is not None and 0 < check.cpu_share < 2
        assert r.link.uplink.out_bytes > 0 and r.link.uplink.capacity_bytes > 0
        flow = r.flows[0]
        assert flow.min_rtt_ms is not None and flow.min_rtt_ms >= 100  # mm-delay's 50 ms each way
        assert flow.throughput_per_s_mbps and r.bottleneck_throughput_mbps
        # The sender's own namespace got the cell's socket buffers, not the host's.
        assert r.environment.tcp_wmem == list(r.cell.params.buffers.tcp_wmem)
        if r.cell.params.uplink.rate_mbps == 100:
            # 100 Mbit/s as opportunities of 1504 bytes: Mahimahi's 100.27 Mbit/s.
            assert r.capacity_mbps == pytest.approx(100 * 1504 / 1500, rel=0.005)
