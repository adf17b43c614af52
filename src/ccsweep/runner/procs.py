"""Processes a cell starts (emulator, receiver, sender): JSON lines in, stopped by PID.

Each child runs in a session of its own, so a Ctrl-C in the terminal reaches only the runner,
which then stops its children in order (senders, receiver, emulator) and deletes the namespaces.
A thread reads each child's stdout: every line is a JSON event, time-stamped on arrival and
handed to an optional callback (the live metrics), and kept for the result.

Whether a child that exited did its job is decided once its output has ended, never by a guess
at how long its reader may lag behind it: on a loaded machine the reader can see a child's last
lines seconds after the child exited. Every wait is bounded, and each is recorded with how long
it took, so a failure can say where the time went.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


#: Seconds the reader may take to reach the end of an exited child's output. A child's pipe
#: ends with its exit, so this is instant on an idle machine: running out of it means the reader
#: got no CPU (or a process the child left behind holds its pipe open).
OUTPUT_END_TIMEOUT_S = 30.0
#: Seconds a child whose output has ended may take to exit before its error is written: its
#: pipe closes as it exits, so the wait is instant unless it closed its output and kept running.
EXIT_AFTER_OUTPUT_END_S = 2.0
#: Lines of a child's stderr an error message quotes.
TAIL_LINES = 3


class ChildError(RuntimeError):
    """A child exited or complained before doing what the runner waited for."""


class ChildTimeout(ChildError):
    """A bounded wait on a child ran out: the machine, not the cell, is the likely cause."""


@dataclass(frozen=True)
class Wait:
    """One wait of the runner on a child: what for, how long it took, and when it ended."""

    child: str
    what: str
    seconds: float
    ended_ns: int

    def __str__(self) -> str:
        return f"{self.child} {self.what} {self.seconds:.2f} s"


class Child:
    """One process of a cell; `end_event` is the event it writes last when it did its job."""

    def __init__(self, name: str, argv: list[str], log: Path, on_event: Callable[[Event], None] | None = None,
                 end_event: str = "done"):
        self.name = name
        self.end_event = end_event
        self.events: list[Event] = []
        self._on_event = on_event
        self._changed = threading.Condition()
        self._log_path = log
        #: The runner's waits on this child, in order (see Wait).
        self.waits: list[Wait] = []
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
        """The first event of `kind`; ChildError with the child's own error if it fails first.

        ChildTimeout when `timeout` passes with the child still running and silent about `kind`.
        """
        began = time.monotonic()
        deadline = began + timeout
        try:
            with self._changed:
                while True:
                    found = next((e for e in self.events if e.get("event") == kind), None)
                    if found is not None:
                        return found
                    error = self.error()
                    if error is not None:
                        raise ChildError(f"{self.name}: {error}")
                    if not self._reader.is_alive():
                        self._await_exit(EXIT_AFTER_OUTPUT_END_S)
                        raise ChildError(f"{self.name} {self._exit_text()} before '{kind}': {self.last_lines()}")
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ChildTimeout(f"{self.name}: no '{kind}' within {timeout:g} s")
                    self._changed.wait(remaining)
        finally:
            self.record_wait(kind, time.monotonic() - began)

    def record_wait(self, what: str, seconds: float) -> None:
        self.waits.append(Wait(self.name, what, seconds, time.monotonic_ns()))

    def has_ended(self, timeout: float = OUTPUT_END_TIMEOUT_S) -> bool:
        """Whether the child is finished: the one rule for every child of a cell.

        False while it runs. Once it has exited, the end of its output is awaited (up to
        `timeout`; ChildTimeout past it), so its last lines are read however late the reader is;
        then it is finished if it exited 0 having written its end event, and a ChildError naming
        its exit status and last lines otherwise.
        """
        if self.process.poll() is None:
            return False
        began = time.monotonic()
        self._reader.join(timeout)
        waited = time.monotonic() - began
        if self._reader.is_alive():
            self.record_wait("output end", waited)
            raise ChildTimeout(f"{self.name} {self._exit_text()}, but its output did not end within "
                               f"{timeout:g} s")
        if not any(w.what == "output end" for w in self.waits):
            self.record_wait("output end", waited)
        if self.process.returncode == 0 and self.of_kind(self.end_event):
            return True
        error = self.error()
        raise ChildError(f"{self.name} {self._exit_text()} without '{self.end_event}': {error or self.last_lines()}")

    def _await_exit(self, timeout: float) -> None:
        """Give a child whose output just ended a moment to exit, so its error names its exit status."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def _exit_text(self) -> str:
        code = self.process.poll()
        if code is None:
            return "closed its output"
        return f"exited ({code})" if code >= 0 else f"was killed by signal {-code}"

    def last_lines(self) -> str:
        """The child's last stderr lines and its last event, joined into one line for error messages."""
        with self._changed:
            last_event = next((e for e in reversed(self.events) if e.get("event") != "error"), None)
        said = self.stderr_tail(TAIL_LINES)
        if last_event is not None:
            shown = {k: v for k, v in last_event.items() if k != "_mono_ns"}
            said += f"; last event {json.dumps(shown, separators=(',', ':'))[:200]}"
        return said

    def error(self) -> str | None:
        """The message of the child's first error event, if any."""
        event = next((e for e in self.events if e.get("event") == "error"), None)
        return None if event is None else str(event.get("message", event))

    def stderr_tail(self, lines: int = 1) -> str:
        """The child's last stderr lines (its complaint), joined with " | ", for error messages."""
        try:
            text = self._log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no stderr"
        return " | ".join(line.strip() for line in text[-lines:]) if text else "no stderr"

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
