"""The docs' command examples, checked against what they name: commands, options, targets, files.

A doc that names a subcommand, an option, a make target, a workflow file or a workflow parameter
that no longer exists misleads every reader who copies it. Each example is checked against the
thing itself, not against a list kept here:
- `ccsweep ...`: the subcommand and every option exist in the CLI (click's own command objects);
  in a ```sh block the whole line must parse as click would parse it, and side-effect-free
  commands (validate, presets, expand, crd) are run and must succeed;
- `make X`: X is listed by `make help`;
- `argo submit workflows/X.yaml -p NAME=...`: the file is a Workflow and NAME a parameter of it or
  of the WorkflowTemplate it runs;
- `kubectl`/`helm` in a ```sh block: the repository paths they name exist.
And the newcomer's reading path in docs/architecture.md names every module exactly once.
`make docs-check` runs this file. Fast, no network, no root.
"""

from __future__ import annotations

import collections
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from ccsweep.cli import main as cli

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "benchmarks").rglob("*.md"),
               *(REPO / "operator/examples").rglob("*.md"), REPO / "charts/ccsweep/README.md"])
SHELL_BLOCK = re.compile(r"^[ \t]*```(?:sh|bash|shell|console)[ \t]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
#: Commands run for real when a ```sh block shows them: they only read and print.
SIDE_EFFECT_FREE = {"validate", "presets", "expand", "crd"}
COMMANDS = ("ccsweep", "make", "argo", "kubectl", "helm")


@dataclass(frozen=True)
class Example:
    where: str            # doc:line
    argv: tuple[str, ...]
    whole: bool           # a command line of a ```sh block (True) or a mention in running text


def _argv(text: str) -> tuple[str, ...] | None:
    """The words of a command, without placeholders; None when it is not one of ours."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    words = [w.strip("[]") for w in words if w.strip("[]") not in ("", "...", "|", "&")]
    if not words or Path(words[0]).name not in COMMANDS:
        return None
    return (Path(words[0]).name, *words[1:])


def block_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, command) of every ```sh block line, backslash continuations joined."""
    for block in SHELL_BLOCK.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        pending, start = "", first
        for offset, line in enumerate(block.group(1).splitlines()):
            if not pending:
                start = first + offset
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield start, pending + line
            pending = ""


def examples_in(path: Path, text: str | None = None) -> list[Example]:
    text = path.read_text() if text is None else text
    name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    found = []
    for line, command in block_lines(text):
        if (argv := _argv(command)) is not None:
            found.append(Example(f"{name}:{line}", argv, whole=True))
    outside = SHELL_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for span in INLINE.finditer(outside):
        if (argv := _argv(span.group(1))) is not None:
            found.append(Example(f"{name}:{outside.count(chr(10), 0, span.start()) + 1}", argv, whole=False))
    return found


def check_ccsweep(example: Example) -> list[str]:
    args = list(example.argv[1:])
    if not args or args[0].startswith("-"):
        return []
    command = cli.commands.get(args[0])
    if command is None:
        return [f"ccsweep has no subcommand {args[0]!r}"]
    rest = args[1:]
    if example.whole:
        try:
            command.make_context(args[0], list(rest))
        except click.exceptions.Exit:
            pass
        except click.UsageError as exc:
            return [f"ccsweep {args[0]}: {exc.format_message()}"]
        if args[0] in SIDE_EFFECT_FREE and "--help" not in rest:
            done = CliRunner().invoke(cli, args)
            if done.exit_code != 0:
                said = done.output.strip()[-300:] or repr(done.exception)
                return [f"ccsweep {' '.join(args)} exits {done.exit_code}: {said}"]
        return []
    options = {o for p in command.params if isinstance(p, click.Option) for o in [*p.opts, *p.secondary_opts]}
    options |= {"--help", "-h"}
    return [f"ccsweep {args[0]} has no option {w.split('=')[0]}" for w in rest
            if w.startswith("-") and w != "--" and w.split("=")[0] not in options]


def make_targets() -> set[str]:
    done = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=REPO, capture_output=True,
                          text=True, timeout=30, check=True)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    return {m.group(1) for m in re.finditer(r"^  ([a-zA-Z0-9_-]+)\s", plain, re.MULTILINE)}


def check_make(example: Example, targets: set[str]) -> list[str]:
    wanted = [w for w in example.argv[1:] if not w.startswith("-") and "=" not in w]
    return [f"make help lists no target {w!r}" for w in wanted if w not in targets]


def load_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def workflow_parameters(workflow: dict) -> set[str]:
    """The parameters a Workflow takes: its own and those of the WorkflowTemplate it runs."""
    names = {p["name"] for p in workflow["spec"].get("arguments", {}).get("parameters", [])}
    ref = workflow["spec"].get("workflowTemplateRef", {}).get("name")
    for path in (REPO / "workflows/templates").glob("*.yaml"):
        template = load_yaml(path)
        if template["metadata"]["name"] == ref:
            names |= {p["name"] for p in template["spec"].get("arguments", {}).get("parameters", [])}
    return names


ARGO_VALUE_OPTIONS = {"-n", "--namespace", "-o", "--output", "-p", "--parameter", "-f", "--parameter-file",
                      "--from", "-l", "--labels", "--entrypoint", "--name", "--generate-name", "--serviceaccount"}


