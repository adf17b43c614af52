"""What `helm test` checks of an installed chart: the Sweep CRD is served, the operator is ready, the
result store takes a write, and the Argo controller enforces Strict template referencing.

The chart's test hook pods (charts/ccsweep/templates/tests/) each run one check with their own
ServiceAccount, whose Role lets them read Sweeps and the operator's Deployment, nothing else. Each
check prints one line and exits 0 when it holds, 1 when it does not, so `helm test` names what
failed and `helm test --logs` says why.

    python -m ccsweep_operator.chartcheck crd
    python -m ccsweep_operator.chartcheck operator --deployment NAME
    python -m ccsweep_operator.chartcheck store --store s3://BUCKET/PREFIX
    python -m ccsweep_operator.chartcheck strict --image IMAGE
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time

import kubernetes

from ccsweep.crd import GROUP, PLURAL, VERSION
from ccsweep.store import StoreError, open_store
from ccsweep_operator.reconcile import ARGO_API_VERSION, ARGO_GROUP, ARGO_VERSION, WORKFLOWS

#: Where the store check writes its probe object, beside (never inside) results: a dot-prefixed
#: folder that no sweep uses, removed again at once.
PROBE_FOLDER = ".ccsweep-helm-test"
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: What Argo's controller says of a Workflow with templates of its own under Strict (v3.7).
STRICT_REFUSAL = "workflows must use workflowTemplateRef to be executed when the controller is in reference mode"
#: How long the strict check waits for the controller to take its Workflow.
STRICT_WAIT_S = 60


def namespace() -> str:
    with open(NAMESPACE_FILE) as handle:
        return handle.read().strip()


def check_crd() -> str:
    """Listing Sweeps in this namespace succeeds only when the API server serves the CRD."""
    kubernetes.config.load_incluster_config()
    listed: dict = kubernetes.client.CustomObjectsApi().list_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace(), PLURAL)
    return f"the API server serves {PLURAL}.{GROUP}/{VERSION} ({len(listed.get('items', []))} Sweeps here)"


def check_operator(deployment: str) -> str:
    kubernetes.config.load_incluster_config()
    status = kubernetes.client.AppsV1Api().read_namespaced_deployment(deployment, namespace()).status
    ready = (status.ready_replicas if status else None) or 0
    if ready < 1:
        wanted = (status.replicas if status else None) or 0
        raise CheckFailed(f"deployment {deployment}: {ready} of {wanted} replicas ready")
    return f"deployment {deployment}: {ready} replica ready"


def check_store(url: str) -> str:
    """Write, read back and delete one small object: what every cell does with its result."""
    key = f"{PROBE_FOLDER}/{secrets.token_hex(8)}"
    payload = f"helm test {key}\n".encode()
    try:
        store = open_store(url)
        store.write_bytes(key, payload, content_type="text/plain")
        read = store.read_bytes(key)
        store.delete(key)
    except StoreError as exc:
        raise CheckFailed(f"store {url}: {exc}") from None
    if read != payload:
        raise CheckFailed(f"store {url}: wrote {len(payload)} bytes to {key}, read back "
                          f"{'nothing' if read is None else f'{len(read)} other bytes'}")
    return f"store {url}: wrote, read back and deleted {key}"


def check_strict(image: str, wait_s: float = STRICT_WAIT_S) -> str:
    """Create an inline Workflow (one unprivileged container that runs `true`): under Strict the
    controller ends it in Error before any pod; a controller that runs it does not enforce Strict,
    and whoever may create Workflows here could run any pod (docs/install.md, step 2). The
    Workflow is deleted either way."""
    kubernetes.config.load_incluster_config()
    api = kubernetes.client.CustomObjectsApi()
    workflows = (ARGO_GROUP, ARGO_VERSION, namespace(), WORKFLOWS)
    container = {"image": image, "command": ["true"],
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                     "runAsNonRoot": True, "runAsUser": 65534}}
    body = {"apiVersion": ARGO_API_VERSION, "kind": "Workflow",
            "metadata": {"generateName": "ccsweep-helm-test-strict-"},
            "spec": {"entrypoint": "main", "activeDeadlineSeconds": int(wait_s),
                     "templates": [{"name": "main", "container": container}]}}
    created: dict = api.create_namespaced_custom_object(*workflows, body)  # type: ignore[assignment]
    name = created["metadata"]["name"]
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            workflow: dict = api.get_namespaced_custom_object(*workflows, name)  # type: ignore[assignment]
            status = workflow.get("status") or {}
            if status.get("phase") == "Error" and status.get("message") == STRICT_REFUSAL:
                return f"the workflow controller refused inline Workflow {name}: templateReferencing is Strict"
            if status.get("phase") not in (None, "", "Pending") or status.get("nodes"):
                raise CheckFailed(f"the workflow controller ran inline Workflow {name} (phase "
                                  f"{status.get('phase')}): it does not enforce templateReferencing: Strict "
                                  "(docs/install.md, step 2)")
            time.sleep(1)
        raise CheckFailed(f"no workflow controller took Workflow {name} within {wait_s:.0f} s")
    finally:
        api.delete_namespaced_custom_object(*workflows, name)


class CheckFailed(Exception):
    """A check that ran and found the installation wrong (exit 1, its message on one line)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccsweep_operator.chartcheck", description=__doc__.split("\n\n")[0])
    checks = parser.add_subparsers(dest="check", required=True)
    checks.add_parser("crd", help="the Sweep CRD is served")
    operator = checks.add_parser("operator", help="the operator's Deployment has a ready replica")
    operator.add_argument("--deployment", required=True)
    store = checks.add_parser("store", help="the result store takes a write, a read and a delete")
    store.add_argument("--store", default=os.environ.get("CCSWEEP_STORE"), required="CCSWEEP_STORE" not in os.environ)
    strict = checks.add_parser("strict", help="the Argo controller refuses inline Workflows (Strict referencing)")
    strict.add_argument("--image", required=True, help="the image of the inline Workflow's one container")
    args = parser.parse_args(argv)
    try:
        if args.check == "crd":
            line = check_crd()
        elif args.check == "operator":
            line = check_operator(args.deployment)
        elif args.check == "strict":
            line = check_strict(args.image)
        else:
            line = check_store(args.store)
    except CheckFailed as exc:
        print(f"FAIL {args.check}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - an API error is this check's failure, said in one line
        print(f"FAIL {args.check}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 1
    print(f"ok {args.check}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
