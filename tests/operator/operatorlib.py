"""Helpers for running the operator in tests: kopf in-process, waiting on what the API server holds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from kopf.testing import KopfRunner

from envtest import EnvTest

EXAMPLES = Path(__file__).resolve().parents[2] / "operator/examples"


@contextmanager
def operator(namespace: str) -> Iterator[KopfRunner]:
    args = ["run", "--standalone", f"--namespace={namespace}", "-m", "ccsweep_operator.handlers"]
    with KopfRunner(args, timeout=60) as runner:
        yield runner
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output


def wait_for(get: Callable[[], dict | None], predicate: Callable[[dict], bool], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = get()
        if last is not None and predicate(last):
            return last
        time.sleep(0.3)
    raise AssertionError(f"condition not reached in {timeout}s; last seen: {json.dumps(last, indent=1)[:3000]}")


def getter(envtest: EnvTest, namespace: str, kind: str, name: str) -> Callable[[], dict | None]:
    def get() -> dict | None:
        done = envtest.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None
    return get


def apply_example(envtest: EnvTest, namespace: str, example: str, **spec_changes) -> dict:
    body = yaml.safe_load((EXAMPLES / example / "sweep.yaml").read_text())
    body["spec"] |= spec_changes
    envtest.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body))
    return body


def phase_is(*phases: str) -> Callable[[dict], bool]:
    return lambda sweep: (sweep.get("status") or {}).get("phase") in phases
