"""Test tiers: what each test needs, as markers (listed in pyproject.toml), so a run can pick a tier.

`make test-unit` runs the tests that need none of root, tools, services or a cluster: no network,
no root, no tool built but the BPF objects (`make bpf`), whose digests are part of the ids of the cells
that name them. A test says what it exercises (integration, services, e2e) or uses a fixture
that needs something; the markers for what that needs follow here, so no test has to repeat them.
Helpers tests share with the benchmarks are in the `support` package at the repository root (pyproject.toml
puts the root on sys.path): tests import `support.versions`, `support.clusterlib`, ...
"""

from __future__ import annotations

import pytest

from ccsweep.linkdesc import LINKS, FixedTickCost, Inexpressible, LinkDescriptor, PodPrivileges, VersionProbe

#: Markers implied by a marker a test carries: what that kind of test needs.
NEEDS_OF_MARKER = {
    "integration": ("root",),
    "e2e": ("root", "tools"),
    "services": ("tools",),  # bin/minio from hack/tools/minio.sh
    "packaging": ("tools",),  # the wheel's build backend from PyPI
    "image": ("root", "tools"),  # buildah (hack/tools/apt.sh), Debian's packages, PyPI and crates.io
}
#: Markers implied by a fixture a test uses.
NEEDS_OF_FIXTURE = {
    "envtest": ("envtest", "tools"),  # bin/kube-apiserver, etcd, Argo's CRDs (tests/operator/conftest.py)
    "argo": ("tools",),  # bin/argo (tests/workflows) or the cluster's Argo (tests/e2e)
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Add the implied markers. pytest calls this after the folders' conftests (registered later)
    have marked their tests, and before `-m` deselects."""
    for item in items:
        needs = [need for marker, implied in NEEDS_OF_MARKER.items() if item.get_closest_marker(marker)
                 for need in implied]
        needs += [need for fixture, implied in NEEDS_OF_FIXTURE.items()
                  if fixture in getattr(item, "fixturenames", ()) for need in implied]
        for need in dict.fromkeys(needs):
            if not item.get_closest_marker(need):
                item.add_marker(need)


@pytest.fixture
def extra_link(monkeypatch: pytest.MonkeyPatch) -> LinkDescriptor:
    """A test-only link backend, registered beside the real ones for one test: the one place a new
    link is described (linkdesc.LINKS), from which planning, admission, the Argo fan-out and the
    figures must all take it. It runs packet by packet, cannot police, and wakes on a 500 us tick."""
    link = LinkDescriptor(
        name="test-link", title="Test link", offloads=("none",), offload_limit="moves one packet at a time",
        cannot=Inexpressible(policer="the test link has no token bucket"),
        cost=FixedTickCost(tick_us=500.0, cores_per_100mbit=0.5), pod_template="cell-test-link",
        privileges=PodPrivileges(capabilities=("NET_ADMIN", "SYS_ADMIN"), allow_privilege_escalation=False),
        version=VersionProbe(kind="summary-field", key="version"))
    monkeypatch.setitem(LINKS, link.name, link)
    return link


@pytest.fixture
def link_binary_stand_in(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """An executable file as $CCSWEEP_LINK, for executor tests in which no link starts (no cell fits
    the budget, or each finds its result stored): the executor's host check looks for the file, not
    into it, so the unit tier runs before the emulator is built."""
    stand_in = tmp_path_factory.mktemp("link") / "ccsweep-link"
    stand_in.write_text("#!/bin/sh\nexit 0\n")
    stand_in.chmod(0o755)
    monkeypatch.setenv("CCSWEEP_LINK", str(stand_in))
