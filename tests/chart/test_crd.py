"""The Sweep CRD: generated from the pydantic models, committed in the chart, and as strict as they are.

Objects typed by the CRD (the Sweep examples, every preset as a Sweep) are validated offline
against the generated openAPIV3Schema the way the API server applies it: unknown fields are
errors (kubectl's strict field validation), `nullable` admits null. The real API server checks
the same CRD in tests/operator (it refuses non-structural schemas).
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ccsweep.crd import crd, render_crd, sweep_from_resource
from ccsweep.expand import expand
from ccsweep.spec import SpecError
from ccsweep.specload import load_spec

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "charts/ccsweep/files/crds/sweeps.ccsweep.io.yaml"
EXAMPLES = REPO / "operator/examples"


def openapi_to_jsonschema(node: Any) -> Any:
    """OpenAPI v3.0 as the API server reads it, in JSON Schema draft 4: nullable -> null allowed,
    objects closed unless x-kubernetes-preserve-unknown-fields."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: openapi_to_jsonschema(v) for k, v in node.items()
           if k not in ("nullable",) and not k.startswith("x-kubernetes-")}
    if isinstance(node.get("pattern"), str):
        # The API server's Go regexp (and pydantic's Rust regex) read \x{HHHH}; Python's re, which
        # jsonschema uses, reads the same character as \uHHHH.
        out["pattern"] = re.sub(r"\\x\{([0-9a-f]+)\}", lambda m: f"\\u{int(m.group(1), 16):04x}", node["pattern"])
    if "properties" in node:
        out["properties"] = {k: openapi_to_jsonschema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node:
            out["additionalProperties"] = False
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def sweep_validator() -> jsonschema.Draft4Validator:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    converted = openapi_to_jsonschema(schema)
    converted["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft4Validator(converted)


def schema_errors(obj: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in sweep_validator().iter_errors(obj)]


def as_sweep(spec: dict, name: str = "s") -> dict:
    return {"apiVersion": "ccsweep.io/v1alpha1", "kind": "Sweep", "metadata": {"name": name}, "spec": spec}


def test_committed_crd_is_the_generated_one():
    assert COMMITTED.read_text() == render_crd(), "regenerate: .venv/bin/ccsweep crd > " + str(COMMITTED)
    done = subprocess.run([sys.executable, "-m", "ccsweep", "crd", "--check", str(COMMITTED)], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_crd_check_fails_on_a_stale_copy(tmp_path: Path):
    stale = tmp_path / "crd.yaml"
    stale.write_text(render_crd().replace("maximum: 64", "maximum: 65"))
    done = subprocess.run([sys.executable, "-m", "ccsweep", "crd", "--check", str(stale)],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"ccsweep: error: {stale} differs from `ccsweep crd` "
                                   f"(regenerate: ccsweep crd > {stale})")


def walk(node: Any, path: str = ""):
    """Every schema node under `node` (CEL rules are not schemas: skipped)."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            if k != "x-kubernetes-validations":
                yield from walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def test_schema_is_structural_openapi_without_defaults():
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in walk(schema):
        if path.endswith(".properties"):
            continue  # a map of field names, not a schema
        assert not {"$ref", "$defs", "anyOf", "oneOf", "allOf", "prefixItems", "const", "title"} & node.keys(), path
        # Defaults would be filled in by the API server and then override the spec's `defaults` mapping.
        assert "default" not in node, path
        assert node.get("additionalProperties") is not False, path
        # Every node has a type, but one that keeps any value (a count or a mapping: the operator checks it).
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), \
            f"{path}: a structural schema types every node"
        if isinstance(node.get("exclusiveMinimum"), (int, float)) and node["exclusiveMinimum"] is not True:
            pytest.fail(f"{path}: exclusiveMinimum must be a boolean in OpenAPI v3.0")


def test_printer_columns_cover_phase_and_cell_counts():
    columns = {c["name"]: c["jsonPath"] for c in crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.phase"
    for name in ("Cells", "Cached", "Running", "Done", "Failed"):
        assert columns[name].startswith(".status.cells."), name


@pytest.mark.parametrize("preset", sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml")))
def test_every_preset_fits_the_crd(preset: str):
    """The schema never refuses a spec the model accepts: each preset, as a Sweep, validates."""
    spec = load_spec(preset).model_dump(mode="json", exclude_none=True)
    assert schema_errors(as_sweep(spec)) == []


def load_example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name / "sweep.yaml").read_text())


def test_examples_are_tested():
    """Every example has an expectation here and in tests/operator/test_examples.py."""
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == sorted(SCHEMA_VERDICTS)


SCHEMA_VERDICTS = {
    "quick": [],
    "defaults": [],
    "invalid-spec": [],  # well-formed field by field: the operator rejects it, not the schema
    "invalid-field": ["spec.experiments.0.loss_direction: 'sideways' is not one of ['uplink', 'downlink', 'both']"],
}


@pytest.mark.parametrize("name", sorted(SCHEMA_VERDICTS))
def test_example_against_the_schema(name: str):
    assert schema_errors(load_example(name)) == SCHEMA_VERDICTS[name]


@pytest.mark.parametrize("mutate, error", [
    (lambda s: s["experiments"][0].update(flows=65), "spec.experiments.0.flows: 65 is greater than the maximum of 64"),
    (lambda s: s["experiments"][0].update(duration_s=0),
     "spec.experiments.0.duration_s: 0 is less than or equal to the minimum of 0"),
    (lambda s: s["experiments"][0].update(rtt=[20]),
     "spec.experiments.0: Additional properties are not allowed ('rtt' was unexpected)"),
    (lambda s: s.update(defaults={"flow": 2}),
     "spec.defaults: Additional properties are not allowed ('flow' was unexpected)"),
    (lambda s: s["run"].update(cell_cpu="one"),
     "spec.run.cell_cpu: 'one' does not match '^([0-9]+m|[0-9]+(\\\\.[0-9]+)?)$'"),
])
def test_schema_refuses_what_the_model_refuses(mutate, error: str):
    sweep = copy.deepcopy(load_example("quick"))
    mutate(sweep["spec"])
    assert schema_errors(sweep) == [error]
    with pytest.raises(SpecError):
        sweep_from_resource(sweep["spec"], "quick")


def test_experiments_may_take_required_fields_from_defaults():
    example = load_example("defaults")
    assert schema_errors(example) == []
    spec, run = sweep_from_resource(example["spec"], example["metadata"]["name"])
    assert spec.name == "rtt-and-buffers"  # spec.name unset: the object's name
    assert run.parallelism == 4
    assert len({c.id for c in expand(spec)}) == 12


def test_resource_errors_are_one_line_naming_the_field():
    with pytest.raises(SpecError) as bad_run:
        sweep_from_resource({**load_example("quick")["spec"], "run": {"parallelism": 0}}, "quick")
    assert str(bad_run.value) == "Sweep quick: run.parallelism: Input should be greater than or equal to 1"
    with pytest.raises(SpecError) as bad_spec:
        sweep_from_resource(load_example("invalid-spec")["spec"], "invalid-spec")
    assert str(bad_spec.value) == "Sweep invalid-spec: experiments[warmup]: warmup_s 5.0 must be below duration_s 5.0"


def test_repetitions_is_a_count_or_an_adaptive_rule():
    """The issue's exact form passes the schema and the model; the schema keeps any value there (no
    structural type, and no CEL rule, covers both shapes) and the model refuses a wrong one in one line."""
    adaptive = {"min": 3, "max": 20, "target": {"ci_relative": 0.05}}
    spec = {**load_example("quick")["spec"]}
    spec["experiments"] = [{**e, "repetitions": adaptive} for e in spec["experiments"]]
    assert schema_errors(as_sweep(spec)) == []
    swept, _ = sweep_from_resource(spec, "quick")
    assert swept.experiments[0].max_runs == 20
    node = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "experiments"]["items"]["properties"]["repetitions"]
    assert node["x-kubernetes-preserve-unknown-fields"] is True and "x-kubernetes-validations" not in node
    with pytest.raises(SpecError, match=r"experiments\[loss\].repetitions: min 5 is above max 4"):
        sweep_from_resource({**spec, "experiments": [{**spec["experiments"][0], "repetitions": {
            "min": 5, "max": 4, "target": {"ci_relative": 0.05}}}]}, "quick")


def spec_schema_nodes():
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return [(path, node) for path, node in walk(schema) if not path.endswith(".properties")]


def test_every_list_is_bounded_and_every_string_has_a_pattern():
    """The API server never holds an unbounded sweep, and no string of a spec is free-form shell text."""
    for path, node in spec_schema_nodes():
        if "type" not in node:  # a count or a mapping: the operator's model bounds it
            continue
        if node["type"] == "array":
            assert "maxItems" in node, path
        if node["type"] == "string":
            assert "pattern" in node or "enum" in node, path
        if node["type"] in ("number", "integer"):
            assert "maximum" in node, path


@pytest.mark.parametrize("axis, item", [
    ("loss_percent", {"type": "number", "minimum": 0, "maximum": 100}),
    ("loss", {"type": "number", "minimum": 0, "maximum": 1}),
    ("rtt_ms", {"type": "number", "minimum": 0, "maximum": 20000}),
    ("bandwidth_mbps", {"type": "number", "minimum": 0.01, "maximum": 100000}),
])
def test_axis_items_carry_their_range(axis: str, item: dict):
    experiment = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "experiments"]["items"]
    assert experiment["properties"][axis]["items"] == item
    assert experiment["properties"][axis]["maxItems"] == 1000


@pytest.mark.parametrize("mutate, error", [
    (lambda s: s["experiments"][0].update(loss_percent=[1, 150]),
     "spec.experiments.0.loss_percent.1: 150 is greater than the maximum of 100"),
    (lambda s: s["experiments"][0].update(rtt_ms=[-1]),
     "spec.experiments.0.rtt_ms.0: -1 is less than the minimum of 0"),
    (lambda s: s["experiments"][0].update(trace=[{"name": "t", "uplink": "/etc/passwd", "downlink": "a"}]),
     "spec.experiments.0.trace.0.uplink: '/etc/passwd' does not match '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'"),
    (lambda s: s["experiments"][0].update(cc=["bbbr"]), "spec.experiments.0.cc.0: 'bbbr' is not one of"),
    (lambda s: s["experiments"][0].update(buffers={"tcp_rmem": [-1, 0, 1]}),
     "spec.experiments.0.buffers.tcp_rmem.0: -1 is less than the minimum of 1"),
    (lambda s: s["experiments"][0].update(rtt_ms=list(range(1001))), "spec.experiments.0.rtt_ms: [0, 1, 2,"),
    (lambda s: s["run"].update(store="http://x"), "spec.run.store: 'http://x' does not match"),
    (lambda s: s["run"].update(store="s3://bucket/$(id)"), "spec.run.store: 's3://bucket/$(id)' does not match"),
    (lambda s: s["run"].update(store="file:///srv/../etc"), "spec.run.store: 'file:///srv/../etc' does not match"),
    (lambda s: s["run"].update(pushgateway="$(echo $CCSWEEP_S3_SECRET_KEY >&2)"), "spec.run.pushgateway: '$(echo"),
    (lambda s: s["run"].update(image="ccsweep/cell:0.1.0; rm -rf /"), "spec.run.image: 'ccsweep/cell:0.1.0; rm"),
])
def test_hostile_fields_are_refused_by_the_schema_and_the_model(mutate, error: str):
    sweep = copy.deepcopy(load_example("quick"))
    mutate(sweep["spec"])
    found = schema_errors(sweep)
    assert found and found[0].startswith(error), found
    with pytest.raises(SpecError):
        sweep_from_resource(sweep["spec"], "quick")


@pytest.mark.parametrize("run", [
    {"store": "s3://ccsweep/results", "pushgateway": "pushgateway.monitoring:9091", "image": "ccsweep/cell:0.1.0"},
    {"store": "file:///srv/ccsweep", "pushgateway": "http://127.0.0.1:9091/",
     "image": "registry.example:5000/lab/ccsweep-cell@sha256:" + "a" * 64},
])
def test_ordinary_run_settings_are_accepted(run: dict):
    sweep = copy.deepcopy(load_example("quick"))
    sweep["spec"]["run"] = run
    assert schema_errors(sweep) == []
    sweep_from_resource(sweep["spec"], "quick")


def test_exactly_one_of_rules_are_cel_rules_that_see_defaults():
    rules = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
    by_message = {r["message"]: r["rule"] for r in rules}
    rule = by_message["each experiment (or defaults) gives exactly one of cc and mixes"]
    assert "has(e.cc)" in rule and "has(self.defaults.cc)" in rule and "has(e.mixes)" in rule
    assert "a sweep needs experiments or include" in by_message
