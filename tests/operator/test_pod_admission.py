"""No pod with privileges in the release's namespace but the chart's own, on a real API server.

The chart's ValidatingAdmissionPolicy (templates/workflows/admission-policy.yaml) is installed into
envtest's kube-apiserver as `helm template` renders it, with the chart's node pool
(ci/placement-values.yaml). The cell pods sent to it are made as Argo's controller makes them:
each template rendered by Argo's own code with its parameters (bin/argo-render), then the emissary
executor's containers, command and volumes added (support.argorender). envtest runs no kubelet,
so pods are only admitted or refused, which is all admission decides. tests/e2e/test_helm_operator.py
shows the controller's own cell pods admitted, and this policy refusing there too.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ccsweep.podspec import CPU_MILLI_RANGE, MEMORY_BYTES_RANGE
from envtest import EnvTest
from support.argorender import (
    CHART_POOL,
    PLACEMENT_VALUES,
    RENDER,
    as_the_controller_creates,
    fan_out_inputs,
    render,
    workflow_parameters,
)
from support.chartlib import render as render_chart
from support.versions import ARGO_WORKFLOWS_VERSION

EXECUTOR_IMAGE = f"quay.io/argoproj/argoexec:{ARGO_WORKFLOWS_VERSION}"
CELL_IMAGE = "ccsweep/cell:0.1.0"
KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
DAEMON_SET_CONTROLLER = "system:serviceaccount:kube-system:daemon-set-controller"

pytestmark = pytest.mark.skipif(not RENDER.exists(), reason="bin/argo-render missing: run `make tools`")


@dataclass
class Policy:
    namespace: str
    release: str

    @property
    def node_setup(self) -> str:
        return f"{self.release}-ccsweep-node-setup"


@pytest.fixture
def policy(envtest: EnvTest, namespace: str) -> Iterator[Policy]:
    """The chart's pod policy for a fresh release in `namespace`, once the API server enforces it."""
    release = f"r{uuid.uuid4().hex[:6]}"
    docs = [d for d in render_chart([PLACEMENT_VALUES], namespace=namespace, release=release) if d["kind"] in KINDS
            and d["metadata"]["name"] == f"{release}-ccsweep-pods"]
    assert sorted(d["kind"] for d in docs) == sorted(KINDS)
    envtest.apply_docs(docs)
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe-policy"}, "spec": {
        "containers": [{"name": "x", "image": "busybox", "securityContext": {"privileged": True}}]}}
    deadline = time.monotonic() + 30  # a new policy takes effect within about a second
    while create(envtest, namespace, bare).returncode == 0:
        envtest.kubectl("delete", "pod", "probe-policy", "-n", namespace, "--wait=false")
        assert time.monotonic() < deadline, "the policy never took effect"
        time.sleep(0.5)
    yield Policy(namespace, release)
    for doc in docs:
        envtest.kubectl("delete", doc["kind"], doc["metadata"]["name"], "--wait=false", check=False)


def create(envtest: EnvTest, namespace: str, pod: dict[str, Any], as_user: str | None = None) -> Any:
    return envtest.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(pod), check=False,
                           as_user=as_user)


def cell_pod(template: str = "cell", **inputs: str) -> dict[str, Any]:
    """A cell pod as the controller creates it from `template` with the fan-out's inputs (and `inputs`)."""
    arguments = {**fan_out_inputs(template, CELL_IMAGE), **inputs}
    rendered = render(template, arguments, workflow_parameters(), node_pool=CHART_POOL)
    assert "error" not in rendered, rendered
    return as_the_controller_creates(rendered["pod"], EXECUTOR_IMAGE, f"cell-{uuid.uuid4().hex[:8]}",
                                     labels={"app.kubernetes.io/component": "cell"})


def refused_with(envtest: EnvTest, policy: Policy, pod: dict[str, Any], message: str) -> None:
    done = create(envtest, policy.namespace, pod)
    assert done.returncode != 0, f"admitted: {json.dumps(pod)[:400]}"
    assert "denied request" in done.stderr and message in done.stderr, done.stderr


