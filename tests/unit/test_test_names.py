"""Every test module has a name of its own across the tiers.

The tiers' folders are not packages, so pytest imports each module by its base name: two tiers with
a module of the same name stop the whole run at collection ("import file mismatch"), which a run of
one tier alone never shows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_base_name():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
