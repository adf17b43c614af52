"""What the fan-out is watched with, from outside as a user would: the cell pods' events, and the
Sweep's status when the operator made the Workflow.
"""

from __future__ import annotations

import subprocess
import threading
import time

from benchmarks.fanout.controlplane import NAMESPACE, ControlPlane


class PodTimes(threading.Thread):
    """`kubectl get pods --watch` printing name, node and phase per event; first times kept locally
    (the API's own timestamps have one-second resolution). The API server ends a watch after its
    request timeout or when the watch falls too far behind (thousands of pods, as with chunked
    sweeps), and kubectl then exits: the watch is started again, and its first listing only fills
    in pods it has not seen (a time once kept stays). `restarts` says how often that happened."""

    def __init__(self, kubectl: list[str]) -> None:
        super().__init__(daemon=True)
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.restarts = 0
        template = '{.metadata.name} {.spec.nodeName} {.status.phase}{"\\n"}'
        self._cmd = [*kubectl, "get", "pods", "-n", NAMESPACE, "--watch",
                     "-l", "app.kubernetes.io/component=cell", "-o", f"jsonpath={template}"]
        self._stopping = threading.Event()
        self._proc = self._spawn()

    def _spawn(self) -> subprocess.Popen:
        return subprocess.Popen(self._cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def run(self) -> None:
        while True:
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                self._seen(line, time.time())
            self._proc.wait()
            if self._stopping.is_set():
                return
            self.restarts += 1
            time.sleep(0.5)
            self._proc = self._spawn()
            if self._stopping.is_set():   # stop() came between the check above and the spawn
                self._proc.terminate()

    def _seen(self, line: str, now: float) -> None:
        parts = line.split()
        if not parts:
            return
        name = parts[0]
        self.created.setdefault(name, now)
        if len(parts) >= 2 and parts[1] not in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            self.bound.setdefault(name, now)
        if parts[-1] in ("Succeeded", "Failed"):
            self.done.setdefault(name, now)

    def stop(self) -> None:
        self._stopping.set()
        self._proc.terminate()   # kubectl ends on SIGTERM at once
        self._proc.wait(timeout=30)
        self.join(timeout=5)


class SweepStatus(threading.Thread):
    """The Sweep's status.cells.done and phase every 0.5 s, time-stamped: what a user watching it sees."""

    def __init__(self, plane: ControlPlane, name: str) -> None:
        super().__init__(daemon=True)
        self.plane, self.name = plane, name
        self.seen: list[tuple[float, int, str]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.5):
            got = self.plane.kubectl("get", "sweep", "-n", NAMESPACE, self.name, "-o",
                                     "jsonpath={.status.cells.done} {.status.phase}", check=False).stdout.split()
            if len(got) == 2 and got[0].isdigit():
                self.seen.append((time.time(), int(got[0]), got[1]))
            elif len(got) == 1:
                self.seen.append((time.time(), 0, got[0]))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def lags(self, done_times: list[float]) -> list[float]:
        """For the k-th cell pod to succeed: seconds until the Sweep counted k cells done."""
        out = []
        for k, t in enumerate(sorted(done_times), start=1):
            shown = next((at for at, done, _ in self.seen if done >= k and at >= t), None)
            if shown is not None:
                out.append(shown - t)
        return out

    def phase_at(self, phase: str) -> float | None:
        return next((at for at, _, p in self.seen if p == phase), None)
