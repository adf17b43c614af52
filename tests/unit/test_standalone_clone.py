"""A clone stands alone: no tracked file names a folder beside the clone, and the Mahimahi source every
build reads is the one vendored in third_party/mahimahi/, unmodified.

A user clones the repository into an empty folder; a path into a sibling folder or a lock file under
/tmp describes the authors' machine, which such a user cannot reproduce. The patterns are built
from parts so that this file does not match itself.
"""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
from pathlib import Path

from support.versions import read_versions

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / "third_party/mahimahi"
#: The SHA-256 of the vendored upstream tarball, as its README states; changing the tarball is a
#: deliberate act that updates both.
MAHIMAHI_SHA256 = "bfe2db58917f604200eb73550ea8e164feec78892025cd8dae0cc622eea70591"

#: What names a folder beside the clone, or a working arrangement on the authors' machine.
OUTSIDE_PATTERNS = {
    "a sibling folder": re.compile(re.escape(".." + "/shared")),
    "the authors' shared folder": re.compile(re.escape("/work" + "/shared")),
    "a lock file under /tmp": re.compile(r"/tmp/[\w.$/{}-]*\." + "lock\\b"),
}


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
    return [REPO / name for name in listed.stdout.decode().split("\0") if name]


def outside_references(text: str) -> list[str]:
    return [what for what, pattern in OUTSIDE_PATTERNS.items() if pattern.search(text)]


def test_the_patterns_catch_what_they_are_for():
    assert outside_references("tar -xzf " + ".." + "/shared/vendor/x.tar.gz") == ["a sibling folder"]
    assert outside_references("see /work" + "/shared/notes") == ["the authors' shared folder"]
    assert outside_references("flock /tmp/" + "team/bench.lock make bench") == ["a lock file under /tmp"]
    assert outside_references("flock /tmp/ccsweep-e2e" + ".lock pytest") == ["a lock file under /tmp"]
    assert outside_references("the store's lock and Cargo.lock, /tmp/x.log, shared memory") == []


def test_no_tracked_file_names_a_folder_beside_the_clone_or_a_lock_file_under_tmp():
    files = tracked_files()
    assert len(files) > 100 and REPO / "Makefile" in files
    found = []
    for path in files:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary: the vendored tarball, images
            continue
        found += [f"{path.relative_to(REPO)}: {what}" for what in outside_references(data.decode(errors="replace"))]
    assert not found, "\n".join(found)


def test_the_vendored_mahimahi_is_the_pinned_commit_unmodified():
    commit = read_versions()["MAHIMAHI_COMMIT"]
    tarball = VENDOR / f"mahimahi-{commit}.tar.gz"
    data = tarball.read_bytes()
    assert hashlib.sha256(data).hexdigest() == MAHIMAHI_SHA256
    readme = (VENDOR / "README.md").read_text()
    assert MAHIMAHI_SHA256 in readme and f"`{commit}`" in readme
    assert sorted(p.name for p in VENDOR.iterdir()) == ["COPYING", "README.md", tarball.name]
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        # git archive records the commit it was made from in the pax header.
        assert archive.pax_headers.get("comment", "").startswith(commit)
        copying = archive.extractfile(f"mahimahi-{commit}/COPYING")
        assert copying is not None
        assert copying.read() == (VENDOR / "COPYING").read_bytes()
    assert "GNU GENERAL PUBLIC LICENSE\n                       Version 3" in (VENDOR / "COPYING").read_text()
