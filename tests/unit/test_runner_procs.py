"""A cell's children (emulator, receiver, sender): no store key in their environment, and one rule for their end."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from ccsweep.runner.procs import Child, ChildError, ChildTimeout, child_environment

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


def _done_then_exit(code: int, extra: str = "") -> list[str]:
    """A real child printing samples, then (or not) `done`, then exiting with `code`."""
    script = ("import json, sys\n"
              "for i in range(5): print(json.dumps({'event': 'sample', 't': i}), flush=True)\n"
              f"{extra}\n"
              f"sys.exit({code})\n")
    return [sys.executable, "-c", script]


def test_a_child_that_exited_0_after_done_is_finished_however_late_its_reader_sees_it(tmp_path: Path):
    """The reader is slowed for real (its callback sleeps on every line): it sees `done` a few
    seconds after the child exited, far later than any fixed guess would wait."""
    child = Child("sender", _done_then_exit(0, "print(json.dumps({'event': 'done'}), flush=True)"),
                  tmp_path / "stderr", on_event=lambda event: time.sleep(0.5))
    try:
        child.process.wait(10)
        assert not child.of_kind("done"), "the reader must still be behind when the verdict is asked for"
        assert child.has_ended() is True
        assert [w.what for w in child.waits] == ["output end"] and child.waits[0].seconds > 1.0
    finally:
        child.stop()


def test_a_child_that_exited_without_its_end_event_fails_with_its_exit_status_and_last_lines(tmp_path: Path):
    child = Child("receiver", _done_then_exit(0, "print('no route to the sender', file=sys.stderr)"),
                  tmp_path / "stderr")
    try:
        child.process.wait(10)
        with pytest.raises(ChildError) as raised:
            child.has_ended()
    finally:
        child.stop()
    text = str(raised.value)
    assert not isinstance(raised.value, ChildTimeout)
    assert text.startswith("receiver exited (0) without 'done': no route to the sender; last event "), text
    assert '"event":"sample","t":4' in text, text


def test_a_child_killed_by_a_signal_says_so(tmp_path: Path):
    child = Child("ccsweep-link", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "stderr",
                  end_event="summary")
    child.process.send_signal(signal.SIGKILL)
    child.process.wait(10)
    try:
        with pytest.raises(ChildError, match=r"^ccsweep-link was killed by signal 9 without 'summary': no stderr$"):
            child.has_ended()
    finally:
        child.stop()


def test_a_running_child_has_not_ended_and_an_output_held_open_is_a_timeout(tmp_path: Path):
    """A grandchild holding the pipe keeps the output open after the child exits: bounded, then ChildTimeout."""
    child = Child("sender", ["sh", "-c", "sleep 3 & echo '{\"event\": \"done\"}'; exit 0"], tmp_path / "stderr")
    try:
        child.process.wait(10)
        with pytest.raises(ChildTimeout, match=r"^sender exited \(0\), but its output did not end within 0.5 s$"):
            child.has_ended(timeout=0.5)
    finally:
        child.stop()
    sleeper = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "stderr2")
    try:
        assert sleeper.has_ended() is False
        with pytest.raises(ChildTimeout, match=r"^sleeper: no 'ready' within 0.2 s$"):
            sleeper.wait_event("ready", 0.2)
        assert [(w.child, w.what) for w in sleeper.waits] == [("sleeper", "ready")]
        assert sleeper.waits[0].seconds >= 0.2
    finally:
        sleeper.stop()


def test_a_child_signalled_while_it_starts_is_listed_and_stopped(tmp_path: Path):
    """SIGTERM (as the runner takes it: an interrupt) arriving once the process exists but before
    CellRun.start returned used to leave it unlisted, in its own session, running on. A real
    SIGTERM, sent from inside the start at that moment: the child is listed, then the interrupt."""
    from ccsweep.expand import expand
    from ccsweep.result import Environment
    from ccsweep.runner.attempt import CellRun
    from ccsweep.specload import parse_spec

    (cell,) = expand(parse_spec({"name": "s", "experiments": [
        {"name": "s", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [10], "duration_s": 3}]}))
    run = CellRun(cell, tmp_path, Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0",
                                              python="3"), "now", 1, 1000.0)

    def signalled_once_started(*args, **kwargs) -> Child:
        child = Child(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)
        return child

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            run.start(signalled_once_started, "sleeper", [sys.executable, "-c", "import time; time.sleep(10)"],
                      tmp_path / "stderr")
    finally:
        signal.signal(signal.SIGTERM, previous)
        run.stop_all()
    assert len(run.started) == 1, "the child was left unlisted, running"
    assert run.started[0].process.returncode == -signal.SIGTERM
