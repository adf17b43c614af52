"""The pinned releases of versions.env (the repo root) for tests and benches: the file the scripts and Make read.

One parser, with the rules hack/versions.sh follows: `KEY=VALUE` lines with an upper-case key;
comments and blank lines are skipped. Tests and benches import the names
(`from support.versions import ...`), never a number of their own.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

VERSIONS_FILE = Path(__file__).resolve().parents[1] / "versions.env"
_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Every KEY=VALUE of the file, in order."""
    found = (_LINE.match(line) for line in path.read_text().splitlines())
    return {m[1]: m[2] for m in found if m}


_VERSIONS = read_versions()
ARGO_WORKFLOWS_VERSION = _VERSIONS["ARGO_WORKFLOWS_VERSION"]
KUBERNETES_VERSION = _VERSIONS["KUBERNETES_VERSION"]
RATTAN_VERSION = _VERSIONS["RATTAN_VERSION"]
ARGO_MODULE = "github.com/argoproj/argo-workflows/v3"


def argo_module_dir() -> Path:
    """The pinned Argo release's module source (its CRDs and JSON schema), from Go's module cache;
    `go mod download` fetches it there on first use, so tests calling this are marked `tools`."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{ARGO_MODULE}@{ARGO_WORKFLOWS_VERSION}"],
                         capture_output=True, text=True, timeout=600, check=True)
    return Path(json.loads(out.stdout)["Dir"])
