"""Real MinIO, Pushgateway and Prometheus on 127.0.0.1, each on a free port, stopped by PID.

A server can be stopped and started again on the same port and data folder, which is how the
outage tests take MinIO or the Pushgateway away under a running sweep.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import urllib3
import yaml
from minio import Minio
from minio.error import S3Error, ServerError

REPO = Path(__file__).resolve().parents[2]
MINIO_USER = "ccsweep-test"
MINIO_PASSWORD = "ccsweep-test-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def minio_binary() -> Path:
    """bin/minio, built by hack/tools/minio.sh (pinned, cached outside the clone) if missing."""
    path = Path(os.environ.get("CCSWEEP_BIN", REPO / "bin")) / "minio"
    if not path.exists():
        subprocess.run(["bash", str(REPO / "hack" / "tools" / "minio.sh")], check=True)
    return path


def debian_binary(name: str) -> str:
    """A binary from the Debian packages hack/deps.sh installs (prometheus, prometheus-pushgateway)."""
    found = shutil.which(name)
    if found is None:
        subprocess.run(["bash", str(REPO / "hack" / "deps.sh")], check=True)
        found = shutil.which(name)
    assert found, f"{name} is missing after hack/deps.sh"
    return found


class Server:
    """One server process; `url` is its base URL, `ready` a path that answers 200 when it is up, and
    `serving` (if given) a request of its own API that must succeed too before it counts as up."""

    def __init__(self, name: str, command: list[str], port: int, ready: str, log: Path,
                 env: dict[str, str] | None = None, serving: Callable[[Server], bool] | None = None):
        self.name = name
        self.command = command
        self.port = port
        self.ready = ready
        self.log = log
        self.env = env
        self.serving = serving
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def start(self, timeout: float = 30) -> Server:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **(self.env or {})}, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + self.ready, timeout=1) as response:
                    if response.status == 200 and (self.serving is None or self.serving(self)):
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} not ready on {self.address} within {timeout} s: "
                           f"{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after 10 s; safe to call twice."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def minio_server(root: Path) -> Server:
    data = root / "minio-data"
    data.mkdir(parents=True, exist_ok=True)
    port, console = free_port(), free_port()
    command = [str(minio_binary()), "server", str(data), "--quiet", "--address", f"127.0.0.1:{port}",
               "--console-address", f"127.0.0.1:{console}"]
    env = {"MINIO_ROOT_USER": MINIO_USER, "MINIO_ROOT_PASSWORD": MINIO_PASSWORD, "MINIO_BROWSER": "off",
           "MINIO_UPDATE": "off"}
    return Server("minio", command, port, "/minio/health/ready", root / "minio.log", env, serving=_lists_buckets)


def _lists_buckets(minio: Server) -> bool:
    """Whether MinIO answers an S3 request. Its health path can answer 200 while S3 requests still
    get 503 (a loaded machine saw "too many 503 error responses" on the first test's bucket
    creation); one ListBuckets that succeeds, without the client's own retries, is the real sign."""
    client = Minio(minio.address, access_key=MINIO_USER, secret_key=MINIO_PASSWORD, secure=False,
                   http_client=urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=2)))
    try:
        client.list_buckets()
    except (S3Error, ServerError, urllib3.exceptions.HTTPError, OSError):
        return False
    return True


def s3_env(minio: Server) -> dict[str, str]:
    """What a user sets to reach this MinIO (the store reads nothing else)."""
    return {"CCSWEEP_S3_ENDPOINT": minio.address, "CCSWEEP_S3_ACCESS_KEY": MINIO_USER,
            "CCSWEEP_S3_SECRET_KEY": MINIO_PASSWORD, "CCSWEEP_S3_SECURE": "false", "CCSWEEP_S3_REGION": "us-east-1"}


def pushgateway_server(root: Path) -> Server:
    port = free_port()
    # Debian's build persists to /var/lib/prometheus/pushgateway.data by default: a file shared by
    # every run on the machine, whose groups would outlive the test that pushed them. In memory only.
    command = [debian_binary("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="]
    return Server("pushgateway", command, port, "/-/ready", root / "pushgateway.log")


def prometheus_server(root: Path, pushgateway: Server) -> Server:
    """Prometheus with the committed monitoring/ config, its Pushgateway target pointed at ours."""
    config = yaml.safe_load((REPO / "monitoring" / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            static["targets"] = [pushgateway.address]
    config["rule_files"] = [str(REPO / "monitoring" / name) for name in config.get("rule_files", [])]
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    command = [debian_binary("prometheus"), f"--config.file={root / 'prometheus.yml'}",
               f"--storage.tsdb.path={root / 'prometheus-data'}", f"--web.listen-address=127.0.0.1:{port}"]
    return Server("prometheus", command, port, "/-/ready", root / "prometheus.log")
