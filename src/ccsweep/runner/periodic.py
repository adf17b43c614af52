"""A sampler that reads something every interval on a thread of its own, from its start until stopped.

The link's processes are watched from outside (/proc) while the cell runs: their run-queue delay
(runner.runqueue) and Mahimahi's shells' CPU time (runner.mahimahi_run). Both sample on a daemon
thread, so a sampler the runner forgets never keeps the process alive.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class PeriodicSampler(ABC):
    """Calls `_sample()` every `interval_s` from construction until `_halt()`.

    A subclass sets up its state before calling `__init__`: the first sample may come at once.
    """

    def __init__(self, interval_s: float, name: str) -> None:
        self._interval_s = interval_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(self._interval_s):
            self._sample()

    @abstractmethod
    def _sample(self) -> object:
        """Take one sample."""

    def _halt(self) -> None:
        """Stop sampling; returns once the thread took its last sample."""
        self._done.set()
        self._thread.join()
