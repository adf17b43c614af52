"""The root holds the licence pyproject.toml declares, and NOTICE names every vendored file kept
under another licence.

A user who takes ccsweep (or a wheel of it) needs the licence text beside it, and needs to know
which folders are not Apache-2.0: Mahimahi's source and traces are GPL-3.0, ReBBR's CSVs are
BSD-2-Clause. A licence file added under a new vendored folder without a NOTICE entry fails here.
"""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The SHA-256 of the Apache Software Foundation's LICENSE-2.0.txt, byte for byte.
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
#: Vendored content whose licence is stated in its folder's README rather than a licence file.
VENDORED_WITHOUT_LICENCE_FILE = ("src/ccsweep/traces/",)


def vendored_licence_files() -> list[str]:
    """Every tracked licence file below the root: each marks a folder vendored from elsewhere."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
    names = [name for name in listed.stdout.decode().split("\0") if "/" in name]
    return [name for name in names if Path(name).name in {"LICENSE", "COPYING", "LICENCE"}]


def test_root_licence_is_the_apache_2_text_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "Apache-2.0"
    assert hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256


def test_notice_names_every_vendored_licence() -> None:
    notice = (REPO / "NOTICE").read_text()
    licence_files = vendored_licence_files()
    assert len(licence_files) >= 3  # Mahimahi's COPYING, ReBBR's and the Prometheus Operator's LICENSE
    missing = [name for name in [*licence_files, *VENDORED_WITHOUT_LICENCE_FILE] if name not in notice]
    assert not missing, f"NOTICE does not name {missing}"
