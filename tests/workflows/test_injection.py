"""No workflow parameter ever becomes shell text, and the non-cell pods run restricted.

A Sweep's strings (store, pushgateway, sweep, spec) reach the WorkflowTemplates as parameters.
Pasted into an `sh -c` script, `pushgateway: '$(echo $CCSWEEP_S3_SECRET_KEY >&2)'` would print
the S3 secret. Here every template is rendered with hostile values the way Argo substitutes
parameters, and each value must come out as exactly one argv item of `ccsweep`; the rendered
plan step then runs for real, and nothing the values ask for happens.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccsweep.storeurls import NAMESPACE_ENV

REPO = Path(__file__).resolve().parents[2]
TEMPLATE_FILES = sorted((REPO / "workflows/templates").glob("*.yaml"))
WORKFLOW_FILES = sorted((REPO / "workflows").glob("*.yaml"))
CCSWEEP = REPO / ".venv/bin/ccsweep"
SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox", "env"}
HOSTILE = [
    "$(id)",
    "`id`",
    ";rm -rf /",
    "'; id; echo '",
    '" && id #',
    "x\nid",
    "--store=/evil",
    "a b\tc",
]
PARAMETER = re.compile(r"\{\{\s*(workflow|inputs)\.parameters\.([\w-]+)\s*\}\}")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def templates() -> dict[str, dict[str, Any]]:
    return {t["name"]: t for path in TEMPLATE_FILES for t in load(path)["spec"]["templates"]}


def workflow_defaults() -> dict[str, str]:
    sweep = load(REPO / "workflows/templates/ccsweep-sweep.yaml")
    return {p["name"]: p["value"] for p in sweep["spec"]["arguments"]["parameters"]}


def input_defaults(template: dict[str, Any]) -> dict[str, str]:
    """Benign values for a template's inputs: its defaults, else a plain word."""
    params = template.get("inputs", {}).get("parameters", [])
    return {p["name"]: p.get("value", "plain") for p in params}


def argo_substitute(obj: Any, values: dict[str, str]) -> Any:
    """Substitute `{{workflow|inputs.parameters.X}}` as Argo's controller does.

    Argo replaces tags in the template's JSON text with the value escaped by Go's strconv.Quote
    (quotes stripped), so a value cannot end the JSON string it stands in (util/template,
    simple_template.go). For printable ASCII, newlines and tabs, json.dumps escapes the same.
    """
    text = json.dumps(obj)
    return json.loads(PARAMETER.sub(lambda m: json.dumps(values[m.group(2)])[1:-1], text))


def containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in [template.get("container"), template.get("script"),
                        *template.get("initContainers", []), *template.get("sidecars", [])] if c]


def all_templates_everywhere() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in [*TEMPLATE_FILES, *WORKFLOW_FILES]:
        for t in load(path)["spec"].get("templates", []):
            found.append((f"{path.name}:{t['name']}", t))
    return found


