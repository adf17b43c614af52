"""The Sweep custom resource: its models and its CustomResourceDefinition, generated from them.

A Sweep's `spec` is a sweep spec file as it is (`SweepSpec`: the same YAML as `sweeps/*.yaml`)
plus `run` (where and how the operator runs it); its `status` is written by the operator. The
CRD's openAPIV3Schema is generated here from these pydantic models, so the API server rejects
most invalid specs (types, ranges, patterns, unknown fields) with the same rules as
`ccsweep validate`, and what a schema cannot say (exactly one of `cc`/`mixes`, unique names) is
reported by the operator as a condition with the one-line reason. `ccsweep crd` prints it; the
chart ships the committed copy and a test keeps that copy equal to this output.

Kubernetes accepts only *structural* schemas (no `$ref`, no `anyOf` over types, OpenAPI v3.0
keywords), so the pydantic JSON Schema is rewritten: references inlined, `X | None` as
`nullable`, `exclusiveMinimum: n` as `minimum: n, exclusiveMinimum: true`, tuples as arrays of
fixed length. Defaults are NOT put into the schema: the API server would fill them into every
experiment, and filled-in values would then override the spec's own `defaults` mapping.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from ccsweep.cell import LinkBackend
from ccsweep.podspec import CPU_QUANTITY, IMAGE_REF
from ccsweep.spec import EXACTLY_ONE_OF, SLUG, TEXT, Experiment, SpecError, SpecModel, SweepSpec, one_line
from ccsweep.specload import parse_spec

GROUP = "ccsweep.io"
VERSION = "v1alpha1"
KIND = "Sweep"
PLURAL = "sweeps"
CRD_NAME = f"{PLURAL}.{GROUP}"
API_VERSION = f"{GROUP}/{VERSION}"

#: One folder or key segment: never "." or "..", so a file store cannot leave its folder.
_SEGMENT = r"\.?[A-Za-z0-9_-][A-Za-z0-9._-]*"
#: s3://BUCKET[/PREFIX] (S3's bucket naming rules) or file:///ABSOLUTE/PATH.
STORE_URL = rf"^(s3://[a-z0-9][a-z0-9.-]{{1,61}}[a-z0-9](/{_SEGMENT})*/?|file://(/{_SEGMENT})+/?)$"
#: A Pushgateway: host:port or an http(s) URL with an optional path.
PUSHGATEWAY = r"^(https?://)?[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(:[0-9]{1,5})?(/[A-Za-z0-9._~-]*)*$"
#: RFC 3339 times as the operator writes them.
TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"
#: Kubernetes object names (the Argo Workflow's).
OBJECT_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
#: The longest Sweep name: the operator puts it in label values (ccsweep.io/owner), which hold 63.
MAX_SWEEP_NAME = 63
#: Hex digits of the hash that ties a Sweep's store name to its namespace and name (48 bits).
STORE_NAME_HASH = 12

Phase = Literal["Pending", "Running", "Succeeded", "Failed", "Invalid"]


class RunSettings(SpecModel):
    """Where and how the operator runs the sweep; each unset field takes the operator's default."""

    store: str | None = Field(default=None, pattern=STORE_URL, max_length=1024,
                              description="result store URL (s3://BUCKET/PREFIX); default: the chart's store.url")
    image: str | None = Field(default=None, pattern=IMAGE_REF, max_length=512,
                              description="cell image; default: the chart's image")
    cell_cpu: str | None = Field(default=None, pattern=CPU_QUANTITY,
                                 description="CPU request of every cell pod's first attempt in place of each "
                                             "cell's cost model (no CPU limit), e.g. \"1\" or \"500m\"")
    parallelism: int | None = Field(default=None, ge=1, le=10_000, description="cell pods running at once")
    pushgateway: str | None = Field(default=None, pattern=PUSHGATEWAY, max_length=512,
                                    description="Pushgateway for live cell metrics (host:port)")
    lateness_threshold_us: float | None = Field(
        default=None, ge=1, le=1_000_000,
        description="p99 lateness (us) above which a cell's emulator ran late, in place of each cell's own "
                    "(1% of its RTT, 400-1000 us): for nodes whose CPU a hypervisor steals; each result records "
                    "the threshold it was judged by")
    max_failed_cells: int | None = Field(
        default=None, ge=0, le=1_000_000,
        description="failure budget: once more cells than this have failed (after their retries), the workflow "
                    "is stopped and the Sweep fails saying so; unset: no budget")
    link: LinkBackend | None = Field(
        default=None, description="the link of every experiment that sets no `link` of its own: ccsweep-link or "
                                  "mahimahi (each cell records it, so both links' results share one store); "
                                  "unset: each experiment's own (ccsweep-link when it sets none)")


