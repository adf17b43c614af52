"""What the operator decides, as plain functions: from a Sweep (and the store) to a status and a Workflow.

Nothing here talks to Kubernetes, so every decision is testable on its own; `kube` applies the
results and `handlers` calls these from kopf. The data flow is the same as every executor's:
`plan_counts` stores the sweep's plan (the manifest and its cells, in chunks) once and counts the
cells stored and to run, a chunk at a time, so the operator's memory does not grow with a Sweep.
The `ccsweep-sweep` WorkflowTemplate's first step reads that stored plan (nothing is expanded
again) and fans out one pod per cell still to run.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import yaml

from ccsweep.crd import API_VERSION, KIND, MAX_SWEEP_NAME, CellCounts, RunSettings, store_name, sweep_from_resource
from ccsweep.gunzip import NotGzip, TooLarge, gunzip
from ccsweep.linkdesc import LINKS
from ccsweep.placement import Node, unplaceable_cells
from ccsweep.plan import PlanCounts, chunk_parallelism, plan_counts
from ccsweep.podspec import ALLOWED_PUSHGATEWAYS_ENV, ALLOWED_STORES_ENV, endpoint_allowed, image_allowed, listed_in_env
from ccsweep.spec import SpecError, SweepSpec
from ccsweep.store import REPORT_FILE, ResultStore, StoreError, StoreUnavailable, open_store, sweep_file_key
from ccsweep.storeurls import namespace_store

#: Label on every Workflow the operator creates; the operator only follows Workflows carrying it.
MANAGED_BY = {"app.kubernetes.io/managed-by": "ccsweep-operator"}
#: Label naming the Sweep object that owns a Workflow (the store's sweep name is ccsweep.io/sweep).
OWNER_LABEL = "ccsweep.io/owner"
GENERATION_LABEL = "ccsweep.io/generation"
#: Label on a large sweep's chunk Workflow naming the sweep's Workflow that created it (ccsweep-sweep.yaml).
CHUNK_PARENT_LABEL = "ccsweep.io/parent"

#: Argo's Workflow resource: its API group, version and plural, and the apiVersion a Workflow carries.
ARGO_GROUP, ARGO_VERSION, WORKFLOWS = "argoproj.io", "v1alpha1", "workflows"
ARGO_API_VERSION = f"{ARGO_GROUP}/{ARGO_VERSION}"
#: Argo's phases of a Workflow (and of its nodes) and what they mean for a Sweep.
WORKFLOW_PHASES = {"": "Pending", "Pending": "Pending", "Running": "Running", "Succeeded": "Succeeded",
                   "Failed": "Failed", "Error": "Failed"}
FINISHED = ("Succeeded", "Failed", "Invalid")


@dataclass(frozen=True)
class OperatorSettings:
    """The operator's defaults, from its environment (the chart sets them)."""

    store: str
    workflow_template: str = "ccsweep-sweep"
    #: Images a Sweep's run.image may name (`*` matches any characters). Empty: only the chart's
    #: own image (the WorkflowTemplate's default), which a Sweep gets by leaving run.image unset.
    allowed_images: tuple[str, ...] = ()
    #: Stores a Sweep's run.store may name besides `store` (`*` matches any characters).
    allowed_stores: tuple[str, ...] = ()
    #: Pushgateways a Sweep's run.pushgateway may name. Empty: only the chart's own, if any (the
    #: WorkflowTemplate's default), which a Sweep gets by leaving run.pushgateway unset.
    allowed_pushgateways: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> OperatorSettings:
        return cls(store=env.get("CCSWEEP_STORE", "results"),
                   workflow_template=env.get("CCSWEEP_WORKFLOW_TEMPLATE", "ccsweep-sweep"),
                   allowed_images=listed_in_env("CCSWEEP_ALLOWED_IMAGES", env),
                   allowed_stores=listed_in_env(ALLOWED_STORES_ENV, env),
                   allowed_pushgateways=listed_in_env(ALLOWED_PUSHGATEWAYS_ENV, env))

    def image_allowed(self, image: str) -> bool:
        """Whether a Sweep may run its cells in `image`: whoever may create a Sweep may not pick the code."""
        return image_allowed(image, self.allowed_images)

    def refusal(self, sweep: str, run: RunSettings) -> str | None:
        """Why a Sweep may not run with `run` (one line naming the field and what is allowed), or None.

        Whoever may create a Sweep may not choose the code its cells run (run.image), the bucket
        the chart's credentials write to (run.store) nor the host its pods send requests to
        (run.pushgateway): each must be one the chart's values list.
        """
        checks = [
            ("run.image", run.image, self.allowed_images, image_allowed, "operator.allowedImages"),
            ("run.store", run.store, (self.store, *self.allowed_stores), endpoint_allowed,
             "store.url and operator.allowedStores"),
            ("run.pushgateway", run.pushgateway, self.allowed_pushgateways, endpoint_allowed,
             "workflows.pushgateway and operator.allowedPushgateways"),
        ]
        for field_name, value, listed, allowed, values in checks:
            if value is not None and not allowed(value, listed):
                choice = (f"{', '.join(listed)} (the chart's {values})" if listed
                          else f"none besides the chart's own (leave {field_name} unset)")
                return f"Sweep {sweep}: {field_name} {value} is not allowed; allowed: {choice}"
        return None


