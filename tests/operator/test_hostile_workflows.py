"""Workflows the operator did not create, and statuses it must not unpack whole (issue 39, item 1).

Whoever may create Workflows in the namespace may set the label the operator follows, an owner
reference to any Sweep, and (Argo's Workflow has no status subresource) any status. These tests
need no cluster: `reconcile.observe` is what the handler runs for every Workflow event; the
handler only posts its warnings as events and applies its patches. The bomb is a real gzip stream
of 1 GiB, run through the handler's code in a child process capped as the operator's pod is.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from ccsweep_operator.reconcile import (
    MAX_COMPRESSED_NODES,
    MAX_NODES_JSON,
    Observation,
    SweepObject,
    UnreadableStatus,
    observe,
    unpack_nodes,
    workflow_name,
)

REPO = Path(__file__).resolve().parents[2]
UID = "0d6c1f3e-9a57-4b3e-8f43-5c7e3f1b2a90"
STORED_AS = "lab-quick-e2e-0123456789ab"
#: The operator pod's memory limit (charts/ccsweep values: operator.resources.limits.memory).
OPERATOR_LIMIT_MIB = 768


def sweep(generation: int = 1) -> SweepObject:
    """A Sweep as the operator left it after creating the Workflow of `generation`."""
    return SweepObject(name="quick-e2e", namespace="lab", uid=UID, generation=generation, spec={},
                       status={"observedGeneration": generation, "workflow": f"quick-e2e-{generation}",
                               "sweep": STORED_AS, "phase": "Running", "cells": {"total": 2, "cached": 0}})


def cell_node(cell_id: str, phase: str) -> dict[str, Any]:
    return {"id": f"{cell_id}-pod", "type": "Pod", "phase": phase, "templateName": "cell",
            "inputs": {"parameters": [{"name": "id", "value": cell_id}]}}


def created(owner: SweepObject, generation: int = 1, **status: Any) -> dict[str, Any]:
    """A Workflow as the operator creates it (reconcile.desired_workflow's metadata), with a status."""
    return {"metadata": {
        "name": workflow_name(owner), "namespace": "lab", "uid": "wf-uid-1",
        "labels": {"app.kubernetes.io/managed-by": "ccsweep-operator", "ccsweep.io/owner": owner.name,
                   "ccsweep.io/generation": str(generation), "ccsweep.io/sweep": STORED_AS},
        "ownerReferences": [{"apiVersion": "ccsweep.io/v1alpha1", "kind": "Sweep", "name": owner.name,
                             "uid": owner.uid, "controller": True, "blockOwnerDeletion": True}]},
        "status": {"phase": "Running", **status}}


def packed(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data)).decode()


def no_chunks(parent: str) -> list[dict[str, Any]]:
    raise AssertionError(f"chunks of {parent} listed: only a sweep with a chunk step lists them")


@pytest.fixture(scope="module")
def bomb() -> str:
    """A gzip stream of 1 GiB of JSON whitespace (1.0 MiB packed), as base64. A MiB is deflated once,
    ending in a full flush (which resets the compressor's state), so that block, repeated 1024
    times, is the deflate stream of 1 GiB: built in seconds, never held unpacked."""
    spaces = b" " * (1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = packer.compress(spaces) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(1024):
        crc = zlib.crc32(spaces, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, no time
    compressed = header + block * 1024 + packer.flush() + struct.pack("<II", crc, (1 << 30) & 0xFFFFFFFF)
    assert len(compressed) < 1100 << 10
    return base64.b64encode(compressed).decode()


CHILD = """
import json, resource, sys
limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from ccsweep_operator.reconcile import SweepObject, observe
request = json.load(open(sys.argv[2]))
seen = observe(SweepObject(**request["sweep"]), request["workflow"], False, lambda parent: [])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"warnings": seen.warnings, "status": seen.status, "stop": seen.stop,
                  "peak_kib": int(peak.split()[1])}))
"""


def test_a_compressed_status_bomb_is_a_warning_within_the_operators_memory(tmp_path: Path, bomb: str):
    """The issue's reproduction: the old gzip.decompress of this field raised MemoryError in a
    process capped at 768 MiB. The handler's code now stops at MAX_NODES_JSON and says so."""
    owner = sweep()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"sweep": owner.__dict__, "workflow": created(owner, compressedNodes=bomb)}))
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'operator'}:{REPO / 'src'}"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(OPERATOR_LIMIT_MIB), str(request)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert [reason for reason, _ in seen["warnings"]] == ["WorkflowStatusUnreadable"]
    assert f"more than {MAX_NODES_JSON >> 20} MiB" in seen["warnings"][0][1]
    (condition,) = [c for c in seen["status"]["conditions"] if c["type"] == "Complete"]
    assert (condition["status"], condition["reason"]) == ("Unknown", "WorkflowStatusUnreadable")
    assert seen["stop"] is None
    # This process's own peak (VmHWM: ru_maxrss would carry the forking parent's); 59 MiB measured.
    assert seen["peak_kib"] < 160 << 10, seen["peak_kib"]