@pytest.mark.parametrize("template", ["cell", "cell-mahimahi"])
def test_the_charts_cell_pod_is_admitted(envtest: EnvTest, policy: Policy, template: str):
    """Without this, a policy refusing every pod would pass every test below."""
    done = create(envtest, policy.namespace, cell_pod(template))
    assert done.returncode == 0, done.stderr


def bare(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "evil.example/root:latest", "command": ["sh", "-c", "id"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{**container, **spec.pop("container", {})}], **spec}}


def test_what_a_cloud_identity_or_a_values_file_adds_is_admitted(envtest: EnvTest, policy: Policy):
    """IRSA's webhook adds a token mount and its variables to every container; a values file's
    workflows.extraEnv may set Python's harmless ones. Such cell pods still pass."""
    pod = cell_pod()
    # IRSA projects a service account token there; envtest has no ServiceAccount to project one
    # from, and the policy reads the mount, not the volume's kind.
    pod["spec"]["volumes"].append({"name": "aws-iam-token", "secret": {"secretName": "aws-iam-token"}})
    for container in pod["spec"]["containers"]:
        container["env"] = [*container.get("env", []), {"name": "AWS_ROLE_ARN", "value": "arn:aws:iam::1:role/x"},
                            {"name": "PYTHONUNBUFFERED", "value": "1"}]
    main_of(pod)["volumeMounts"].append({"name": "aws-iam-token", "readOnly": True,
                                         "mountPath": "/var/run/secrets/eks.amazonaws.com/serviceaccount"})
    done = create(envtest, policy.namespace, pod)
    assert done.returncode == 0, done.stderr


def test_a_values_file_whose_environment_the_policy_would_refuse_fails_to_render():
    """Rather than a chart whose every cell pod is refused at run time."""
    with pytest.raises(AssertionError, match="workflows.extraEnv: LD_PRELOAD: the pod policy"):
        render_chart(set_values=["workflows.extraEnv[0].name=LD_PRELOAD", "workflows.extraEnv[0].value=/x.so"])
    assert render_chart(set_values=["workflows.extraEnv[0].name=LD_PRELOAD", "workflows.extraEnv[0].value=/x.so",
                                    "workflows.admissionPolicy.enabled=false"])