@dataclass(frozen=True)
class SweepObject:
    """The parts of a Sweep object the decisions depend on."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> SweepObject:
        meta = body["metadata"]
        return cls(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"],
                   generation=int(meta.get("generation") or 1), spec=dict(body.get("spec") or {}),
                   status=dict(body.get("status") or {}))


@dataclass
class Decision:
    """What to do about a Sweep: a status merge patch, maybe a Workflow to create, maybe retry later."""

    status: dict[str, Any]
    workflow: dict[str, Any] | None = None
    retry: bool = False  # the store could not be reached: decide again later


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str, ok: bool | None, reason: str,
                   message: str, generation: int) -> list[dict[str, Any]]:
    """The condition list with `type_` set; its transition time moves only when its status changes."""
    status = "Unknown" if ok is None else "True" if ok else "False"
    kept = [dict(c) for c in conditions or [] if c.get("type") != type_]
    previous = next((c for c in conditions or [] if c.get("type") == type_), None)
    since = previous["lastTransitionTime"] if previous and previous.get("status") == status else now()
    kept.append({"type": type_, "status": status, "reason": reason, "message": message,
                 "lastTransitionTime": since, "observedGeneration": generation})
    return sorted(kept, key=lambda c: ["Valid", "Planned", "Complete"].index(c["type"])
                  if c["type"] in ("Valid", "Planned", "Complete") else 99)


def workflow_name(sweep: SweepObject) -> str:
    """One Workflow per spec generation; at most 63 characters (Argo puts it in a label)."""
    name = f"{sweep.name}-{sweep.generation}"
    return name if len(name) <= 63 else f"{sweep.name[:44].rstrip('-')}-{sweep.uid[:8]}-{sweep.generation}"


def decide(sweep: SweepObject, settings: OperatorSettings,
           opener: Callable[[str], ResultStore] = open_store, nodes: Sequence[Node] | None = None) -> Decision:
    """Validate, plan against the store, and say what the Sweep's status and Workflow should be.

    `nodes` (None: not known) lets a Sweep whose cells no node can run fail now, not Pending until
    its pods' deadline.
    """
    conditions = list(sweep.status.get("conditions") or [])
    base: dict[str, Any] = {"observedGeneration": sweep.generation, "workflow": None, "startedAt": None,
                            "finishedAt": None, "report": None}
    if len(sweep.name) > MAX_SWEEP_NAME:  # the CRD refuses it; one an older CRD let in fails once, for good
        return _invalid(sweep, base, conditions, f"Sweep {sweep.name[:MAX_SWEEP_NAME]}...: metadata.name has "
                                                 f"{len(sweep.name)} characters, more than the {MAX_SWEEP_NAME} a "
                                                 "label holds; apply it under a shorter name")
    try:
        spec, run = sweep_from_resource(dict(sweep.spec), sweep.name, store_name(sweep.namespace, sweep.name))
    except SpecError as exc:
        return _invalid(sweep, base, conditions, str(exc))
    refused = settings.refusal(sweep.name, run)
    if refused is not None:
        return _invalid(sweep, base, conditions, refused)
    conditions = with_condition(conditions, "Valid", True, "SpecValid", "", sweep.generation)
    store_url = run.store or settings.store
    # The Sweep's namespace's folder of the store, as its Workflow's pods derive it themselves from
    # their own namespace and the base URL passed to them (namespace_store, on both sides).
    base |= {"sweep": spec.name, "store": namespace_store(store_url, sweep.namespace)}
    try:
        store = opener(base["store"])
        # An edited Sweep (a later generation) re-plans on purpose: its new cells run, stored ones are reused.
        # Counted a stored chunk at a time: the operator's memory does not grow with the Sweep.
        plan = plan_counts(spec, store, revise=sweep.generation > 1,
                           check=None if nodes is None else lambda cells: unplaceable_cells(cells, nodes))
    except SpecError as exc:  # e.g. a trace that is not on the operator's trace path
        return _invalid(sweep, base, conditions, str(exc))
    except StoreUnavailable as exc:
        message = f"{exc} (retrying)"
        return Decision(status={**base, "phase": "Pending", "message": message, "cells": None,
                                "conditions": with_condition(conditions, "Planned", None, "StoreUnavailable", message,
                                                             sweep.generation)},
                        retry=True)
    except StoreError as exc:
        message = str(exc)
        return Decision(status={**base, "phase": "Failed", "message": message, "cells": None, "conditions":
                                with_condition(conditions, "Planned", False, "StoreError", message, sweep.generation)})
    # With adaptive repetitions, the runs wanted so far (later rounds of the workflow add to them).
    cells = CellCounts(total=plan.wanted, cached=plan.cached).model_dump()
    planned = f"{plan.wanted} cells, {plan.cached} already stored, {plan.pending} to run" + (
        f", up to {plan.rounds} rounds of adaptive repetitions" if plan.rounds > 1 else "")
    conditions = with_condition(conditions, "Planned", True, "Planned", planned, sweep.generation)
    if not plan.pending and store.has_sweep_file(spec.name, REPORT_FILE):
        stamp = now()
        report = store.sweep_file_location(spec.name, REPORT_FILE)
        return Decision(status={**base, "phase": "Succeeded", "cells": cells, "startedAt": stamp, "finishedAt": stamp,
                                "report": report, "message": "every cell was already stored",
                                "conditions": with_condition(conditions, "Complete", True, "AllCellsCached",
                                                             "every cell was already stored", sweep.generation)})
    unrunnable = plan.unplaceable
    if unrunnable is not None:
        return Decision(status={**base, "phase": "Failed", "cells": cells, "message": unrunnable, "conditions":
                                with_condition(conditions, "Planned", False, "NoNodeOffers", unrunnable,
                                               sweep.generation)})
    workflow = desired_workflow(sweep, spec, run, settings, store_url, plan)
    name = workflow["metadata"]["name"]
    return Decision(
        status={**base, "phase": "Pending", "cells": cells, "workflow": name, "message": f"{planned}: workflow {name}",
                "conditions": with_condition(conditions, "Complete", False, "WorkflowCreated",
                                             f"workflow {name} created", sweep.generation)},
        workflow=workflow)


def _invalid(sweep: SweepObject, base: dict[str, Any], conditions: list[Any], message: str) -> Decision:
    return Decision(status={**base, "phase": "Invalid", "message": message, "cells": None, "conditions":
                            with_condition(conditions, "Valid", False, "InvalidSpec", message, sweep.generation)})


def desired_workflow(sweep: SweepObject, spec: SweepSpec, run: RunSettings, settings: OperatorSettings,
                     store_url: str, plan: PlanCounts | None = None) -> dict[str, Any]:
    """The Argo Workflow running `spec`: the chart's sweep template, owned by the Sweep.

    The spec travels resolved (includes and defaults already merged), so the plan step in the
    pod needs no preset files; it finds the operator's stored plan for that spec and reads it.
    `store_url` is the base the pods get: each opens its namespace's folder of it, where the
    operator planned (storeurls.namespace_store).
    A sweep with more cells to run than a chunk runs one Workflow per chunk (the template's
    `chunk` step, all at once): run.parallelism is then shared out among them.
    """
    parameters = {"spec-yaml": yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False),
                  "sweep": spec.name, "store": store_url}
    threshold = run.lateness_threshold_us
    optional = {"image": run.image, "cell-cpu": run.cell_cpu, "pushgateway": run.pushgateway,
                "lateness-threshold-us": None if threshold is None else f"{threshold:.12g}"}
    parameters |= {k: v for k, v in optional.items() if v is not None}
    body: dict[str, Any] = {
        "apiVersion": ARGO_API_VERSION,
        "kind": "Workflow",
        "metadata": {
            "name": workflow_name(sweep),
            "namespace": sweep.namespace,
            "labels": {**MANAGED_BY, OWNER_LABEL: sweep.name, GENERATION_LABEL: str(sweep.generation),
                       "ccsweep.io/sweep": spec.name},
            # Deleting the Sweep deletes this Workflow (garbage collector), which deletes its pods.
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": sweep.name, "uid": sweep.uid,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "workflowTemplateRef": {"name": settings.workflow_template},
            "arguments": {"parameters": [{"name": k, "value": v} for k, v in parameters.items()]},
        },
    }
    if run.parallelism is not None:
        body["spec"]["parallelism"] = run.parallelism
        chunks = plan.chunks if plan else 0
        if chunks:
            share = chunk_parallelism(run.parallelism, chunks)
            body["spec"]["arguments"]["parameters"].append({"name": "chunk-parallelism", "value": str(share)})
    return body


def report_location(store_url: str, sweep: str, opener: Callable[[str], ResultStore] = open_store) -> str:
    """Where the sweep's HTML report is, as the store names it (a path, or an s3:// URL)."""
    try:
        return opener(store_url).sweep_file_location(sweep, REPORT_FILE)
    except StoreError:  # e.g. no S3 settings in this process: the URL still says where
        try:
            return f"{store_url.rstrip('/')}/{sweep_file_key(sweep, REPORT_FILE)}"
        except StoreError:  # no sweep name (yet): the store is all there is to say
            return store_url