@pytest.mark.parametrize(("change", "why"), [
    (lambda wf: wf["metadata"]["ownerReferences"][0].update(uid="forged-uid"), "owner reference"),
    (lambda wf: wf["metadata"]["ownerReferences"][0].update(name="other"), "owner reference"),
    (lambda wf: wf["metadata"]["ownerReferences"].append({**wf["metadata"]["ownerReferences"][0], "name": "b"}),
     "owner reference"),
    (lambda wf: wf["metadata"].update(name="quick-e2e-evil"), "not the name"),
    (lambda wf: wf["metadata"]["labels"].update({"ccsweep.io/owner": "other"}), "labels"),
    (lambda wf: wf["metadata"]["labels"].update({"ccsweep.io/generation": "9"}), "labels"),
    (lambda wf: wf["metadata"]["labels"].update({"ccsweep.io/sweep": "victim"}), "store name"),
])
def test_a_forged_workflow_is_ignored_with_a_warning_and_its_status_unread(change: Any, why: str):
    owner = sweep()
    forged = created(owner, compressedNodes="not base64: reading it would be a different warning")
    change(forged)
    seen = observe(owner, forged, False, no_chunks)
    assert seen.status is None and seen.stop is None
    assert [reason for reason, _ in seen.warnings] == ["UntrustedWorkflow"]
    assert why in seen.warnings[0][1]


def test_the_operators_own_workflow_is_counted_and_an_earlier_generations_is_quietly_passed_over():
    owner = sweep(generation=2)
    nodes = [cell_node("a", "Succeeded"), cell_node("b", "Running")]
    current = created(owner, generation=2, compressedNodes=packed(json.dumps({n["id"]: n for n in nodes}).encode()))
    seen = observe(owner, current, False, no_chunks)
    assert seen.warnings == []
    assert seen.status is not None and seen.status["cells"]["done"] == 1 and seen.status["cells"]["running"] == 1
    earlier = created(sweep(generation=1), generation=1)
    assert observe(owner, earlier, False, no_chunks) == Observation()


def test_a_forged_chunk_is_not_counted():
    owner = sweep()
    nodes = {"chunk": {"id": "chunk", "type": "Pod", "templateName": "chunk", "phase": "Running"}}
    parent = created(owner, nodes=nodes)
    chunk_nodes = {n["id"]: n for n in (cell_node("a", "Succeeded"),)}

    def chunk(name: str, uid: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "lab",
                             "labels": {"ccsweep.io/parent": parent["metadata"]["name"], "ccsweep.io/chunk": "0"},
                             "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                                                  "name": parent["metadata"]["name"], "uid": uid}]},
                "status": {"phase": "Running", "nodes": chunk_nodes}}

    chunks = [chunk("ccsweep-chunk-x7k2p", "wf-uid-1"), chunk("ccsweep-chunk-evil1", "forged-uid"),
              chunk("my-own-chunk", "wf-uid-1")]
    seen = observe(owner, parent, False, lambda name: chunks)
    assert [reason for reason, _ in seen.warnings] == ["UntrustedWorkflow", "UntrustedWorkflow"]
    assert seen.chunks == ["ccsweep-chunk-x7k2p"]
    assert seen.status is not None and seen.status["cells"]["done"] == 1


def test_unpacking_is_bounded_before_and_after_gzip():
    nodes = json.dumps({"a": cell_node("a", "Running")}).encode()
    assert unpack_nodes(packed(nodes)) == nodes
    with pytest.raises(UnreadableStatus, match="characters"):
        unpack_nodes("A" * (MAX_COMPRESSED_NODES + 4))
    with pytest.raises(UnreadableStatus, match="more than 16 MiB"):
        unpack_nodes(packed(b" " * (MAX_NODES_JSON + 1)))
    with pytest.raises(UnreadableStatus, match="not gzip"):
        unpack_nodes(base64.b64encode(b"plain text, not gzip").decode())
    with pytest.raises(UnreadableStatus, match="one whole gzip stream"):
        unpack_nodes(base64.b64encode(gzip.compress(nodes) + gzip.compress(nodes)).decode())
    with pytest.raises(UnreadableStatus, match="one whole gzip stream"):
        unpack_nodes(base64.b64encode(gzip.compress(nodes)[:-8]).decode())


def test_the_child_really_is_capped():
    """The bomb test's cap holds: the same child allocating past it fails (so a pass above is the bound's)."""
    code = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({OPERATOR_LIMIT_MIB} << 20,) * 2); "
            "b = bytearray(1 << 30)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "MemoryError" in done.stderr