def test_a_pod_without_privileges_is_left_alone(envtest: EnvTest, policy: Policy):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"}, "spec": {
        "containers": [{"name": "x", "image": "evil.example/anything", "command": ["sh", "-c", "true"],
                        "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}}
    assert create(envtest, policy.namespace, pod).returncode == 0


@pytest.mark.parametrize("pod", [
    bare("privileged", container={"securityContext": {"privileged": True}}),
    bare("capabilities", container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
    bare("host-path", volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
    bare("host-pid", hostPID=True),
    bare("host-network", hostNetwork=True),
], ids=lambda pod: pod["metadata"]["name"])
def test_a_bare_pod_with_privileges_is_refused(envtest: EnvTest, policy: Policy, pod: dict[str, Any]):
    refused_with(envtest, policy, pod, "must run an image the chart allows")


def with_main(pod: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """`pod` with its main container's fields set to `fields`."""
    main_of(pod).update(fields)
    return pod


def main_of(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "main")


def test_the_cell_shape_with_another_image_or_command_is_refused(envtest: EnvTest, policy: Policy):
    """What an inline Workflow, on a controller without Strict, would make of the cell's privileges."""
    refused_with(envtest, policy, with_main(cell_pod(), image="evil.example/root:latest"),
                 "must run an image the chart allows")
    refused_with(envtest, policy, with_main(cell_pod(), image=f"{CELL_IMAGE}x"), "must run an image the chart allows")
    shell = cell_pod()
    main_of(shell)["command"][-2:] = ["sh", "-c"]
    refused_with(envtest, policy, shell, "must run `ccsweep cell`")
    hidden = cell_pod()
    main_of(hidden)["command"] = ["sh", "-c", "evil", "ccsweep", "cell"]
    refused_with(envtest, policy, hidden, "must run `ccsweep cell`")


def test_a_cell_pod_widened_in_any_other_way_is_refused(envtest: EnvTest, policy: Policy):
    privileged = cell_pod()
    main_of(privileged)["securityContext"] |= {"privileged": True, "allowPrivilegeEscalation": True}
    refused_with(envtest, policy, privileged, "may not be privileged")
    module = cell_pod()
    main_of(module)["securityContext"]["capabilities"]["add"].append("SYS_MODULE")
    refused_with(envtest, policy, module, "may add only NET_ADMIN")
    preload = cell_pod()
    main_of(preload)["env"].append({"name": "LD_PRELOAD", "value": "/var/run/argo/evil.so"})
    refused_with(envtest, policy, preload, "no LD_*, PATH, PYTHON*")
    shadow = cell_pod()
    main_of(shadow)["env"].append({"name": "PYTHONPATH", "value": "/var/run/argo"})
    refused_with(envtest, policy, shadow, "no LD_*, PATH, PYTHON*")
    hook = with_main(cell_pod(), lifecycle={"postStart": {"exec": {"command": ["sh", "-c", "evil"]}}})
    refused_with(envtest, policy, hook, "no lifecycle hooks or probes")
    mount = cell_pod()
    mount["spec"]["volumes"].append({"name": "bin", "emptyDir": {}})
    main_of(mount)["volumeMounts"].append({"name": "bin", "mountPath": "/usr/local/bin"})
    refused_with(envtest, policy, mount, "may mount only /dev/net/tun")
    escape = cell_pod()
    escape["spec"]["volumes"].append({"name": "bin", "emptyDir": {}})
    main_of(escape)["volumeMounts"].append({"name": "bin", "mountPath": "/var/run/secrets/../../../usr/local/bin"})
    refused_with(envtest, policy, escape, "may mount only /dev/net/tun")
    writable = cell_pod()
    next(m for m in main_of(writable)["volumeMounts"] if m["name"] == "node-bpf")["readOnly"] = False
    refused_with(envtest, policy, writable, "may mount only /dev/net/tun, /run/ccsweep/node read-only")
    beside = cell_pod()  # the held BPF digests written through another container of the pod
    beside["spec"]["initContainers"][0].setdefault("volumeMounts", []).append(
        {"name": "node-bpf", "mountPath": "/held"})
    refused_with(envtest, policy, beside, "read-only, /run/ccsweep/node from the host")
    elsewhere = cell_pod()  # Argo's wait container has it only where Argo mirrors main's mounts
    wait = next(c for c in elsewhere["spec"]["containers"] if c["name"] == "wait")
    next(m for m in wait["volumeMounts"] if m["name"] == "node-bpf")["mountPath"] = "/run/ccsweep/node"
    refused_with(envtest, policy, elsewhere, "read-only, /run/ccsweep/node from the host")
    host = cell_pod()
    host["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    refused_with(envtest, policy, host, "no other hostPath, no host network")
    for field in ("hostPID", "hostNetwork", "hostIPC"):
        refused_with(envtest, policy, {**(pod := cell_pod()), "spec": {**pod["spec"], field: True}},
                     "no other hostPath, no host network")
    sidecar = cell_pod()
    sidecar["spec"]["containers"].append({"name": "wait2", "image": "evil.example/x", "command": ["sh"]})
    refused_with(envtest, policy, sidecar, "must be the chart's cell pod")
    executor = cell_pod()
    executor["spec"]["initContainers"][0]["command"] = ["sh", "-c", "cp /evil /var/run/argo/argoexec"]
    refused_with(envtest, policy, executor, "must be the chart's cell pod")
    foreign = cell_pod()
    foreign["spec"]["initContainers"][0]["image"] = "evil.example/argoexec:latest"
    refused_with(envtest, policy, foreign, "must be the chart's cell pod")


#: What the issue found a Workflow naming the `cell` template directly could give (issue 39,
#: item 3), as tests/workflows/test_hostile_parameters.py sends them to the pod's own check.
OFF_POOL = [{"$patch": "replace"}, {key: "elsewhere" for key in CHART_POOL},
            {"$patch": "replace", "ccsweep.io/cc-bbr": "true"}]
OUT_OF_BOUNDS = [{"cpu": "60"}, {"memory": "1Ti"}, {"cpu": "50m"}]


@pytest.mark.parametrize("selector", OFF_POOL, ids=json.dumps)
def test_the_cell_template_with_a_node_selector_off_the_pool_is_refused(envtest: EnvTest, policy: Policy,
                                                                        selector: dict[str, str]):
    pod = cell_pod(**{"node-selector": json.dumps(selector)})
    refused_with(envtest, policy, pod, "must keep the chart's node pool")


@pytest.mark.parametrize("sizes", OUT_OF_BOUNDS, ids=json.dumps)
def test_the_cell_template_with_resources_outside_the_bounds_is_refused(envtest: EnvTest, policy: Policy,
                                                                        sizes: dict[str, str]):
    refused_with(envtest, policy, cell_pod(**sizes), "must request 100m to 16 CPUs")


def test_an_admitted_cell_pod_may_change_labels_but_not_its_image(envtest: EnvTest, policy: Policy):
    """Argo and the kubelet update a running cell pod; only an unchanged spec passes unchecked."""
    pod = cell_pod()
    name = pod["metadata"]["name"]
    assert create(envtest, policy.namespace, pod).returncode == 0
    labelled = envtest.kubectl("label", "pod", name, "-n", policy.namespace, "workflows.argoproj.io/completed=true",
                               check=False)
    assert labelled.returncode == 0, labelled.stderr
    swapped = envtest.kubectl("set", "image", f"pod/{name}", "-n", policy.namespace,
                              "main=evil.example/root:latest", check=False)
    assert swapped.returncode != 0 and "must run an image the chart allows" in swapped.stderr, swapped.stderr


def node_setup_pod(policy: Policy, image: str = CELL_IMAGE) -> dict[str, Any]:
    """The node setup DaemonSet's pod, as the DaemonSet controller creates it (its owner reference)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"setup-{uuid.uuid4().hex[:6]}",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": policy.node_setup,
                             "uid": str(uuid.uuid4()), "controller": True}]},
        "spec": {"containers": [{"name": "setup", "image": image, "securityContext": {"privileged": True}}]}}


def test_the_node_setup_pod_is_admitted_only_from_the_daemon_set_controller(envtest: EnvTest, policy: Policy):
    done = create(envtest, policy.namespace, node_setup_pod(policy), as_user=DAEMON_SET_CONTROLLER)
    assert done.returncode == 0, done.stderr
    refused_with(envtest, policy, node_setup_pod(policy), "must be the chart's cell pod")
    other = create(envtest, policy.namespace, node_setup_pod(policy, image="evil.example/root:latest"),
                   as_user=DAEMON_SET_CONTROLLER)
    assert other.returncode != 0 and "denied request" in other.stderr, other.stderr


def test_the_policys_bounds_are_the_cells():
    """The policy writes the cell's bounds as CEL quantities; they are podspec's, which the plan step
    and the pod's own check enforce."""
    (rendered,) = [d for d in render_chart() if d["kind"] == "ValidatingAdmissionPolicy"
                   and d["metadata"]["name"] == "rel-ccsweep-pods"]
    text = json.dumps(rendered)
    (cpu_low, cpu_high), (memory_low, memory_high) = CPU_MILLI_RANGE, MEMORY_BYTES_RANGE
    for quantity in (f"{cpu_low}m", f"{cpu_high // 1000}", f"{memory_low >> 20}Mi", f"{memory_high >> 30}Gi"):
        assert f"quantity('{quantity}')" in text, quantity
    assert cpu_high % 1000 == 0 and memory_low % (1 << 20) == 0 and memory_high % (1 << 30) == 0
