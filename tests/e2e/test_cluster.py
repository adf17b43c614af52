"""The cluster itself, and what a cell pod may do on it.

A cell needs, inside its pod: network namespaces (`ip netns add`), veth pairs, TUN devices for
the user-space link emulator, and a choice between bbr and cubic. These tests pin down which pod
security settings give that (docs/kubernetes-privileges.md records the answer).
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from support.versions import KUBERNETES_VERSION

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster as Cluster

pytestmark = pytest.mark.e2e

# Opens /dev/net/tun and creates a TUN device named by argv[1]; prints OK or the errno name.
TUN_PROBE = r"""
import errno, fcntl, os, struct, sys
try:
    fd = os.open("/dev/net/tun", os.O_RDWR)
except OSError as e:
    print("OPEN_" + errno.errorcode[e.errno]); sys.exit(0)
try:
    fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH", sys.argv[1].encode(), 0x0001 | 0x1000))  # TUNSETIFF, IFF_TUN|IFF_NO_PI
    print("OK")
except OSError as e:
    print("IOCTL_" + errno.errorcode[e.errno])
"""  # noqa: E501 - a script, kept as it runs

# Each probe prints one word per line: PROBE=ok or PROBE=fail, so the tests can assert exactly.
PROBES = f"""
probe() {{ name=$1; shift; if "$@" >/tmp/$name.log 2>&1; then echo "$name=ok"; else echo "$name=fail"; fi; }}
probe netns_add ip netns add cell-probe
probe netns_exec ip netns exec cell-probe ip link set lo up
probe veth ip link add cp-a type veth peer name cp-b
cat > /tmp/tun.py <<'PY'
{TUN_PROBE}
PY
echo "tun=$(python3 /tmp/tun.py cptun0)"
echo "tun_in_netns=$(ip netns exec cell-probe python3 /tmp/tun.py cptun1 2>&1 | tail -1)"
echo "available_cc=$(tr ' ' , < /proc/sys/net/ipv4/tcp_available_congestion_control)"
probe cubic_socket python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic"); assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\\0") == b"cubic"'
probe bbr_socket python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")'
# Per-namespace TCP buffer limits (net.ipv4.tcp_rmem): runtimes mount /proc/sys read-only in
# unprivileged containers. `ip netns exec` runs in a mount namespace of its own, where SYS_ADMIN
# may remount it writable without touching the pod's view.
probe sysctl_netns ip netns exec cell-probe sysctl -q -w "net.ipv4.tcp_rmem=4096 131072 6291456"
probe sysctl_netns_remount ip netns exec cell-probe sh -c 'mount -o remount,rw /proc/sys && sysctl -q -w "net.ipv4.tcp_rmem=4096 131072 6291456"'
probe pod_proc_sys_writable sh -c 'awk "\\$5 == \\"/proc/sys\\" {{print \\$6}}" /proc/self/mountinfo | grep -q "^rw"'
"""  # noqa: E501 - a script, kept as it runs


def run_probes(cluster: Cluster, pod: str) -> dict[str, str]:
    proc = cluster.exec(pod, PROBES)
    assert proc.returncode == 0, proc.stderr
    result = dict(line.split("=", 1) for line in proc.stdout.split() if "=" in line)
    print(f"\n{pod}: {json.dumps(result)}")
    return result


def test_node_is_ready_and_pinned(cluster: Cluster):
    node = cluster.get_json("node", "ccsweep-node")
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True", conditions
    assert node["status"]["nodeInfo"]["kubeletVersion"] == KUBERNETES_VERSION
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    # Every control-plane component answers through the API server.
    assert cluster.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_images_are_in_the_clusters_containerd(cluster: Cluster, cell_image: str):
    # The node's status lists images only every few seconds; containerd itself answers now.
    proc = subprocess.run([str(cluster.base / "ctr"), "images", "ls", "-q"], capture_output=True, text=True, timeout=30)
    names = set(proc.stdout.split())
    assert cell_image in names, names
    assert f"localhost/ccsweep/pause:{KUBERNETES_VERSION}" in names, names


def test_privileged_pod_can_build_a_cell_network(cluster: Cluster, cell_image: str, pod_name: str):
    pod = cluster.run_pod(pod_name, container_extra={"securityContext": {"privileged": True}})
    result = run_probes(cluster, pod)
    assert result["netns_add"] == "ok"
    assert result["netns_exec"] == "ok"
    assert result["veth"] == "ok"
    assert result["tun"] == "OK"
    assert result["tun_in_netns"] == "OK"
    available = result["available_cc"].split(",")
    assert "bbr" in available and "cubic" in available, available
    # Root with NET_ADMIN in the pod may pick any available algorithm, cubic included.
    assert result["cubic_socket"] == "ok"
    assert result["bbr_socket"] == "ok"
    assert result["sysctl_netns"] == "ok"
    # The ccsweep package from the image's venv is on PATH (the image's entrypoint).
    assert cluster.exec(pod, "ccsweep --help").returncode == 0
    # Pod networking: an address from the CNI bridge's range, and the API server reachable
    # through its ClusterIP service (kube-proxy's iptables rules; all inside the cluster netns).
    assert cluster.get_json("pod", "-n", "ccsweep-e2e", pod)["status"]["podIP"].startswith("10.244.0.")
    reach = cluster.exec(pod, "python3 -c 'import socket; socket.create_connection((\"10.96.0.1\", 443), timeout=5)'")
    assert reach.returncode == 0, reach.stderr


TUN_HOSTPATH = {
    "volumes": [{"name": "tun", "hostPath": {"path": "/dev/net/tun", "type": "CharDevice"}}],
}
TUN_MOUNT = {"volumeMounts": [{"name": "tun", "mountPath": "/dev/net/tun"}]}


def least_privilege_pod(cluster: Cluster, name: str, caps: list[str], seccomp: str | None = None) -> str:
    security = {"privileged": False, "allowPrivilegeEscalation": False, "runAsUser": 0,
                "capabilities": {"add": caps, "drop": ["ALL"]}}
    if seccomp:
        security["seccompProfile"] = {"type": seccomp}
    return cluster.run_pod(name, container_extra={**TUN_MOUNT, "securityContext": security}, pod_extra=TUN_HOSTPATH)


def test_net_admin_alone_is_not_enough_for_netns(cluster: Cluster, cell_image: str, pod_name: str):
    """NET_ADMIN + /dev/net/tun (hostPath char device): links and TUN yes, namespaces no."""
    result = run_probes(cluster, least_privilege_pod(cluster, pod_name, ["NET_ADMIN"]))
    assert result["netns_add"] == "fail"    # unshare(CLONE_NEWNET) and mounts need SYS_ADMIN
    assert result["veth"] == "ok"
    assert result["tun"] == "OK"
    assert result["cubic_socket"] == "ok"


def test_tun_needs_the_device_mounted(cluster: Cluster, cell_image: str, pod_name: str):
    """Capabilities alone give no /dev/net/tun: an unprivileged container's /dev lacks it."""
    pod = cluster.run_pod(pod_name, container_extra={"securityContext": {
        "privileged": False, "runAsUser": 0, "capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN"], "drop": ["ALL"]}}})
    result = run_probes(cluster, pod)
    assert result["tun"] == "OPEN_ENOENT"
    assert result["netns_add"] == "ok"


