"""kopf handlers: thin glue between events and the decisions in `reconcile`.

Run with `kopf run --standalone --namespace NS -m ccsweep_operator.handlers` (the chart does).
kopf keeps its bookkeeping in `ccsweep.io/` annotations, not in the status (the CRD's status
schema is the operator's own), and adds no finalizer: deleting a Sweep never waits for the
operator, and the garbage collector removes its Workflow through ownerReferences.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, cast

import kopf

from ccsweep.crd import GROUP, PLURAL, VERSION
from ccsweep_operator import kube
from ccsweep_operator.planworker import PlanBounds, decide_bounded
from ccsweep_operator.reconcile import (
    ARGO_GROUP,
    ARGO_VERSION,
    CHUNK_PARENT_LABEL,
    FINISHED,
    MANAGED_BY,
    WORKFLOWS,
    SweepObject,
    observe,
    owner_of,
)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING  # Events for problems only; the status tells the rest
    # No cluster-wide scanning of namespaces and CRDs: the operator's Role is namespaced. The
    # resources it serves are resolved once, so wait here until both are there.
    settings.scanning.disabled = True
    PlanBounds.from_env()  # a bad bound stops the operator here, with its one line, not at the first Sweep
    kube.load_config()
    kube.wait_for_resources()


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile_sweep(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """A new or changed spec: validate, plan, and start a Workflow for the cells not stored.

    Planning runs in a bounded child process (planworker): a Sweep too big to plan fails alone,
    and never takes the operator, and with it every other Sweep, down."""
    sweep = SweepObject.from_body(body)
    decision = decide_bounded(sweep, kube.list_nodes(), PlanBounds.from_env())
    kube.apply(decision, sweep.namespace, sweep.name)
    if decision.retry:
        raise kopf.TemporaryError(decision.status["message"], delay=30)
    logger.info(f"{decision.status['phase']}: {decision.status.get('message')}")


@kopf.on.resume(GROUP, VERSION, PLURAL)
def resume_sweep(body: kopf.Body, logger: kopf.Logger, **kwargs: Any) -> None:
    """After an operator restart: reconcile only what was not handled for this generation."""
    sweep = SweepObject.from_body(body)
    if sweep.status.get("observedGeneration") == sweep.generation and (
            sweep.status.get("phase") in FINISHED or sweep.status.get("workflow")):
        return
    reconcile_sweep(body=body, logger=logger, **kwargs)


@kopf.on.event(ARGO_GROUP, ARGO_VERSION, WORKFLOWS, labels=MANAGED_BY)
def follow_workflow(event: kopf.RawEvent, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """Every change of a Workflow the operator made updates its Sweep's status."""
    update_sweep(body, event.get("type") == "DELETED", logger)


#: When each sweep Workflow's chunks were last counted, by namespace/name (follow_chunk).
_chunks_counted: dict[str, float] = {}
CHUNK_COUNT_INTERVAL_S = 2.0


@kopf.on.event(ARGO_GROUP, ARGO_VERSION, WORKFLOWS, labels={CHUNK_PARENT_LABEL: kopf.PRESENT})
def follow_chunk(event: kopf.RawEvent, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """A chunk Workflow of a large sweep changed: its sweep's Sweep counts the cells again, at most
    every CHUNK_COUNT_INTERVAL_S (a chunk of 500 pods changes many times a second) and whenever a
    chunk has finished."""
    if event.get("type") == "DELETED":
        return
    namespace, parent = body["metadata"]["namespace"], body["metadata"]["labels"][CHUNK_PARENT_LABEL]
    key, now = f"{namespace}/{parent}", time.monotonic()
    finished = (body.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Error")
    if not finished and now - _chunks_counted.get(key, 0.0) < CHUNK_COUNT_INTERVAL_S:
        return
    _chunks_counted[key] = now
    workflow = kube.get_workflow(namespace, parent)
    if workflow is not None and all(workflow["metadata"].get("labels", {}).get(k) == v for k, v in MANAGED_BY.items()):
        update_sweep(workflow, False, logger)


def update_sweep(workflow: Mapping[str, Any], deleted: bool, logger: kopf.Logger) -> None:
    """The Sweep owning `workflow` gets its status from it (and from its chunk Workflows, if any), and
    the Workflow is stopped once the Sweep's failure budget is spent. A Workflow the operator did not
    create, or whose status it will not read, is a warning event on the Sweep (reconcile.observe)."""
    owner = owner_of(workflow)
    if owner is None:
        return
    namespace, name = workflow["metadata"]["namespace"], workflow["metadata"]["name"]
    current = kube.get_sweep(namespace, owner)
    if current is None:
        return  # the Sweep is being deleted: the garbage collector takes the Workflow with it
    sweep = SweepObject.from_body(current)
    seen = observe(sweep, workflow, deleted, lambda parent: kube.list_workflows(namespace,
                                                                               f"{CHUNK_PARENT_LABEL}={parent}"))
    for reason, message in seen.warnings:
        kopf.warn(kopf.Body(cast(kopf.RawBody, current)), reason=reason, message=message)
        logger.warning(f"sweep {owner}: {message}")
    if seen.stop is not None and kube.patch_workflow(namespace, name, seen.stop):
        for chunk in seen.chunks:
            kube.patch_workflow(namespace, chunk, seen.stop)
        logger.warning(f"sweep {owner}: failure budget spent, workflow {name} stopped")
    patch = seen.status
    if patch is None or all(sweep.status.get(k) == v for k, v in patch.items()):
        return
    if kube.patch_status(sweep.namespace, owner, patch):
        logger.debug(f"sweep {owner}: {patch.get('phase')}: {patch.get('message')}")