@pytest.mark.parametrize(("where", "template"), all_templates_everywhere(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_no_template_puts_a_parameter_into_shell_text(where: str, template: dict[str, Any]):
    assert "script" not in template or "{{" not in template["script"].get("source", ""), where
    for container in containers(template):
        command = [*container.get("command", [])]
        words = [*command, *container.get("args", [])]
        if command and Path(command[0]).name in SHELLS:
            assert not any("{{" in w for w in words), f"{where}: a parameter inside {command}"
        assert not any("{{" in w for w in command), f"{where}: a parameter in the command itself"


def test_the_check_above_catches_the_old_sh_c_plan():
    """The shape that leaked the secret: `sh -c` with parameters pasted into the script."""
    script = 'exec ccsweep plan "$spec" --pushgateway "{{workflow.parameters.pushgateway}}"'
    old = {"name": "plan", "container": {"command": ["sh", "-c"], "args": [script]}}
    with pytest.raises(AssertionError, match="a parameter inside"):
        test_no_template_puts_a_parameter_into_shell_text("old:plan", old)


def rendered_argv(name: str, values: dict[str, str]) -> list[str]:
    container = argo_substitute(templates()[name]["container"], values)
    return [*container["command"], *container["args"]]


def pod_parameters(name: str) -> list[str]:
    """The parameters the container of template NAME reads."""
    return sorted({m.group(2) for m in PARAMETER.finditer(json.dumps(templates()[name]["container"]))})


@pytest.mark.parametrize("name", ["plan", "verdict", "cell", "cell-mahimahi", "figures"])
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_value_is_one_argv_item_of_ccsweep(name: str, hostile: str):
    template = templates()[name]
    benign = {**workflow_defaults(), **input_defaults(template)}
    plain = rendered_argv(name, benign)
    assert plain[0] == "ccsweep"
    argv_params = [p for p in pod_parameters(name)
                   if any(f".parameters.{p}}}}}" in a for a in template["container"]["args"])]
    assert argv_params, f"{name} passes no parameter as an argument"
    for param in argv_params:
        argv = rendered_argv(name, {**benign, param: hostile})
        assert argv[0] == "ccsweep" and len(argv) == len(plain), (param, argv)
        carrying = [a for a in argv if hostile in a]
        assert len(carrying) == 1, (param, argv)
        (item,) = carrying
        # As a flag's value (--flag=VALUE), or a positional after `--`, where no option is parsed.
        assert re.fullmatch(r"--[a-z][a-z0-9-]*=" + re.escape(hostile), item) or (
            item == hostile and "--" in argv and argv.index("--") < argv.index(item)), (param, item)


def run_plan(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert argv[:2] == ["ccsweep", "plan"]
    return subprocess.run([str(CCSWEEP), *argv[1:]], check=False, capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.parametrize("param", ["pushgateway", "sweep", "spec", "store", "revise"])
def test_the_rendered_plan_step_runs_nothing_a_value_asks_for(tmp_path: Path, param: str):
    """The plan pod's argv, run for real in an empty folder: the command substitutions never run.

    Whether ccsweep accepts the value as a name is the spec's and the store's business (exit 0 or
    a one-line error, exit 2); what matters here is that no shell ever sees it.
    """
    values = {**workflow_defaults(), "spec": "quick", "sweep": "quick", "store": "store",
              param: "$(touch ran)`touch ran`;touch ran"}
    done = run_plan(rendered_argv("plan", values), tmp_path)
    assert not (tmp_path / "ran").exists()
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 2:
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("ccsweep: error:") and done.stdout == ""
    else:
        assert json.loads(done.stdout)
    if param in ("pushgateway", "spec", "revise"):   # never a name anything is stored under
        assert done.returncode == (0 if param == "pushgateway" else 2), done.stderr
    if param == "revise":   # a typed boolean: only true or false
        assert done.stderr.startswith("ccsweep: error: --revise-if '$(touch ran)")
        assert done.stderr.endswith("': give true or false\n")


@pytest.mark.parametrize(("revise", "replaced"), [("false", False), ("true", True)])
def test_the_revise_parameter_says_whether_a_new_spec_replaces_the_stored_one(tmp_path: Path, revise: str,
                                                                               replaced: bool):
    """A Workflow planning another spec under a stored sweep name is refused in one line unless its
    `revise` parameter is true; then the old plan is kept as a revision."""
    values = {**workflow_defaults(), "spec": "quick", "sweep": "mine", "store": str(tmp_path / "store")}
    assert values["revise"] == "false"
    assert run_plan(rendered_argv("plan", values), tmp_path).returncode == 0
    manifest = tmp_path / "store/sweeps/mine/manifest.json"
    before = manifest.read_bytes()
    done = run_plan(rendered_argv("plan", {**values, "spec": "figure8", "revise": revise}), tmp_path)
    revisions = list((tmp_path / "store/sweeps/mine/revisions").glob("*.json"))
    if replaced:
        assert done.returncode == 0, done.stderr
        assert manifest.read_bytes() != before and len(revisions) == 1
    else:
        (line,) = done.stderr.strip().splitlines()
        assert done.returncode == 2 and line.startswith("ccsweep: error:") and "--revise" in line, line
        assert manifest.read_bytes() == before and not revisions


def test_every_ccsweep_container_takes_its_namespace_from_the_downward_api():
    """Each pod's store is its namespace's folder of `store` and its metric groups carry that
    namespace (storeurls.namespace_store): the namespace comes from the Kubernetes API, never from
    a parameter, in every container that runs ccsweep."""
    running = [(name, c) for name, t in templates().items() for c in containers(t)
               if c.get("command", [""])[0] == "ccsweep"]
    assert {name for name, _ in running} == {"plan", "plan-round", "plan-chunk", "verdict", "figures", "cell",
                                              "cell-mahimahi"}
    for name, container in running:
        (entry,) = [e for e in container["env"] if e["name"] == NAMESPACE_ENV]
        assert entry == {"name": NAMESPACE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}, name


def test_an_empty_pushgateway_means_none(tmp_path: Path):
    """The template's default is an empty string: the plan pushes nothing and says nothing of it."""
    values = {**workflow_defaults(), "spec": "quick", "sweep": "quick", "store": str(tmp_path / "store"),
              "pushgateway": ""}
    argv = rendered_argv("plan", values)
    assert "--pushgateway=" in argv
    done = run_plan(argv, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "push" not in done.stderr.lower()
    assert json.loads(done.stdout)


def test_the_link_parameter_moves_the_sweep_and_the_plan_names_it(tmp_path: Path):
    """`-p link=mahimahi` with no `sweep`: the plan's cells run on Mahimahi's template, and the name
    it writes for the later steps is the spec's own plus -mahimahi (so full-sweep's plan is left alone)."""
    values = {**workflow_defaults(), "spec": "quick", "store": str(tmp_path / "store"), "link": "mahimahi"}
    assert values["sweep"] == ""
    argv = [a.replace("/tmp/", f"{tmp_path}/") for a in rendered_argv("plan", values)]
    done = run_plan(argv, tmp_path)
    assert done.returncode == 0, done.stderr
    assert {item["link"] for item in json.loads(done.stdout)} == {"mahimahi"}
    assert (tmp_path / "sweep").read_text() == "quick-mahimahi"
    values["link"] = "ccsweep-link"
    done = run_plan([a.replace("/tmp/", f"{tmp_path}/") for a in rendered_argv("plan", values)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert {item["link"] for item in json.loads(done.stdout)} == {"ccsweep-link"}
    assert (tmp_path / "sweep").read_text() == "quick"


def test_plan_reads_the_inline_spec_only_when_it_is_not_empty(tmp_path: Path):
    """The choice the `sh -c` made, now `ccsweep plan --spec-file`: the artifact wins when not empty."""
    inline = tmp_path / "spec.yaml"
    inline.write_text("")
    store = f"--store={tmp_path / 'store'}"
    done = run_plan(["ccsweep", "plan", f"--spec-file={inline}", store, "--", "quick"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("sweep quick:")
    inline.write_text((REPO / "sweeps/quick.yaml").read_text().replace("name: quick", "name: inline-quick", 1))
    done = run_plan(["ccsweep", "plan", f"--spec-file={inline}", store, "--", "no-such-preset"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("sweep inline-quick:")


RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("name", ["plan", "figures", "verdict"])
def test_non_cell_pods_run_restricted(name: str):
    template = templates()[name]
    pod, container = template["securityContext"], template["container"]
    assert pod.items() >= RESTRICTED_POD.items() and pod["runAsUser"] != 0
    assert container["securityContext"] == RESTRICTED_CONTAINER
    # A read-only root: the one writable place is /tmp (HOME, matplotlib's cache), a volume of the pod.
    volumes = {v["name"]: v for v in template["volumes"]}
    (tmp,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert volumes[tmp["name"]] == {"name": tmp["name"], "emptyDir": {}}
    assert {"name": "HOME", "value": "/tmp"} in container["env"]


def test_cell_pods_use_the_runtime_default_seccomp_profile():
    security = templates()["cell"]["container"]["securityContext"]
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["allowPrivilegeEscalation"] is False
    # A `link: mahimahi` cell needs its setuid shells honoured, and is still not privileged.
    mahimahi = templates()["cell-mahimahi"]["container"]["securityContext"]
    assert mahimahi["seccompProfile"] == {"type": "RuntimeDefault"} and mahimahi["privileged"] is False


def test_only_checked_values_reach_the_cell_pod_spec_patch():
    """podSpecPatch is JSON inside a string: a value pasted into it could add fields to the pod. The
    cell template pastes none: Argo's toJson writes the patch from five parameters, which the
    sweep's fan-out takes from plan's checked item fields (ccsweep.podspec). What Argo makes of
    hostile values there: tests/workflows/test_hostile_parameters.py."""
    from pydantic import ValidationError

    from ccsweep.crd import RunSettings

    fan_outs = [step for group in templates()["sweep"]["steps"] for step in group
                if step.get("templateRef", {}).get("name") == "ccsweep-cell"]
    assert len(fan_outs) == 2   # one per cell template: ccsweep-link's and Mahimahi's
    for fan_out in fan_outs:
        cell = templates()[fan_out["templateRef"]["template"]]
        patch = cell["podSpecPatch"]
        assert patch.startswith("{{=toJson(") and patch.endswith(")}}") and patch.count("{{") == 1
        assert not PARAMETER.search(patch), "a parameter pasted into the patch's JSON text"
        fed = {p["name"]: p["value"] for p in fan_out["arguments"]["parameters"]}
        assert (fed["node-selector"], fed["cpu"], fed["memory"], fed["retry-cpu"], fed["retry-memory"],
                fed["image"]) == ("{{item.node_selector}}", "{{item.cpu}}", "{{item.memory}}", "{{item.retry_cpu}}",
                                  "{{item.retry_memory}}", "{{item.image}}")
        # The plan's output, filtered by an item's link (tests/workflows/test_lint.py): still plan's own JSON.
        assert fan_out["withParam"].startswith("{{=toJson(filter(jsonpath(steps.plan.outputs.result, '$'), ")
    assert RunSettings(cell_cpu="500m").cell_cpu == "500m"
    with pytest.raises(ValidationError, match="cell_cpu"):
        RunSettings(cell_cpu='1"}}], "hostPID": true, "x": [{"y": {"z": "1')
