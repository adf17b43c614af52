"""versions.env is the one home of the pinned releases: scripts, Make and tests read the same values."""

import os
import subprocess
from pathlib import Path

import yaml

from ccsweep import __version__
from support.versions import VERSIONS_FILE, read_versions

REPO = VERSIONS_FILE.parent


def shell_versions(env: dict[str, str] | None = None) -> dict[str, str]:
    """What a script sees after sourcing hack/versions.sh."""
    names = " ".join(f'"${name}"' for name in read_versions())
    done = subprocess.run(["bash", "-c", f"set -eu; source hack/versions.sh; printf '%s\\n' {names}"], cwd=REPO,
                          capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"], **(env or {})})
    return dict(zip(read_versions(), done.stdout.splitlines(), strict=True))


def test_scripts_and_tests_read_the_same_versions():
    pinned = read_versions()
    go_modules = ("ARGO_WORKFLOWS_VERSION", "KUBERNETES_VERSION", "HELM_VERSION", "MINIO_VERSION")
    assert all(pinned[name].startswith("v") for name in go_modules), pinned  # as the Go module proxy names them
    assert shell_versions() == pinned


def test_a_version_set_in_the_environment_wins_in_scripts():
    assert shell_versions({"KUBERNETES_VERSION": "v1.34.1"})["KUBERNETES_VERSION"] == "v1.34.1"


def test_make_reads_the_same_file():
    done = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "show"], cwd=REPO,
                          input="show:\n\t@echo $(KUBERNETES_VERSION) $(ARGO_WORKFLOWS_VERSION)\n",
                          capture_output=True, text=True, check=True)
    pinned = read_versions()
    assert done.stdout.split() == [pinned["KUBERNETES_VERSION"], pinned["ARGO_WORKFLOWS_VERSION"]]


def test_the_chart_carries_the_package_version():
    chart = yaml.safe_load((REPO / "charts/ccsweep/Chart.yaml").read_text())
    assert chart["appVersion"] == __version__  # the cell image tag the chart runs
    assert chart["version"] == __version__  # chart and package are released together


def test_no_other_file_writes_a_pinned_release():
    """A release number written twice is the start of two numbers that disagree."""
    pinned = read_versions()
    numbers = {pinned["ARGO_WORKFLOWS_VERSION"].removeprefix("v"), pinned["KUBERNETES_VERSION"].removeprefix("v")}
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    found = []
    for name in listed:
        path = REPO / name
        if name == VERSIONS_FILE.name or not path.is_file():
            continue
        text = path.read_bytes().decode(errors="replace")
        found += [f"{name}: {n}" for n in numbers if n in text]
    assert not found, found


def test_versions_file_has_only_settings_and_comments():
    for line in Path(VERSIONS_FILE).read_text().splitlines():
        assert not line or line.startswith("# ") or line == "#" or "=" in line and " " not in line, line
