"""`make release`'s output for this clone's HEAD, built once and shared by the tests that check it.

tests/release checks the files themselves (checksums, the wheel in a fresh venv, the SBOM, the
image archive); tests/e2e/test_release_chart.py installs the packaged chart on the test cluster.
Both read the same folder: it is built by hack/release.sh (what `make release` runs) into the cache,
named after HEAD's commit, and kept while its SHA256SUMS still verify, so a second module or run
reuses it. The build runs with --local-base: no registry is reachable here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ccsweep import __version__

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CCSWEEP_CACHE", Path.home() / ".cache" / "ccsweep"))
RELEASE_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Release:
    folder: Path
    commit: str

    @property
    def identity(self) -> str:
        return f"{__version__}-g{self.commit}"

    def one(self, pattern: str) -> Path:
        (found,) = self.folder.glob(pattern)
        return found

    @property
    def image_archive(self) -> Path:
        return self.one(f"ccsweep-cell-{self.identity}.oci.tar")

    @property
    def chart(self) -> Path:
        return self.one(f"ccsweep-{__version__}.tgz")

    def image_digest(self) -> str:
        """The manifest digest the OCI archive's index names (what the chart pins)."""
        with tarfile.open(self.image_archive) as archive:
            index = archive.extractfile("index.json")
            assert index is not None
            return json.load(index)["manifests"][0]["digest"]


def checksums_hold(folder: Path) -> bool:
    sums = folder / "SHA256SUMS"
    return sums.is_file() and subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=folder,
                                             capture_output=True, timeout=600).returncode == 0


def build_release() -> Release:
    """The release of HEAD, from the cache when a complete one is there."""
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    folder = CACHE / "release-test" / commit
    # One release is kept: an older commit's (a few hundred MB each) would only fill the disk.
    for older in (CACHE / "release-test").glob("*"):
        if older.name != commit:
            shutil.rmtree(older, ignore_errors=True)
    if not checksums_hold(folder):
        done = subprocess.run([str(REPO / "hack/release.sh"), str(folder), "--local-base"], cwd=REPO,
                              capture_output=True, text=True, timeout=RELEASE_TIMEOUT_S)
        assert done.returncode == 0, f"hack/release.sh failed:\n{done.stderr[-6000:]}"
    return Release(folder, commit)