# Kubernetes runs pods Unconfined unless told otherwise; many clusters default to RuntimeDefault,
# whose filter allows unshare/mount/setns only to holders of CAP_SYS_ADMIN.
@pytest.mark.parametrize("seccomp", [None, "RuntimeDefault"])
def test_net_admin_and_sys_admin_suffice_for_a_cell(cluster: Cluster, cell_image: str, pod_name: str, seccomp):
    """NET_ADMIN + SYS_ADMIN + /dev/net/tun: everything a cell needs, without privileged."""
    pod = least_privilege_pod(cluster, pod_name, ["NET_ADMIN", "SYS_ADMIN"], seccomp)
    assert cluster.get_json("pod", "-n", "ccsweep-e2e", pod)["spec"]["containers"][0]["securityContext"].get(
        "seccompProfile", {}).get("type") == seccomp
    result = run_probes(cluster, pod)
    assert result["netns_add"] == "ok"
    assert result["netns_exec"] == "ok"
    assert result["veth"] == "ok"
    assert result["tun"] == "OK"
    assert result["tun_in_netns"] == "OK"
    assert result["cubic_socket"] == "ok"
    # /proc/sys is read-only; writable only inside `ip netns exec`'s own mount namespace after a
    # remount, and the pod's own view stays read-only: how a cell must write its sysctls here.
    assert result["sysctl_netns"] == "fail"
    assert result["sysctl_netns_remount"] == "ok"
    assert result["pod_proc_sys_writable"] == "fail"
