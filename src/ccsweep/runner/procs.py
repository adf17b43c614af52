"""Processes a cell starts (emulator, receiver, sender): JSON lines in, stopped by PID.

Each child runs in a session of its own, so a Ctrl-C in the terminal reaches only the runner,
which then stops its children in order (senders, receiver, emulator) and deletes the namespaces.
A thread reads each child's stdout: every line is a JSON event, time-stamped on arrival and
handed to an optional callback (the live metrics), and kept for the result.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Event = dict[str, Any]

#: Variables no child gets: the store's settings and keys (CCSWEEP_S3_*, the AWS_* names the
#: store also reads), and anything named like a credential. Only the runner's own process stores
#: results; the emulator and the flow endpoints never need a key, and a process's environment
#: stays readable in /proc/PID/environ by its user for as long as it runs.
WITHHELD_PREFIXES = ("CCSWEEP_S3_", "AWS_")
WITHHELD_WORDS = ("SECRET", "PASSWORD", "TOKEN", "ACCESS_KEY", "CREDENTIAL")


def child_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the variables a cell's children must not inherit (WITHHELD_*)."""
    return {name: value for name, value in env.items()
            if not name.upper().startswith(WITHHELD_PREFIXES) and not any(w in name.upper() for w in WITHHELD_WORDS)}


class ChildError(RuntimeError):
    """A child exited or complained before doing what the runner waited for."""


class Child:
    def __init__(self, name: str, argv: list[str], log: Path, on_event: Callable[[Event], None] | None = None):
        self.name = name
        self.events: list[Event] = []
        self._on_event = on_event
        self._changed = threading.Condition()
        self._log_path = log
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                            text=True, bufsize=1, start_new_session=True,
                                            env=child_environment(os.environ))
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "text", "text": line.rstrip()}
            event["_mono_ns"] = time.monotonic_ns()  # when the runner saw it
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
            if self._on_event is not None:
                self._on_event(event)
        with self._changed:
            self._changed.notify_all()

    def wait_event(self, kind: str, timeout: float) -> Event:
        """The first event of `kind`; ChildError with the child's own error if it fails first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((e for e in self.events if e.get("event") == kind), None)
                if found is not None:
                    return found
                error = self.error()
                if error is not None:
                    raise ChildError(error)
                if not self._reader.is_alive():
                    raise ChildError(f"{self.name} exited ({self.process.poll()}) before '{kind}': "
                                     f"{self.stderr_tail()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChildError(f"{self.name}: no '{kind}' within {timeout:g} s")
                self._changed.wait(remaining)

    def error(self) -> str | None:
        """The message of the child's first error event, if any."""
        event = next((e for e in self.events if e.get("event") == "error"), None)
        return None if event is None else str(event.get("message", event))

    def stderr_tail(self) -> str:
        """The child's last stderr line (its one-line complaint), for error messages."""
        try:
            lines = self._log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no stderr"
        return lines[-1] if lines else "no stderr"

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def of_kind(self, kind: str) -> list[Event]:
        with self._changed:
            return [e for e in self.events if e.get("event") == kind]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Signal this child by PID and wait; SIGKILL if it does not exit in time.  Idempotent."""
        if self.process.poll() is None:
            try:
                self.process.send_signal(sig)
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5)
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        return self.process.returncode
