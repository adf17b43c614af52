"""Rattan (stack-rs/rattan, Apache-2.0) as the peer bench runs it: the pinned crates.io release built
into the tools cache when it is missing there, and the command line of its Mahimahi-compatible mode.

Nothing of Rattan is kept in the repository: `cargo install --locked` builds the release named by
RATTAN_VERSION in versions.env, with the lock file it was published with, into a staging folder
that replaces $CCSWEEP_CACHE/tools/rattan-<version>/ only once the build succeeded (as
hack/tools/lib.sh publishes the other tools), so a half build is never taken for a cached one.

`rattan link` runs its command in a fresh namespace (the left) behind a veth pair served over
AF_PACKET by its own process, the right end in the namespace Rattan was started in, with
$RATTAN_BASE the right end's address, as Mahimahi's $MAHIMAHI_BASE: uplink is inside to outside.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from support.versions import RATTAN_VERSION

#: A cold build on one core of a busy 2-core machine takes tens of minutes; more is a hang.
BUILD_TIMEOUT_S = 3600
#: Rattan's process name (its packet loop runs in threads of this one process).
PROCESS_NAMES = ("rattan",)


def install_root(version: str = RATTAN_VERSION) -> Path:
    cache = Path(os.environ.get("CCSWEEP_CACHE") or Path.home() / ".cache" / "ccsweep")
    return cache / "tools" / f"rattan-{version}"


def rattan_binary(log: Callable[[str], object] = print, version: str = RATTAN_VERSION) -> Path:
    """The pinned build, built first when the cache lacks it (nice 19: the machine is shared)."""
    root = install_root(version)
    binary = root / "bin" / "rattan"
    if binary.is_file():
        return binary
    staging = root.with_name(f"{root.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    log(f"building rattan {version} from crates.io into {root} (cargo install --locked; minutes)")
    with tempfile.TemporaryDirectory(prefix="ccsweep-rattan-build-") as target:
        subprocess.run(["nice", "-n", "19", "cargo", "install", "rattan", "--version", version, "--locked",
                        "--root", str(staging), "--target-dir", target], check=True, timeout=BUILD_TIMEOUT_S)
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return binary


def link_argv(binary: Path, rate_mbps: float, delay_ms: float, queue_bytes: int, inside: list[str]) -> list[str]:
    """`rattan link` with the same rate, one-way delay and drop-tail queue of `queue_bytes` on both
    directions, running `inside` in its left namespace."""
    queue = json.dumps({"byte_limit": queue_bytes})
    argv = [str(binary), "link"]
    for direction in ("uplink", "downlink"):
        argv += [f"--{direction}-bandwidth", f"{rate_mbps:g}Mbps", f"--{direction}-delay", f"{delay_ms:g}ms",
                 f"--{direction}-queue", "droptail", f"--{direction}-queue-args", queue]
    return [*argv, "--", *inside]
