"""Fixtures for the services tests: real MinIO, Pushgateway and Prometheus, always stopped.

Servers shared by the session are started once; tests that take a server away (outages) start
their own.  Every test works in a bucket or prefix of its own, so the order of tests is free.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers import Server, minio_server, prometheus_server, pushgateway_server, s3_env

_names = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.services)


@pytest.fixture(scope="session")
def services_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("services")


def _serve(server: Server) -> Iterator[Server]:
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def minio(services_root: Path) -> Iterator[Server]:
    yield from _serve(minio_server(services_root / "shared"))


@pytest.fixture
def own_minio(tmp_path: Path) -> Iterator[Server]:
    """A MinIO of this test's own, which the test may stop and start again (same port and data)."""
    yield from _serve(minio_server(tmp_path))


@pytest.fixture(scope="session")
def pushgateway(services_root: Path) -> Iterator[Server]:
    yield from _serve(pushgateway_server(services_root))


@pytest.fixture
def own_pushgateway(tmp_path: Path) -> Iterator[Server]:
    yield from _serve(pushgateway_server(tmp_path))


@pytest.fixture(scope="session")
def prometheus(services_root: Path, pushgateway: Server) -> Iterator[Server]:
    yield from _serve(prometheus_server(services_root, pushgateway))


@pytest.fixture
def s3(minio: Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The shared MinIO's settings in this process's environment (and returned for subprocesses)."""
    env = s3_env(minio)
    for name in [n for n in os.environ if n.startswith(("CCSWEEP_S3_", "AWS_"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def bucket_url(request: pytest.FixtureRequest) -> str:
    """A fresh s3:// URL for this test: its own prefix in a bucket created on first write."""
    return f"s3://ccsweep-tests/{request.node.name.replace('[', '-').rstrip(']')}-{next(_names)}"
