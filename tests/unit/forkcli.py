"""Run `ccsweep` as a process of its own many times, quickly: a server imports the CLI once and forks.

Starting `python -m ccsweep` costs about 0.4 s of imports, which for a corpus of two hundred
hostile specs is most of a minute. Here one server process imports the CLI, then, per run, forks
a child that takes the run's working folder, environment and address-space limit, calls the CLI's
own `main` with the run's arguments, and exits with its status: each run is still a separate
process with its own limits, stdout and stderr, and its CPU time is the child's own rusage.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

_SERVER = r"""
import json, os, resource, signal, sys, tempfile, time
import ccsweep.cli, ccsweep.expand, ccsweep.plan, ccsweep.store.file  # imported once, before any fork

memory, wall = int(sys.argv[1]), float(sys.argv[2])
for line in sys.stdin:
    request = json.loads(line)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
                os.chdir(request["cwd"])
                os.environ.clear()
                os.environ.update(request["env"])
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = os.fdopen(1, "w", closefd=False)
                sys.stderr = os.fdopen(2, "w", closefd=False)
                ccsweep.cli.main(request["args"], prog_name="ccsweep")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException as exc:  # a traceback, as the user would see it
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - started > wall:
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
        out.seek(0)
        err.seek(0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                          "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace"),
                          "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.monotonic() - started}), flush=True)
"""


@dataclass
class Outcome:
    returncode: int
    stderr: str
    stdout: str
    cpu_s: float
    wall_s: float
    args: list[str] = field(default_factory=list)


class ForkServer:
    """One server process; `run` may be called from several threads (runs are serialised per server)."""

    def __init__(self, memory_bytes: int, wall_seconds: float):
        self.process = subprocess.Popen([sys.executable, "-c", _SERVER, str(memory_bytes), str(wall_seconds)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()

    def run(self, args: list[str], env: dict[str, str], cwd: Path) -> Outcome:
        assert self.process.stdin is not None and self.process.stdout is not None
        with self.lock:
            self.process.stdin.write(json.dumps({"args": args, "env": env, "cwd": str(cwd)}) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the fork server ended (exit {self.process.poll()})")
        return Outcome(**json.loads(answer), args=list(args))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
