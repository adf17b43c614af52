"""Which build of ccsweep this is: the package version plus the git commit it was built from.

The version alone (ccsweep.version, the one place it is written) is the same for every commit
between two releases, so results, image tags and the chart's appVersion carry the commit as well.
Where the commit comes from:
- a build that left its source tree (the cell image, `make release`'s wheel and sdist) writes it
  into the package as the file COMMIT (images/cell/Dockerfile, hack/release.sh);
- a clone used in place (`make venv` installs it editable) asks git, marking uncommitted changes
  with `-dirty`;
- otherwise it is unknown (None), and the identity is the version alone.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

from ccsweep.version import __version__

PACKAGE = Path(__file__).resolve().parent
#: Written by builds outside a clone; never committed (.gitignore).
COMMIT_FILE = PACKAGE / "COMMIT"
#: An abbreviated commit id as `git rev-parse --short=12` prints it, possibly marked dirty.
COMMIT_PATTERN = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
GIT_TIMEOUT_S = 10


@functools.cache
def source_commit() -> str | None:
    """The commit this code was built from (12 hex digits, `-dirty` when the clone had uncommitted
    changes), or None when nothing says."""
    if COMMIT_FILE.is_file():
        stamped = COMMIT_FILE.read_text().strip()
        return stamped if COMMIT_PATTERN.fullmatch(stamped) else None
    return _clone_commit(PACKAGE.parents[1])


def _clone_commit(root: Path) -> str | None:
    """HEAD of the clone the package is used from in place (ROOT/src/ccsweep). Only a clone that
    holds this very package counts: a venv inside some other git work tree must not borrow its HEAD."""
    if not ((root / ".git").exists() and (root / "src" / "ccsweep") == PACKAGE):
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=GIT_TIMEOUT_S, check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    commit = f"{head}-dirty" if changes.strip() else head
    return commit if COMMIT_PATTERN.fullmatch(commit) else None


def build_identity() -> str:
    """VERSION-gCOMMIT (an OCI tag's characters: the image tag and the chart's appVersion use it),
    or VERSION alone when the commit is unknown."""
    commit = source_commit()
    return f"{__version__}-g{commit}" if commit else __version__


if __name__ == "__main__":  # images/build.sh and hack/release.sh: `python3 -m ccsweep.buildinfo [--commit]`
    import sys

    print(source_commit() or "" if sys.argv[1:] == ["--commit"] else build_identity())