class SweepResourceSpec(SweepSpec):
    """A Sweep's spec: a sweep spec file's fields, plus `run`; `name` defaults to the object's name."""

    name: str | None = Field(default=None, pattern=SLUG,  # type: ignore[assignment]  # optional only here
                             description="unset, or the Sweep's metadata.name: the sweep's name in the store is "
                                         "derived from the namespace and metadata.name (NAMESPACE-NAME-HASH)")
    run: RunSettings = Field(default_factory=RunSettings)


class CellCounts(SpecModel):
    """How many distinct cells the sweep has, and where they are."""

    total: int = Field(default=0, ge=0, description="distinct cells of the sweep")
    cached: int = Field(default=0, ge=0, description="already in the store when the sweep was planned: not run")
    running: int = Field(default=0, ge=0, description="cell pods pending or running")
    done: int = Field(default=0, ge=0, description="cells run and stored by this sweep's workflow")
    failed: int = Field(default=0, ge=0, description="cells that failed after their retries")


class Condition(SpecModel):
    """A Kubernetes-style condition: the latest observation of one aspect, with a reason."""

    type: str = Field(pattern=r"^[A-Z][A-Za-z]{0,63}$", description="Valid, Planned or Complete")
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,127}$", description="CamelCase reason")
    message: str = Field(default="", pattern=TEXT, max_length=4096, description="one line for people")
    lastTransitionTime: str = Field(pattern=TIMESTAMP, json_schema_extra={"format": "date-time"})
    observedGeneration: int | None = Field(default=None, ge=0)


