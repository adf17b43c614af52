"""The node probe: labels that match what cells ask for, on a real Node object of a real API server."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.plan import node_selector
from ccsweep_operator.nodeprobe import KERNEL_LABEL, label_patch, label_value, loadable, probe
from envtest import EnvTest


def test_label_values_are_valid_kubernetes_label_values():
    assert label_value("6.18.0-rc1+") == "6.18.0-rc1"
    assert label_value("5.15.0-1057-azure #65~20.04.1") == "5.15.0-1057-azure__65_20.04.1"
    assert len(label_value("x" * 80)) == 63


def test_patch_adds_algorithms_and_removes_ones_gone():
    current = {"ccsweep.io/cc-vegas": "true", "ccsweep.io/cc-bbr": "true", "kubernetes.io/os": "linux"}
    patch = label_patch(["bbr", "cubic"], "6.18.0+", current)
    assert patch == {"ccsweep.io/cc-cubic": "true", KERNEL_LABEL: "6.18.0", "ccsweep.io/cc-vegas": None}
    assert label_patch(["bbr"], "6.18.0", {"ccsweep.io/cc-bbr": "true", KERNEL_LABEL: "6.18.0"}) == {}


def test_a_probed_node_satisfies_the_node_selector_of_a_cell_it_can_run():
    available, kernel = probe()
    labels = {k: v for k, v in label_patch(available, kernel, {}).items() if v}
    mix = Cell.build("s", "e", CellParams(
        flows=(FlowParams(cc="bbr"), FlowParams(cc="cubic")), duration_s=5, warmup_s=1, seed=1,
        uplink=DirectionParams(rate_mbps=10, delay_ms=5, loss=0),
        downlink=DirectionParams(rate_mbps=10, delay_ms=5, loss=0)))
    wanted = node_selector(mix)
    assert wanted.items() <= labels.items(), (wanted, labels)  # this kernel has bbr and cubic built in


def test_probe_labels_a_real_node_object(envtest: EnvTest, tmp_path: Path):
    node = f"probe-{os.getpid()}"
    envtest.kubectl("create", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"ccsweep.io/cc-vegas": "true"}}}))
    try:
        env = {**os.environ, "KUBECONFIG": str(envtest.kubeconfig), "NODE_NAME": node}
        done = subprocess.run([sys.executable, "-m", "ccsweep_operator.nodeprobe", "--once"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        labels = json.loads(envtest.kubectl("get", "node", node, "-o", "json").stdout)["metadata"]["labels"]
        available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
        assert {k: v for k, v in labels.items() if k.startswith("ccsweep.io/cc-")} == {
            f"ccsweep.io/cc-{cc}": "true" for cc in available}
        assert labels[KERNEL_LABEL] == label_value(platform.release())
        assert "ccsweep.io/cc-vegas=None" in done.stderr  # the removal is logged
        again = subprocess.run([sys.executable, "-m", "ccsweep_operator.nodeprobe", "--once"], env=env,
                               capture_output=True, text=True, timeout=60)
        assert "labels up to date" in again.stderr
    finally:
        envtest.kubectl("delete", "node", node, "--wait=false", check=False)


def test_probe_needs_a_node_name():
    env = {k: v for k, v in os.environ.items() if k != "NODE_NAME"}
    done = subprocess.run([sys.executable, "-m", "ccsweep_operator.nodeprobe", "--once"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("error: --node or $NODE_NAME is required")


def test_loadable_algorithms_are_the_kernels_tcp_modules(tmp_path: Path):
    ipv4 = tmp_path / "6.1.0-18-amd64/kernel/net/ipv4"
    ipv4.mkdir(parents=True)
    for name in ("tcp_bbr.ko.xz", "tcp_vegas.ko.zst", "tcp_westwood.ko", "tcp_diag.ko.xz", "udp_diag.ko.xz",
                 "tcp_bic.ko.xz.bak"):
        (ipv4 / name).write_bytes(b"\x7fELF")
    assert loadable("6.1.0-18-amd64", tmp_path) == ["bbr", "vegas", "westwood"]
    assert loadable("6.18.0", tmp_path) == []  # another kernel's modules, or none mounted: nothing claimed


def test_patch_labels_what_could_load_and_removes_what_no_longer_can():
    current = {"ccsweep.io/loadable-cc-vegas": "true", "ccsweep.io/cc-cubic": "true", KERNEL_LABEL: "6.1.0"}
    patch = label_patch(["cubic"], "6.1.0", current, ["bbr", "cubic"])
    assert patch == {"ccsweep.io/loadable-cc-bbr": "true", "ccsweep.io/loadable-cc-cubic": "true",
                     "ccsweep.io/loadable-cc-vegas": None}
