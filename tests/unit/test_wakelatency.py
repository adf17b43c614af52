"""$CCSWEEP_IDLE_WAKE_US: a CPU-latency request held while a cell runs, and dropped when it ends."""

from __future__ import annotations

import os
import struct

import pytest

from ccsweep.linkrules import LinkError
from ccsweep.runner.wakelatency import (
    CPU_LATENCY_QOS,
    DEFAULT_BOUND_US,
    ENV,
    WakeRequest,
    idle_wake_bound,
    requested_bound,
)


@pytest.mark.parametrize("text", ["fast", "-1", "10001", "1.5", "OFF"])
def test_a_bad_bound_is_refused_naming_the_variable_and_the_range(text, monkeypatch):
    monkeypatch.setenv(ENV, text)
    with pytest.raises(LinkError, match=rf"^{ENV}=.*: give a whole number of microseconds from 0 to 10000, or off$"):
        requested_bound()


def test_unset_asks_for_polling_and_off_asks_nothing(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert requested_bound() == WakeRequest(DEFAULT_BOUND_US, explicit=False) and DEFAULT_BOUND_US == 0
    monkeypatch.setenv(ENV, "off")
    assert requested_bound() == WakeRequest(None, explicit=True)
    with idle_wake_bound(requested_bound()) as bound:
        assert bound is None
    monkeypatch.setenv(ENV, "250")
    assert requested_bound() == WakeRequest(250, explicit=True)


def test_a_default_the_machine_cannot_hold_is_skipped_and_an_asked_one_is_an_error(monkeypatch, tmp_path):
    """A cell pod has no /dev/cpu_dma_latency: the default is recorded as none, a bound asked for fails."""
    monkeypatch.setattr("ccsweep.runner.wakelatency.CPU_LATENCY_QOS", tmp_path / "missing")
    with idle_wake_bound(WakeRequest(0, explicit=False)) as bound:
        assert bound is None
    with pytest.raises(LinkError, match=f"^{ENV}: .*missing: No such file or directory$"):
        with idle_wake_bound(WakeRequest(0, explicit=True)):
            pass


def current_bound() -> int:
    """The kernel's CPU-latency target now: the smallest request held (reading the file tells it)."""
    with CPU_LATENCY_QOS.open("rb") as qos:
        return int(struct.unpack("=i", qos.read(4))[0])


@pytest.mark.skipif(os.geteuid() != 0 or not CPU_LATENCY_QOS.exists(), reason="needs root and /dev/cpu_dma_latency")
def test_the_request_holds_for_the_block_and_is_dropped_after():
    before = current_bound()
    with idle_wake_bound(WakeRequest(0, explicit=True)) as bound:
        assert bound == 0 and current_bound() == 0
    assert current_bound() == before