class SweepStatus(SpecModel):
    """What the operator last saw of the sweep; written only by the operator."""

    phase: Phase | None = Field(default=None, description="Pending, Running, Succeeded, Failed or Invalid")
    observedGeneration: int | None = Field(default=None, ge=0, description="the spec generation this status is about")
    sweep: str | None = Field(default=None, pattern=SLUG, description="the sweep's name in the store")
    store: str | None = Field(default=None, pattern=TEXT, max_length=1024, description="the result store")
    workflow: str | None = Field(default=None, pattern=OBJECT_NAME, description="the Argo Workflow running the cells")
    cells: CellCounts | None = None
    startedAt: str | None = Field(default=None, pattern=TIMESTAMP, json_schema_extra={"format": "date-time"})
    finishedAt: str | None = Field(default=None, pattern=TIMESTAMP, json_schema_extra={"format": "date-time"})
    report: str | None = Field(default=None, pattern=TEXT, max_length=2048,
                               description="where the HTML report is (set when the sweep succeeded)")
    message: str | None = Field(default=None, pattern=TEXT, max_length=4096,
                                description="one line: why the sweep is in this phase")
    conditions: list[Condition] = Field(default_factory=list, max_length=16, json_schema_extra={
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


def store_name(namespace: str, name: str) -> str:
    """The name a Sweep's sweep has in the store: NAMESPACE-NAME, shortened, then a hash of both.

    Derived from the object, never chosen in its spec, so no Sweep can plan over another Sweep's
    manifest: the hash of `namespace/name` (no '/' can stand in either) tells apart the pairs whose
    readable part is the same (namespace a-b with Sweep c, namespace a with Sweep b-c) or was cut
    short to keep the whole within a label's 63 characters. The same Sweep, deleted and applied
    again, gets the same name and so finds its stored plan and results.
    """
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:STORE_NAME_HASH]
    readable = f"{namespace}-{name}".replace(".", "-")[:MAX_SWEEP_NAME - 1 - STORE_NAME_HASH].strip("-")
    return f"{readable}-{digest}"


def sweep_from_resource(spec: dict[str, Any], name: str, stored_as: str | None = None) -> tuple[SweepSpec, RunSettings]:
    """The sweep (includes and defaults resolved) and run settings of a Sweep's spec.

    The sweep is named `stored_as` (the operator gives store_name(namespace, name)), else `name`.
    A spec.name other than the Sweep's own name is refused: a Sweep does not choose where in the
    store it writes. run.link moves every experiment that sets no link of its own
    (SweepSpec.with_link) and keeps the name, unlike a preset's that --link renames.
    Raises SpecError with one line naming the field, exactly as `ccsweep validate` would.
    """
    data = {k: v for k, v in spec.items() if k != "run"}
    if data.get("name") not in (None, name):
        raise SpecError(f"Sweep {name}: spec.name {str(data['name'])[:64]!r} is not allowed: a Sweep's name in the "
                        "store is derived from its namespace and metadata.name; leave spec.name unset")
    data["name"] = stored_as or name
    try:
        run = RunSettings.model_validate(spec.get("run") or {})
    except ValidationError as exc:
        raise SpecError(f"Sweep {name}: run.{one_line(exc)}") from None
    sweep = parse_spec(data, origin=f"Sweep {name}")
    return (sweep.with_link(run.link) if run.link is not None else sweep), run


# ---------------------------------------------------------------------------------------------
# Structural OpenAPI v3 schemas from pydantic models.

_KEPT = {"type", "description", "pattern", "enum", "minimum", "maximum", "minItems", "maxItems", "minLength",
         "maxLength", "format", "required"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema rewritten into a Kubernetes structural schema."""
    raw = model.model_json_schema(mode="validation")
    return _structural(raw, raw.get("$defs", {}))


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        # A field's own description (and default) wins over the referenced model's docstring.
        return _structural({**target, **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    if "oneOf" in node:  # a tagged union; only `repetitions` (a count or a mapping) has one
        options = node["oneOf"]
        if len(options) != 2 or options[0].get("type") != "integer" or "$ref" not in options[1]:
            raise ValueError(f"not expressible as a structural schema (oneOf other than a count or a mapping): {node}")
        return _int_or_object(node)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o != {"type": "null"}]
        if len(options) != 1:
            raise ValueError(f"not expressible as a structural schema (anyOf over types): {node}")
        out = _structural({**options[0], **{k: v for k, v in node.items() if k != "anyOf"}}, defs)
        if len(options) < len(node["anyOf"]):
            out["nullable"] = True
        return out
    out = {k: v for k, v in node.items() if k in _KEPT or k.startswith("x-kubernetes-")}
    if "const" in node:
        out["enum"] = [node["const"]]
    if "exclusiveMinimum" in node:
        out["minimum"], out["exclusiveMinimum"] = node["exclusiveMinimum"], True
    if "exclusiveMaximum" in node:
        out["maximum"], out["exclusiveMaximum"] = node["exclusiveMaximum"], True
    if "prefixItems" in node:
        items = [_structural(p, defs) for p in node["prefixItems"]]
        if any(item != items[0] for item in items):
            raise ValueError(f"tuple of differing items is not structural: {node}")
        out["items"] = items[0]
    elif "items" in node:
        out["items"] = _structural(node["items"], defs)
    if "properties" in node:
        out["type"] = "object"
        out["properties"] = {k: _structural(v, defs) for k, v in node["properties"].items()}
    elif node.get("type") == "object":
        extra = node.get("additionalProperties", True)
        if isinstance(extra, dict) and extra:
            out["additionalProperties"] = _structural(extra, defs)
        else:  # dict[str, Any]: any keys, any values
            out["x-kubernetes-preserve-unknown-fields"] = True
    default = node.get("default")
    if default not in (None, "", [], {}):
        text = yaml.safe_dump(default, default_flow_style=True, width=1000).strip().removesuffix("...").strip()
        out["description"] = f"{out['description']} (default: {text})" if out.get("description") else f"default: {text}"
    return dict(sorted(out.items()))


def _int_or_object(node: dict[str, Any]) -> dict[str, Any]:
    """A count or a mapping (`repetitions: 3` or `{min, max, target}`): no structural type covers both.

    The field keeps any value (x-kubernetes-preserve-unknown-fields); a CEL rule cannot check it
    either (the API server builds no CEL type for an untyped field and refuses the CRD), so the
    operator checks it with the model and reports a wrong one as the Sweep's Invalid condition, as
    for every rule a schema cannot say.
    """
    out: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
    if node.get("description"):
        out["description"] = (f"{node['description']} (default: {node['default']})" if "default" in node
                              else node["description"])
    return out


def spec_schema() -> dict[str, Any]:
    """The Sweep's spec schema.

    Two relaxations against `SweepSpec`, both because the spec's `defaults` mapping is merged into
    experiments before validation: experiments only require `name` here, and `defaults` has the
    fields of an experiment, none required. The operator validates the merged result.
    """
    spec = structural_schema(SweepResourceSpec)
    experiment = spec["properties"]["experiments"]["items"]
    experiment["required"] = ["name"]
    partial = {k: v for k, v in structural_schema(Experiment).items() if k != "required"}
    partial["properties"] = {k: v for k, v in partial["properties"].items() if k != "name"}
    partial["description"] = "experiment fields merged into every experiment of this sweep"
    spec["properties"]["defaults"] = partial
    spec["description"] = ("A sweep spec (the same fields as a sweeps/*.yaml file) plus `run`; "
                           "see docs/spec.md and docs/operator.md.")
    spec["x-kubernetes-validations"] = cel_rules()
    return spec


def cel_rules() -> list[dict[str, str]]:
    """The spec's cross-field rules as CEL, so the API server refuses what no field alone shows.

    An experiment may take a field from `defaults`, so each rule asks of an experiment whether it
    or the defaults set the field: the same merge `ccsweep validate` does.
    """
    def given(field: str) -> str:
        return f"(has(e.{field}) || (has(self.defaults) && has(self.defaults.{field})))"

    def exactly_one(names: tuple[str, ...]) -> str:
        if len(names) == 2:
            return f"{given(names[0])} != {given(names[1])}"
        return " + ".join(f"({given(name)} ? 1 : 0)" for name in names) + " == 1"

    rules = [{
        "rule": f"!has(self.experiments) || self.experiments.all(e, {exactly_one(names)})",
        "message": f"each experiment (or defaults) gives exactly one of {', '.join(names[:-1])} and {names[-1]}",
    } for names in EXACTLY_ONE_OF]
    rules.append({
        "rule": ("(has(self.experiments) && size(self.experiments) > 0) || "
                 "(has(self.include) && size(self.include) > 0)"),
        "message": "a sweep needs experiments or include",
    })
    return rules


PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Cells", "type": "integer", "jsonPath": ".status.cells.total", "description": "distinct cells"},
    {"name": "Cached", "type": "integer", "jsonPath": ".status.cells.cached", "description": "stored before: not run"},
    {"name": "Running", "type": "integer", "jsonPath": ".status.cells.running"},
    {"name": "Done", "type": "integer", "jsonPath": ".status.cells.done"},
    {"name": "Failed", "type": "integer", "jsonPath": ".status.cells.failed"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Workflow", "type": "string", "jsonPath": ".status.workflow", "priority": 1},
    {"name": "Report", "type": "string", "jsonPath": ".status.report", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
]


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition of Sweep (apiextensions.k8s.io/v1)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower(),
                      "shortNames": ["sw"], "categories": ["ccsweep"]},
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A sweep of TCP congestion-control experiments, run by the ccsweep operator "
                                   "as an Argo Workflow with one pod per cell not already stored.",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        # The one restriction a CRD may put on metadata: a name the operator can
                        # put in a label, refused at admission instead of failing for ever after.
                        "metadata": {"type": "object", "properties": {"name": {
                            "type": "string", "maxLength": MAX_SWEEP_NAME}}},
                        "spec": spec_schema(),
                        "status": structural_schema(SweepStatus),
                    },
                    "x-kubernetes-validations": [{
                        "rule": "!has(self.spec.name) || self.spec.name == self.metadata.name",
                        "message": "spec.name must be unset or metadata.name: the sweep's name in the store is "
                                   "derived from the namespace and metadata.name",
                    }],
                }},
            }],
        },
    }


HEADER = "# Generated by `ccsweep crd` from the pydantic models in src/ccsweep/crd.py: do not edit.\n"


def render_crd() -> str:
    """The CRD as the YAML text committed in the chart."""
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=120)
