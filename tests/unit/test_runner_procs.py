"""A cell's children (emulator, receiver, sender) run without the store's keys in their environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ccsweep.runner.procs import Child, child_environment

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def test_store_settings_and_credentials_are_withheld_and_the_rest_kept():
    env = {"PATH": "/usr/bin", "HOME": "/root", "PYTHONPATH": "/src", "CCSWEEP_LINK": "/bin/ccsweep-link",
           "CCSWEEP_LINK_RT_PRIORITY": "50", "CCSWEEP_S3_SECRET_KEY": SECRET, "CCSWEEP_S3_ACCESS_KEY": "k",
           "CCSWEEP_S3_ENDPOINT": "http://minio:9000", "CCSWEEP_S3_CONFIG": "/etc/s3.yaml",
           "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": SECRET, "aws_access_key_id": "k",
           "GITHUB_TOKEN": SECRET, "DB_PASSWORD": SECRET, "MINIO_ROOT_SECRET": SECRET}
    assert child_environment(env) == {"PATH": "/usr/bin", "HOME": "/root", "PYTHONPATH": "/src",
                                      "CCSWEEP_LINK": "/bin/ccsweep-link", "CCSWEEP_LINK_RT_PRIORITY": "50"}


def test_a_started_child_has_no_key_in_its_proc_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The real process, as the kernel holds its environment: what any process of its user can read."""
    monkeypatch.setenv("CCSWEEP_S3_SECRET_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("CCSWEEP_LINK_RT_PRIORITY", "7")
    child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "stderr")
    try:
        environ = Path(f"/proc/{child.process.pid}/environ").read_bytes().split(b"\0")
    finally:
        child.stop()
    assert b"CCSWEEP_LINK_RT_PRIORITY=7" in environ  # the environment did reach it
    assert not [v for v in environ if SECRET.encode() in v or v.startswith((b"CCSWEEP_S3_", b"AWS_"))]
