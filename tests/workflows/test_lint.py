"""The Argo workflows, checked offline: `argo lint --offline`, and against the ccsweep CLI they call.

A workflow can be valid Argo and still be wrong for ccsweep: a flag the CLI does not have, a
field of the plan's output the fan-out reads but `ccsweep plan` does not print, a preset that does
not exist. Those mistakes would only show on a cluster, minutes in; here they fail in a second.
Needs bin/argo (hack/tools/argo.sh, part of `make tools` and `make test`).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import click
import pytest
import yaml

from ccsweep.cli import main as cli
from ccsweep.linkdesc import DEFAULT_LINK, LINKS
from ccsweep.specload import find_spec_file

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / "workflows"
TEMPLATES = sorted((WORKFLOWS / "templates").glob("*.yaml"))
EXPERIMENTS = sorted(WORKFLOWS.glob("*.yaml"))
ARGO = REPO / "bin" / "argo"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def all_templates() -> dict[str, dict]:
    """Every template of every WorkflowTemplate, by name."""
    return {t["name"]: t for path in TEMPLATES for t in load(path)["spec"]["templates"]}


@pytest.fixture(scope="module")
def argo() -> Path:
    if not ARGO.exists():
        pytest.skip("bin/argo missing: run `make tools` (hack/tools/argo.sh)")
    return ARGO


def lint(argo: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(argo), "lint", "--offline", "--output", "simple", *map(str, paths)], check=False,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("workflow", EXPERIMENTS, ids=lambda p: p.name)
def test_argo_lint_offline_passes(argo: Path, workflow: Path):
    # The WorkflowTemplates go along, so workflowTemplateRef and templateRef resolve offline.
    done = lint(argo, workflow, *TEMPLATES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_argo_lint_offline_catches_a_broken_reference(argo: Path, tmp_path: Path):
    """The lint above can fail: a workflow naming a template that does not exist is refused."""
    broken = load(WORKFLOWS / "full-sweep.yaml")
    broken["spec"]["workflowTemplateRef"]["name"] = "ccsweep-no-such-template"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(broken))
    done = lint(argo, tmp_path / "broken.yaml", *TEMPLATES)
    assert done.returncode != 0
    assert "ccsweep-no-such-template" in done.stdout + done.stderr


@pytest.mark.parametrize("workflow", EXPERIMENTS, ids=lambda p: p.name)
def test_each_workflow_names_an_existing_preset(workflow: Path):
    params = {p["name"]: p["value"] for p in load(workflow)["spec"]["arguments"]["parameters"]}
    assert find_spec_file(params["spec"]).is_file()
    assert "sweep" not in params  # the plan names it as the spec does (then -LINK, -xSCALE): see below


def test_one_workflow_per_purpose():
    """full-sweep.yaml is the documented entry point; sweep.yaml runs any other preset by parameter."""
    assert [p.name for p in EXPERIMENTS] == ["full-sweep.yaml", "sweep.yaml"]


def command_flags(template: dict) -> tuple[list[str], set[str]]:
    """(ccsweep subcommand path, --flags used) of a template whose container runs ccsweep."""
    container = template["container"]
    words = [*container.get("command", []), *container.get("args", [])]
    text = " ".join(words)
    match = re.search(r"\bccsweep (\w+)", text)
    assert match, f"template {template['name']} does not run ccsweep"
    return [match.group(1)], set(re.findall(r"(--[a-z][a-z0-9-]*)", text))


@pytest.mark.parametrize("name", ["plan", "plan-chunk", "cell", "cell-mahimahi", "figures", "verdict"])
def test_templates_call_ccsweep_with_flags_it_has(name: str):
    (subcommand,), flags = command_flags(all_templates()[name])
    command = cli.commands[subcommand]
    known = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    assert flags <= known, f"ccsweep {subcommand} lacks {flags - known}"


def cell_steps(template: str = "sweep") -> dict[str, dict]:
    """The fan-out steps of a steps template that run cells (one per cell template), by name."""
    return {step["name"]: step for group in all_templates()[template]["steps"] for step in group
            if step.get("templateRef", {}).get("name") == "ccsweep-cell"}


#: Each link's cell pod template, by the link's name.
CELL_TEMPLATES = {name: link.pod_template for name, link in LINKS.items()}


#: The one shape of a cell step's withParam: the plan's items whose `link` is one backend, or is
#: none of some (support/link_steps.py writes them).
LINK_FILTER = re.compile(r"\{\{=toJson\(filter\(jsonpath\(steps\.plan\.outputs\.result, '\$'\), "
                         r"\{(.+)\}\)\)\}\}")
LINK_CONDITION = re.compile(r"#\.link (==|!=) '([a-z0-9-]+)'")


def takes(step: dict, item: dict) -> bool:
    """Whether the cell step's filter takes `item`, evaluated as Argo's expr does (a missing key is nil)."""
    match = LINK_FILTER.fullmatch(step["withParam"])
    assert match, step["withParam"]
    taken = True
    for condition in match[1].split(" && "):
        term = LINK_CONDITION.fullmatch(condition)
        assert term, condition
        operator, link = term.groups()
        taken = taken and (item.get("link") == link) == (operator == "==")
    return taken


def test_fan_out_reads_only_fields_that_ccsweep_plan_prints(tmp_path: Path):
    steps = cell_steps()
    used = set(re.findall(r"\{\{item\.(\w+)\}\}", json.dumps(steps)))
    used |= {"link"} if all(LINK_FILTER.fullmatch(s["withParam"]) for s in steps.values()) else set()
    done = subprocess.run([str(REPO / ".venv/bin/ccsweep"), "plan", "quick", "--store", str(tmp_path / "store"),
                           "--image", "ccsweep/cell:0.1.0"],
                          check=False, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)
    assert items and used == set(items[0]), (used, items[0])
    selector = items[0]["node_selector"]
    assert selector and all(k.startswith("ccsweep.io/cc-") and v == "true" for k, v in selector.items())
    # The pod values come from plan's checks, whatever the parameters held: the cell pod's patch
    # is built from these fields by Argo (tests/workflows/test_hostile_parameters.py renders it).
    # With the workflow's defaults (cell-cpu and cell-memory empty), the requests are the cost model's.
    assert {k: items[0][k] for k in ("image", "cpu", "memory", "retry_cpu", "retry_memory")} == {
        "image": "ccsweep/cell:0.1.0", "cpu": "224m", "memory": "320Mi", "retry_cpu": "448m", "retry_memory": "640Mi"}


def test_each_link_backend_runs_from_its_own_cell_template():
    """The plan item's `link` sends a cell to its descriptor's pod template, in a sweep and in a
    chunk Workflow alike; an item without `link` (an older image's plan) to the default link's."""
    for template in ("sweep", "chunk-sweep"):
        steps = cell_steps(template)
        assert {s["templateRef"]["template"] for s in steps.values()} == set(CELL_TEMPLATES.values())
        for link, cell_template in CELL_TEMPLATES.items():
            (taken,) = [s for s in steps.values() if takes(s, {"id": "x", "link": link})]
            assert taken["templateRef"]["template"] == cell_template, (template, link)
        (default,) = [s for s in steps.values() if takes(s, {"id": "x"})]
        assert default["templateRef"]["template"] == LINKS[DEFAULT_LINK].pod_template
        # Apart from which items and which template, the steps are one: the same arguments and outcome.
        strip = ("name", "templateRef", "withParam")
        assert len({json.dumps({k: v for k, v in s.items() if k not in strip}) for s in steps.values()}) == 1
    assert cell_steps("chunk-sweep") == cell_steps("sweep")


def test_ccsweep_plans_items_route_each_cell_by_its_link(tmp_path: Path):
    """`ccsweep plan`'s real output for a sweep of both links, through the fan-out's filters."""
    experiment = {"cc": ["bbr"], "loss": [0], "rtt_ms": [100], "bandwidth_mbps": [10], "duration_s": 5}
    spec = tmp_path / "both.json"
    spec.write_text(json.dumps({"name": "both", "experiments": [
        {"name": "emulated", **experiment}, {"name": "mahimahi", "link": "mahimahi", **experiment}]}))
    done = subprocess.run([str(REPO / ".venv/bin/ccsweep"), "plan", str(spec), "--store", str(tmp_path / "store")],
                          check=False, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)
    assert sorted(i["link"] for i in items) == ["ccsweep-link", "mahimahi"]
    for item in items:
        (step,) = [s for s in cell_steps().values() if takes(s, item)]
        assert step["templateRef"]["template"] == CELL_TEMPLATES[item["link"]]
        assert (step["templateRef"]["template"] == "cell-mahimahi") == (item["experiment"] == "mahimahi")


def test_a_mahimahi_cell_pod_differs_only_in_what_mahimahi_needs():
    """Same pod, inputs, retries and deadline; only the main container's privileges differ, and by
    exactly what docs/security.md derives: allowPrivilegeEscalation for the setuid shells, SETUID and
    SETGID, NET_BIND_SERVICE for their dnsmasq, and no SYS_NICE (no ccsweep-link to run)."""
    cell, mahimahi = all_templates()["cell"], all_templates()["cell-mahimahi"]
    assert {k for k in cell.keys() | mahimahi.keys() if cell.get(k) != mahimahi.get(k)} == {"name", "container"}
    plain, other = cell["container"], mahimahi["container"]
    assert {k for k in plain.keys() | other.keys() if plain.get(k) != other.get(k)} == {"securityContext"}
    before, after = plain["securityContext"], other["securityContext"]
    assert {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} == {
        "allowPrivilegeEscalation", "capabilities"}
    assert before["allowPrivilegeEscalation"] is False and after["allowPrivilegeEscalation"] is True
    assert after["privileged"] is False and after["runAsUser"] == 0
    assert after["seccompProfile"] == {"type": "RuntimeDefault"}
    assert after["capabilities"]["drop"] == ["ALL"]
    added = set(after["capabilities"]["add"])
    assert added == set(before["capabilities"]["add"]) - {"SYS_NICE"} | {"SETUID", "SETGID", "NET_BIND_SERVICE"}
    assert len(added) == len(after["capabilities"]["add"])


def test_cell_template_is_least_privilege_and_requests_cpu_without_a_cpu_limit():
    cell = all_templates()["cell"]
    container = cell["container"]
    # The patch (requests without a CPU limit, the init container's CPU) as Argo renders it:
    # tests/workflows/test_hostile_parameters.py::test_the_cell_pod_from_plans_values.
    assert cell["podSpecPatch"].startswith("{{=toJson(")
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN", "SYS_NICE"]}
    held = {"path": "/run/ccsweep/node", "type": "DirectoryOrCreate"}
    assert cell["volumes"] == [{"name": "tun", "hostPath": {"path": "/dev/net/tun", "type": "CharDevice"}},
                               {"name": "node-bpf", "hostPath": held}]
    # The node setup's held BPF digests (ccsweep.bpfregister), read-only: a cell cannot change what it trusts.
    assert {"name": "node-bpf", "mountPath": "/run/ccsweep/node", "readOnly": True} in container["volumeMounts"]
    assert "activeDeadlineSeconds" in cell


def test_cells_retry_only_infrastructure_failures():
    """The retry expression, evaluated for the exits `ccsweep cell` documents."""
    expression = all_templates()["cell"]["retryStrategy"]["expression"]
    assert "lastRetry.status" in expression

    def retried(status: str, exit_code: str) -> bool:
        # The expression's grammar is small: evaluate it as Python after swapping the operators.
        py = " ".join(expression.split()).replace("&&", " and ").replace("||", " or ").replace("asInt", "int")
        return bool(eval(py, {"int": int}, {"lastRetry": type("R", (), {"status": status, "exitCode": exit_code})}))

    assert retried("Error", "-1")          # pod deleted, evicted, node lost
    assert retried("Failed", "137")        # SIGKILL (OOM killer, node drain)
    assert retried("Failed", "143")        # SIGTERM
    assert retried("Failed", "75")         # measured with the emulator late: measure again
    assert retried("Failed", "-1")         # no exit from main: its node lost (PodGC marked the pod Failed)
    for code in ("1", "2", "3"):           # failed cell, bad input, missing algorithm
        assert not retried("Failed", code)


def test_every_retried_step_bounds_each_attempt_and_no_step_bounds_its_retries_by_the_first():
    """Argo's backoff.maxDuration counts from the first attempt's creation (its wait to be
    scheduled and its whole run included) and gives a retry only what is left: with 2 min, 17 of
    the full-length run's 65 retries were ended by a signal. Each attempt's deadline and the retry
    limit bound a step instead."""
    retried = {name: t for name, t in all_templates().items() if "retryStrategy" in t}
    assert {"cell", "cell-mahimahi", "plan", "figures"} <= set(retried)
    for name, template in retried.items():
        assert "maxDuration" not in template["retryStrategy"].get("backoff", {}), name
        assert int(template["retryStrategy"]["limit"]) <= 2 and "activeDeadlineSeconds" in template, name


def chunk_manifest(**parameters: str) -> dict:
    """The chunk step's child Workflow, its expressions evaluated as Argo does: toJson(x) is x as a JSON
    string, asInt(x) the number, workflow.parameters['a-b'] the same as workflow.parameters.a-b."""
    sweep = load(WORKFLOWS / "templates/ccsweep-sweep.yaml")
    scope = {f"workflow.parameters.{p['name']}": p["value"] for p in sweep["spec"]["arguments"]["parameters"]}
    scope |= {f"workflow.parameters.{k.replace('_', '-')}": v for k, v in parameters.items()}
    scope |= {"workflow.name": "big-1", "inputs.parameters.chunk": "3",
              "inputs.parameters.sweep": parameters.get("sweep", "planned")}

    def evaluate(match: re.Match) -> str:
        function, name = match.group(1), re.sub(r"\['([^']+)'\]", r".\1", match.group(2))
        return json.dumps(scope[name]) if function == "toJson" else str(int(scope[name]))

    text = all_templates()["chunk"]["resource"]["manifest"]
    rendered = re.sub(r"\{\{=(toJson|asInt)\(([^)]+)\)\}\}", evaluate, text)
    assert "{{" not in rendered, rendered
    return yaml.safe_load(rendered)


def test_a_chunk_workflow_runs_this_template_with_the_sweeps_own_parameters():
    """A large sweep's chunk: a Workflow of the same template (its chunk-sweep entrypoint), valid for
    Argo, given only parameters the template declares, the sweep's values passed through."""
    import jsonschema

    from support.versions import argo_module_dir

    manifest = chunk_manifest(sweep="big", store="s3://b/p", chunk_parallelism="7")
    schema = json.loads((argo_module_dir() / "api/jsonschema/schema.json").read_text())
    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/definitions/io.argoproj.workflow.v1alpha1.Workflow", "definitions": schema["definitions"]})
    assert [e.message for e in validator.iter_errors(manifest)] == []
    sweep = load(WORKFLOWS / "templates/ccsweep-sweep.yaml")
    assert manifest["spec"]["workflowTemplateRef"] == {"name": sweep["metadata"]["name"]}
    assert manifest["spec"]["entrypoint"] == "chunk-sweep" and manifest["spec"]["parallelism"] == 7
    passed = {p["name"]: p["value"] for p in manifest["spec"]["arguments"]["parameters"]}
    assert set(passed) <= {p["name"] for p in sweep["spec"]["arguments"]["parameters"]}
    assert passed["chunk"] == "3" and passed["sweep"] == "big" and passed["store"] == "s3://b/p"
    assert manifest["metadata"]["labels"]["ccsweep.io/parent"] == "big-1"
    # What the chunk Workflow's plan step reads is all passed; the spec itself is not (the manifest in the
    # store is the plan).
    (_, flags) = command_flags(all_templates()["plan-chunk"])
    assert {"--sweep", "--store", "--chunk", "--chunk-size"} <= flags
    assert "spec-yaml" not in passed


def test_adaptive_rounds_plan_again_and_fan_out_like_the_sweep_bounded_by_the_plan():
    """After the first fan-out, `round` plans again (`ccsweep plan --round N`), runs the sweep's own cell
    steps on what it printed, and calls itself for round N + 1 only while a round had cells to run and
    the plan's count of rounds is not reached: the recursion ends."""
    templates = all_templates()
    sweep = {s["name"]: s for group in templates["sweep"]["steps"] for s in group}
    assert sweep["rounds"]["template"] == "round" and sweep["rounds"]["when"] == \
        "{{steps.plan.outputs.parameters.rounds}} > 1"
    assert "--rounds-file=/tmp/rounds.txt" in templates["plan"]["container"]["args"]
    steps = {s["name"]: s for group in templates["round"]["steps"] for s in group}
    assert steps["plan"]["template"] == "plan-round"
    assert (steps["cell"], steps["cell-mahimahi"], steps["chunk"]) == (sweep["cell"], sweep["cell-mahimahi"],
                                                                       sweep["chunk"])
    assert steps["next"]["template"] == "round"
    assert steps["next"]["when"] == ("{{steps.plan.outputs.parameters.pending}} > 0 && "
                                     "{{inputs.parameters.round}} < {{steps.plan.outputs.parameters.rounds}}")
    args = templates["plan-round"]["container"]["args"]
    outputs = {p["name"]: p["valueFrom"]["path"] for p in templates["plan-round"]["outputs"]["parameters"]}
    for name, flag in (("chunks", "--chunks-file"), ("rounds", "--rounds-file"), ("pending", "--pending-file")):
        assert f"{flag}={outputs[name]}" in args
    assert "--round={{inputs.parameters.round}}" in args


def test_a_chunk_workflow_takes_hostile_values_as_strings():
    """A Sweep's strings reach the child's manifest as JSON strings: none adds a field to it."""
    hostile = 'x"\n  serviceAccountName: admin\n  x: "'
    manifest = chunk_manifest(store=hostile, image=hostile)
    passed = {p["name"]: p["value"] for p in manifest["spec"]["arguments"]["parameters"]}
    assert passed["store"] == passed["image"] == hostile
    assert "serviceAccountName" not in manifest["spec"]


def test_the_sweep_fans_out_cells_or_chunks_from_the_plans_two_outputs():
    """The plan prints the cells (the cell step's items) or, for a large sweep, [] and the chunks in
    a file read as an output parameter (the chunk step's items): the file `ccsweep plan` writes."""
    steps = {s["name"]: s for group in all_templates()["sweep"]["steps"] for s in group}
    plan = all_templates()["plan"]
    (output,) = [p for p in plan["outputs"]["parameters"] if p["name"] == "chunks"]
    assert all("(steps.plan.outputs.result," in s["withParam"] for s in cell_steps().values())
    assert steps["chunk"]["withParam"] == f"{{{{steps.plan.outputs.parameters.{output['name']}}}}}"
    assert f"--chunks-file={output['valueFrom']['path']}" in plan["container"]["args"]
    assert output["valueFrom"]["path"].startswith("/tmp/")   # the pod's one writable folder
    used = set(re.findall(r"\{\{item\.(\w+)\}\}", json.dumps(steps["chunk"])))
    assert used == {"chunk"}
    # The chunk Workflow's own fan-out is the sweep's cell step itself.
    chunk_steps = {s["name"]: s for group in all_templates()["chunk-sweep"]["steps"] for s in group}
    assert chunk_steps["cell"] == steps["cell"] and chunk_steps["plan"]["template"] == "plan-chunk"


def test_every_step_after_the_plan_takes_the_sweep_the_plan_named():
    """The `sweep` parameter may be empty (the plan then names the sweep from the spec, --link and
    --time-scale, as `ccsweep plan` does); cells, chunks, figures and verdict all read the name the
    plan step wrote, so a sweep moved to Mahimahi is stored, drawn and judged under its own name."""
    templates = all_templates()
    for name in ("plan", "plan-chunk"):
        (output,) = [o for o in templates[name]["outputs"]["parameters"] if o["name"] == "sweep"]
        assert f"--name-file={output['valueFrom']['path']}" in templates[name]["container"]["args"]
    for entry in ("sweep", "chunk-sweep"):
        for group in templates[entry]["steps"][1:]:
            for step in group:
                passed = {p["name"]: p["value"] for p in step.get("arguments", {}).get("parameters", [])}
                assert passed.get("sweep") == "{{steps.plan.outputs.parameters.sweep}}", (entry, step["name"])
    readers = [n for n, t in templates.items() if "workflow.parameters.sweep" in json.dumps(t)]
    assert sorted(readers) == ["plan", "plan-chunk"]
    assert "--link={{workflow.parameters.link}}" in templates["plan"]["container"]["args"]