def owner_of(workflow: Mapping[str, Any]) -> str | None:
    """The name of the Sweep that controls a Workflow, from its ownerReferences."""
    for ref in workflow.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION and ref.get("controller"):
            return ref.get("name")
    return None


class UnreadableStatus(ValueError):
    """A Workflow status the operator will not read (too large when packed or unpacked, or not gzip
    and base64 of JSON); str() is one line saying which bound it passed."""


#: The most base64 text of `status.compressedNodes` read. Argo fails a Workflow whose packed status
#: passes its 1 MiB maxWorkflowSize, and etcd stores no object over 1.5 MiB, so only a status that
#: Argo did not write comes near this.
MAX_COMPRESSED_NODES = 2 << 20
#: The most JSON the nodes may unpack to. A 500-cell chunk, each cell with a Retry node and up to
#: three Pod nodes of about 650 bytes, holds some 1.6 MB; parsed, JSON takes about five times its
#: size in Python objects, so 16 MiB stays within the operator's 768 Mi beside a planning child.
MAX_NODES_JSON = 16 << 20


def unpack_nodes(packed: str) -> bytes:
    """The JSON text of `status.compressedNodes`, unpacked a step at a time and never past
    MAX_NODES_JSON: Argo's Workflow has no status subresource, so whoever may create a Workflow
    writes this field as they like, and 1.4 MB of it unpack to 1 GiB (UnreadableStatus)."""
    if len(packed) > MAX_COMPRESSED_NODES:
        raise UnreadableStatus(f"status.compressedNodes has {len(packed)} characters, more than the "
                               f"{MAX_COMPRESSED_NODES} Argo writes")
    try:
        data = base64.b64decode(packed, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnreadableStatus(f"status.compressedNodes is not base64: {exc}") from exc
    try:
        return gunzip(data, MAX_NODES_JSON)
    except TooLarge:
        raise UnreadableStatus(f"status.compressedNodes unpacks to more than {MAX_NODES_JSON >> 20} MiB, "
                               "more than any Workflow of the operator's holds") from None
    except NotGzip as exc:
        raise UnreadableStatus(f"status.compressedNodes is {exc}") from None


#: A chunk Workflow's name: the chunk step's generateName and Argo's random suffix (ccsweep-sweep.yaml).
CHUNK_NAME = re.compile(r"^ccsweep-chunk-[a-z0-9]{1,16}$")


def distrust(sweep: SweepObject, workflow: Mapping[str, Any]) -> str | None:
    """Why `workflow` is not a Workflow the operator created for `sweep` (one line), or None.

    Whoever may create Workflows may set the label the operator follows and an owner reference to
    any Sweep, so both are checked against the operator's own records of the Sweep before anything
    of the Workflow's status is read: the controller reference must carry the Sweep's uid, the
    labels its name and store name, and the name must be the one `workflow_name` gives the
    generation the Workflow's label names.
    """
    meta = workflow.get("metadata") or {}
    name, labels = meta.get("name"), meta.get("labels") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if [(r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid")) for r in refs] != [
            (API_VERSION, KIND, sweep.name, sweep.uid)]:
        return f"workflow {name}: its owner reference is not Sweep {sweep.name} uid {sweep.uid}: ignored"
    generation = str(labels.get(GENERATION_LABEL) or "")
    if labels.get(OWNER_LABEL) != sweep.name or not generation.isdigit() or int(generation) > sweep.generation:
        return f"workflow {name}: its labels {OWNER_LABEL} and {GENERATION_LABEL} do not name this Sweep: ignored"
    if name != workflow_name(replace(sweep, generation=int(generation))):
        return f"workflow {name}: not the name the operator gives generation {generation} of this Sweep: ignored"
    if name == sweep.status.get("workflow") and labels.get("ccsweep.io/sweep") != sweep.status.get("sweep"):
        return f"workflow {name}: its label ccsweep.io/sweep is not the Sweep's store name: ignored"
    return None


def chunk_distrust(parent: Mapping[str, Any], chunk: Mapping[str, Any]) -> str | None:
    """Why `chunk` is not a chunk Workflow that `parent`'s chunk step created (one line), or None:
    its owner reference must carry the parent's uid, its name the chunk step's form and its labels
    the parent's name and a chunk number."""
    parent_meta, meta = parent.get("metadata") or {}, chunk.get("metadata") or {}
    labels = meta.get("labels") or {}
    owned = any(r.get("apiVersion") == ARGO_API_VERSION and r.get("kind") == "Workflow"
                and r.get("uid") == parent_meta.get("uid") and r.get("name") == parent_meta.get("name")
                for r in meta.get("ownerReferences") or [])
    if not (owned and CHUNK_NAME.match(str(meta.get("name") or ""))
            and labels.get(CHUNK_PARENT_LABEL) == parent_meta.get("name")
            and str(labels.get("ccsweep.io/chunk") or "").isdigit()):
        return (f"workflow {meta.get('name')}: not a chunk of workflow {parent_meta.get('name')} "
                f"(owner uid, name or labels differ): ignored")
    return None


def workflow_nodes(status: Mapping[str, Any]) -> dict[str, Any]:
    """A Workflow's nodes, also when Argo keeps them compressed (`status.compressedNodes`: gzip and
    base64 of the nodes' JSON), as it does once the status grows large (a 390-cell sweep)."""
    if status.get("compressedNodes"):
        text = unpack_nodes(str(status["compressedNodes"]))
        try:
            nodes = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UnreadableStatus(f"status.compressedNodes is not JSON: {exc}") from exc
    else:
        nodes = status.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise UnreadableStatus("the Workflow's nodes are not an object")
    return {key: node for key, node in nodes.items() if isinstance(node, dict)}


def cell_phases(workflow: Mapping[str, Any]) -> dict[str, str]:
    """Each cell's Argo phase, by cell id: its Retry node's (the outcome after retries), else its Pod's.

    A cell runs from the template of its link backend (its descriptor's pod_template), so every one counts."""
    best: dict[str, tuple[int, str]] = {}
    templates = {link.pod_template for link in LINKS.values()}
    for node in workflow_nodes(workflow.get("status") or {}).values():
        if ((node.get("templateRef") or {}).get("template") or node.get("templateName")) not in templates:
            continue
        params = {p.get("name"): p.get("value") for p in (node.get("inputs") or {}).get("parameters") or []}
        cell_id = params.get("id")
        rank = {"Retry": 2, "Pod": 1}.get(node.get("type", ""), 0)
        if cell_id and rank and rank >= best.get(cell_id, (0, ""))[0]:
            best[cell_id] = (rank, node.get("phase") or "Pending")
    return {cell_id: phase for cell_id, (_, phase) in best.items()}


def has_chunks(workflow: Mapping[str, Any]) -> bool:
    """Whether a sweep's Workflow runs its cells in chunk Workflows (its `chunk` step made a pod)."""
    return any(node.get("type") == "Pod" and node.get("templateName") == "chunk"
               for node in workflow_nodes(workflow.get("status") or {}).values())


def sweep_cell_phases(workflow: Mapping[str, Any], chunks: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """The Argo phase of every cell of a sweep: in its Workflow, and in its chunk Workflows if any."""
    return [phase for w in (workflow, *chunks) for phase in cell_phases(w).values()]


def failure_budget(sweep: SweepObject) -> int | None:
    """The Sweep's run.max_failed_cells, or None (no budget, or a spec the API server let through unchecked)."""
    budget = (sweep.spec.get("run") or {}).get("max_failed_cells")
    return budget if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 0 else None


def over_budget(sweep: SweepObject, failed: int) -> str | None:
    """Why the sweep must stop (one line), when more cells failed than its budget allows; else None."""
    budget = failure_budget(sweep)
    if budget is None or failed <= budget:
        return None
    return f"{failed} cells failed, more than run.max_failed_cells {budget}: the remaining cells were not run"


def stop_patch(sweep: SweepObject, workflow: Mapping[str, Any],
               chunks: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
    """The Workflow merge patch that stops its fan-out once the failure budget is spent; else None.

    A broken image would otherwise fail every cell, each after its retries. `shutdown: Stop` makes
    Argo start no new pods, stop running ones and still run exit handlers; cells already stored stay.
    A sweep run in chunk Workflows counts the cells of all of them (each gets the same patch).
    """
    if sweep.status.get("workflow") != workflow.get("metadata", {}).get("name"):
        return None
    if (workflow.get("spec") or {}).get("shutdown") or (workflow.get("status") or {}).get("phase") in (
            "Succeeded", "Failed", "Error"):
        return None
    failed = sum(p in ("Failed", "Error") for p in sweep_cell_phases(workflow, chunks))
    return {"spec": {"shutdown": "Stop"}} if over_budget(sweep, failed) else None


def follow(sweep: SweepObject, workflow: Mapping[str, Any], deleted: bool = False,
           opener: Callable[[str], ResultStore] = open_store,
           chunks: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
    """The Sweep's status patch after a change of its Workflow, or None when there is nothing to say.

    Only the Workflow the status names counts: an older generation's Workflow being deleted
    after a spec change says nothing about the new one. A large sweep's cells run in chunk
    Workflows (`chunks`, those labelled with the Workflow's name): their cells are counted too.
    """
    status = sweep.status
    name = workflow.get("metadata", {}).get("name")
    if not name or status.get("workflow") != name or status.get("phase") in ("Invalid",):
        return None
    wf_status = workflow.get("status") or {}
    phase = WORKFLOW_PHASES.get(wf_status.get("phase") or "", "Running")
    phases = sweep_cell_phases(workflow, chunks)
    running = sum(p in ("Pending", "Running") for p in phases)
    if phase == "Pending" and running:
        phase = "Running"
    cells = {**(status.get("cells") or {}), "running": running,
             "done": sum(p == "Succeeded" for p in phases),
             "failed": sum(p in ("Failed", "Error") for p in phases)}
    # Adaptive repetitions: later rounds run cells the first plan did not count; the total takes them in.
    cells["total"] = max(int(cells.get("total") or 0), int(cells.get("cached") or 0) + len(phases))
    patch: dict[str, Any] = {"phase": phase, "cells": cells, "startedAt": wf_status.get("startedAt") or None,
                             "finishedAt": wf_status.get("finishedAt") or None}
    generation = int(status.get("observedGeneration") or 0)
    conditions = list(status.get("conditions") or [])
    if deleted and phase not in FINISHED:
        message = f"workflow {name} was deleted before it finished"
        return {**patch, "phase": "Failed", "cells": {**cells, "running": 0},
                "finishedAt": patch["finishedAt"] or now(), "message": message,
                "conditions": with_condition(conditions, "Complete", False, "WorkflowDeleted", message, generation)}
    if deleted:
        return None  # a finished Workflow removed later (its TTL) changes nothing
    exhausted = over_budget(sweep, cells["failed"])
    if exhausted:  # stopping or stopped for it: say that, not Argo's "Stopped with strategy 'Stop'"
        return {**patch, "phase": "Failed", "message": exhausted, "conditions": with_condition(
            conditions, "Complete", False, "FailureBudgetExceeded", exhausted, generation)}
    if phase == "Succeeded":
        report = report_location(status.get("store") or "", status.get("sweep") or "", opener)
        message = f"{cells['done']} cells run, {cells.get('cached', 0)} were already stored"
        patch |= {"report": report, "message": message,
                  "conditions": with_condition(conditions, "Complete", True, "WorkflowSucceeded", message, generation)}
    elif phase == "Failed":
        reason = "WorkflowError" if wf_status.get("phase") == "Error" else "WorkflowFailed"
        message = (wf_status.get("message") or f"workflow {name} {wf_status.get('phase', '').lower()}").splitlines()[0]
        if cells["failed"]:
            message = f"{cells['failed']} cells failed: {message}"
        patch |= {"message": message,
                  "conditions": with_condition(conditions, "Complete", False, reason, message, generation)}
    else:
        message = f"{running} cells running, {cells['done']} done, {cells['failed']} failed"
        patch |= {"message": message,
                  "conditions": with_condition(conditions, "Complete", False, "WorkflowRunning", message, generation)}
    return patch


@dataclass
class Observation:
    """What one change of a Workflow asks of the operator: a status patch for its Sweep, a merge
    patch stopping it and its chunks, and warnings (reason, message) to post as events on the Sweep."""

    status: dict[str, Any] | None = None
    stop: dict[str, Any] | None = None
    chunks: list[str] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def observe(sweep: SweepObject, workflow: Mapping[str, Any], deleted: bool,
            list_chunks: Callable[[str], Sequence[Mapping[str, Any]]],
            opener: Callable[[str], ResultStore] = open_store) -> Observation:
    """`follow` and `stop_patch` for a Workflow that says `sweep` owns it, when the operator created it.

    A Workflow the operator did not create is ignored with a warning, its status unread; chunk
    Workflows (`list_chunks(parent name)`) likewise. A status past the unpacking bounds
    (UnreadableStatus) is a warning and a condition on the Sweep, never an exception: the
    operator goes on serving every other Sweep, and after a restart reads the same Workflow the
    same way.
    """
    problem = distrust(sweep, workflow)
    if problem is not None:
        return Observation(warnings=[("UntrustedWorkflow", problem)])
    name = str(workflow["metadata"]["name"])
    seen = Observation()
    try:
        chunks = []
        for chunk in list_chunks(name) if has_chunks(workflow) else ():
            why = chunk_distrust(workflow, chunk)
            if why is None:
                chunks.append(chunk)
            else:
                seen.warnings.append(("UntrustedWorkflow", why))
        seen.stop = None if deleted else stop_patch(sweep, workflow, chunks)
        seen.chunks = [str(c["metadata"]["name"]) for c in chunks]
        seen.status = follow(sweep, workflow, deleted=deleted, opener=opener, chunks=chunks)
    except UnreadableStatus as exc:
        message = f"workflow {name}: {exc}; its cells are not counted"
        seen.warnings.append(("WorkflowStatusUnreadable", message))
        if sweep.status.get("workflow") == name:
            seen.status = {"message": message, "conditions": with_condition(
                sweep.status.get("conditions"), "Complete", None, "WorkflowStatusUnreadable", message,
                int(sweep.status.get("observedGeneration") or sweep.generation))}
        seen.stop = None
    return seen