def check_argo(example: Example) -> list[str]:
    args = list(example.argv[1:])
    if not args or args[0] != "submit":
        return []
    files, params, words = [], [], iter(args[1:])
    for word in words:
        option = word.split("=")[0]
        if option in ARGO_VALUE_OPTIONS:
            value = word.split("=", 1)[1] if "=" in word else next(words, "")
            if option in ("-p", "--parameter"):
                params.append(value.split("=")[0])
        elif not word.startswith("-"):
            files.append(word)
    problems = []
    for name in files:
        path = REPO / name
        if not path.is_file():
            problems.append(f"argo submit: no file {name}")
            continue
        workflow = load_yaml(path)
        if workflow.get("kind") != "Workflow":
            problems.append(f"argo submit: {name} is a {workflow.get('kind')}, not a Workflow")
            continue
        known = workflow_parameters(workflow)
        problems += [f"argo submit {name}: no parameter {p!r} (has {sorted(known)})" for p in params if p not in known]
    return problems


def check_paths(example: Example) -> list[str]:
    """Repository paths a kubectl or helm line names must exist (`charts/ccsweep`, `-f operator/...`)."""
    if not example.whole or example.argv[0] not in ("kubectl", "helm"):
        return []
    top = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
    paths = [w.split("=", 1)[-1] for w in example.argv[1:] if "/" in w]
    return [f"no such path {p}" for p in paths
            if p.split("/")[0] in top and not (REPO / p).exists()]


def problems_of(example: Example, targets: set[str]) -> list[str]:
    tool = example.argv[0]
    if tool == "ccsweep":
        return check_ccsweep(example)
    if tool == "make":
        return check_make(example, targets)
    if tool == "argo":
        return check_argo(example)
    return check_paths(example)


ALL_EXAMPLES = [e for doc in DOCS if doc.is_file() for e in examples_in(doc)]


@pytest.fixture(scope="module")
def targets() -> set[str]:
    return make_targets()


@pytest.mark.parametrize("example", ALL_EXAMPLES, ids=lambda e: f"{e.where}:{' '.join(e.argv)[:50]}")
def test_doc_example_names_only_what_exists(example: Example, targets: set[str]):
    assert problems_of(example, targets) == [], example.where


def test_the_docs_hold_examples_of_every_kind():
    """The extraction finds the examples; an empty list would pass everything above."""
    tools = collections.Counter(e.argv[0] for e in ALL_EXAMPLES)
    assert tools["ccsweep"] >= 20 and tools["make"] >= 5 and tools["argo"] >= 3, tools
    assert any(e.whole and e.argv[:2] == ("ccsweep", "validate") for e in ALL_EXAMPLES)


BROKEN_DOC = """\
Run `ccsweep frobnicate` or `ccsweep plan SPEC --no-such-flag`, then `make no-such-target`.

```sh
ccsweep validate no-such-preset
ccsweep run quick --jobs many
argo submit workflows/no-such.yaml
argo submit -n sweeps workflows/sweep.yaml -p spec=quick -p no-such-param=1
kubectl apply -f operator/examples/no-such/sweep.yaml
```
"""


def test_the_check_fails_on_a_doc_naming_what_does_not_exist(tmp_path: Path, targets: set[str]):
    doc = tmp_path / "broken.md"
    found = {e.argv: problems_of(e, targets) for e in examples_in(doc, BROKEN_DOC)}
    assert len(found) == 8, found
    assert all(found.values()), {k: v for k, v in found.items() if not v}
    text = "\n".join(p for ps in found.values() for p in ps)
    for expected in ("no subcommand 'frobnicate'", "no option --no-such-flag", "no target 'no-such-target'",
                     "no-such-preset", "'many' is not a valid integer", "no file workflows/no-such.yaml",
                     "no parameter 'no-such-param'", "no such path operator/examples/no-such/sweep.yaml"):
        assert expected in text, (expected, text)


def test_a_correct_doc_passes(tmp_path: Path, targets: set[str]):
    """The same kinds of example, naming what exists, give no problem."""
    good = ("`ccsweep plan SPEC --sweep NAME --spec-file FILE`\n\n```sh\nccsweep validate quick\n"
            "make test-unit\nargo submit workflows/sweep.yaml -p spec=quick -p sweep=quick \\\n  -p store=s3://b/p\n```\n")
    found = examples_in(tmp_path / "good.md", good)
    assert len(found) == 4
    assert [problems_of(e, targets) for e in found] == [[], [], [], []]


def reading_path_modules() -> list[Path]:
    text = (REPO / "docs/architecture.md").read_text()
    section = text.split("## Reading path", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"`([\w/]+\.py)`", section)
    return [REPO / n if n.startswith("operator/") else REPO / "src/ccsweep" / n for n in names]


def test_reading_path_names_every_module_once():
    named = collections.Counter(reading_path_modules())
    modules = {p for root in ("src/ccsweep", "operator/ccsweep_operator") for p in (REPO / root).rglob("*.py")}
    assert {p for p, n in named.items() if n > 1} == set(), "named more than once"
    assert set(named) - modules == set(), "named but not a module"
    assert modules - set(named) == set(), "modules docs/architecture.md's reading path leaves out"
