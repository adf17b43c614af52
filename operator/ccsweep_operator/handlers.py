"""kopf handlers: thin glue between events and the decisions in `reconcile`.

Run with `kopf run --standalone --namespace NS -m ccsweep_operator.handlers` (the chart does).
kopf keeps its bookkeeping in `ccsweep.io/` annotations, not in the status (the CRD's status
schema is the operator's own), and adds no finalizer: deleting a Sweep never waits for the
operator, and the garbage collector removes its Workflow through ownerReferences.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from ccsweep.crd import GROUP, PLURAL, VERSION
from ccsweep_operator import kube
from ccsweep_operator.reconcile import (
    FINISHED,
    MANAGED_BY,
    OperatorSettings,
    SweepObject,
    decide,
    follow,
    owner_of,
    stop_patch,
)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING  # Events for problems only; the status tells the rest
    # No cluster-wide scanning of namespaces and CRDs: the operator's Role is namespaced. The
    # resources it serves are resolved once, so wait here until both are there.
    settings.scanning.disabled = True
    kube.load_config()
    kube.wait_for_resources()


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile_sweep(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """A new or changed spec: validate, plan, and start a Workflow for the cells not stored."""
    sweep = SweepObject.from_body(body)
    decision = decide(sweep, OperatorSettings.from_env(), nodes=kube.list_nodes())
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


@kopf.on.event(kube.ARGO_GROUP, kube.ARGO_API_VERSION, kube.WORKFLOWS, labels=MANAGED_BY)
def follow_workflow(event: kopf.RawEvent, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """Every change of a Workflow the operator made updates its Sweep's status."""
    owner = owner_of(body)
    if owner is None:
        return
    current = kube.get_sweep(body["metadata"]["namespace"], owner)
    if current is None:
        return  # the Sweep is being deleted: the garbage collector takes the Workflow with it
    sweep = SweepObject.from_body(current)
    stop = None if event.get("type") == "DELETED" else stop_patch(sweep, body)
    if stop is not None and kube.patch_workflow(sweep.namespace, body["metadata"]["name"], stop):
        logger.warning(f"sweep {owner}: failure budget spent, workflow {body['metadata']['name']} stopped")
    patch = follow(sweep, body, deleted=event.get("type") == "DELETED")
    if patch is None or all(sweep.status.get(k) == v for k, v in patch.items()):
        return
    if kube.patch_status(sweep.namespace, owner, patch):
        logger.debug(f"sweep {owner}: {patch['phase']}: {patch.get('message')}")
