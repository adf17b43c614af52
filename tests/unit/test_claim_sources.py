"""A failed reference check says what its source measured, and on which kernel.

Without it a reader of the quick look sees "BBR ... fail 1 / 4" and cannot tell a kernel that
behaves otherwise from a claim the source's own numbers miss. The ReBBR numbers quoted are read
back here from the pinned CSVs the figures draw, so a typo in the text fails.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from ccsweep.checks.claims import CLAIMS, CheckRow, Verdict
from ccsweep.figures.report import render_report
from ccsweep.results.data import load_sweep
from ccsweep.results.published_sets import SETS, load
from ccsweep.results.quantities import payload_ideal_mbps
from ccsweep.store.file import FileStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLAIM = {c.id: c for c in CLAIMS}


def published(name: str, cc: str, loss: float, rtt_ms: float = 100) -> float:
    (row,) = [r for r in load(SETS[name]) if r.congestion_control == cc and r.loss_rate == loss and r.rtt_ms == rtt_ms]
    return row.goodput_Mbps


def numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])", text.replace("4.11.1", ""))]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_says_what_its_source_measured_and_on_which_kernel(claim):
    assert claim.measured
    assert re.search(r"kernel|Linux \d|model", claim.measured)


def test_the_rebbr_numbers_quoted_are_those_of_its_published_files():
    ideal = numbers(CLAIM["bbr-ideal"].measured)
    assert ideal[ideal.index(60) + 1:] == [
        published("rebbr-figure8", "bbr", 0.001), 0.1, published("rebbr-figure8", "bbr", 0.01), 1,
        published("rebbr-figure8", "bbr", 0.02), 2, published("rebbr-figure8", "bbr", 0.05), 5,
        *[round(0.9 * payload_ideal_mbps(100, p), 1) for p in (0.01, 0.02, 0.05)], 1]
    cubic_0, cubic_01 = published("rebbr-figure8", "cubic", 1e-05), published("rebbr-figure8", "cubic", 0.001)
    assert numbers(CLAIM["cubic-tenfold"].measured)[-5:] == [cubic_0, 0.001, cubic_01, 0.1,
                                                             round(cubic_0 / cubic_01, 1)]
    cubic, bbr = published("rebbr-rtt", "cubic", 0.01, 2), published("rebbr-rtt", "bbr", 0.01, 2)
    assert numbers(CLAIM["rebbr-short-rtt"].measured)[-3:] == [cubic, bbr, round(cubic / bbr, 2)]


def test_the_report_shows_it_beside_failed_checks_only(tmp_path: Path):
    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "goodput-vs-loss", root)
    (sweep,) = [p.name for p in (root / "sweeps").iterdir()]
    data = load_sweep(FileStore(root), sweep)
    rows = [CheckRow(CLAIM["bbr-ideal"], "e", [Verdict("bbr at 5 %", False, "70 Mbit/s vs bound 85.5")]),
            CheckRow(CLAIM["mathis"], "e", [Verdict("cubic at 1 %", True, "1.4 Mbit/s vs model 1.41")])]
    report = html.unescape(render_report(data, [], rows, outputs=[]))
    shown = re.findall(r"What the source\s+measured: ([^<]*)<", report)
    assert [" ".join(s.split()) for s in shown] == [" ".join(CLAIM["bbr-ideal"].measured.split())]
