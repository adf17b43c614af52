#!/usr/bin/env python3
"""Write the values table of README.md from the `# --` comments in values.yaml (as helm-docs does).

    python3 charts/ccsweep/readme.py          # rewrite the table in README.md
    python3 charts/ccsweep/readme.py --check  # exit 1 when README.md is out of date

A key documented with `# --` is one row (its whole value is the default, even a mapping); a
mapping without a comment is descended into. tests/chart checks the README is current.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- values-table:begin -->", "<!-- values-table:end -->"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):")


def documented_keys(text: str) -> list[tuple[str, str]]:
    """(dotted key, description) for every key preceded by a `# --` comment, in file order."""
    rows, path, pending = [], [], None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = stripped.removeprefix("# --").strip()
            continue
        match = KEY.match(line)
        if not match or stripped.startswith("-"):
            continue
        depth = len(match["indent"]) // 2
        path = path[:depth] + [match["key"]]
        if pending is not None:
            rows.append((".".join(path), pending))
            pending = None
    return rows


def lookup(values: dict, dotted: str) -> object:
    node: object = values
    for part in dotted.split("."):
        node = node[part]  # type: ignore[index]
    return node


def table(values_text: str) -> str:
    values = yaml.safe_load(values_text)
    lines = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for key, description in documented_keys(values_text):
        value = lookup(values, key)
        kind = {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "object"}[type(value)]
        default = json.dumps(value, separators=(", ", ": ")).replace("|", "\\|")
        lines.append(f"| {key} | {kind} | `{default}` | {description} |")
    return "\n".join(lines)


def render(readme: str, values_text: str) -> str:
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table(values_text)}\n{END}{tail}"


def main(argv: list[str]) -> int:
    readme_path = HERE / "README.md"
    current = readme_path.read_text()
    wanted = render(current, (HERE / "values.yaml").read_text())
    if "--check" in argv:
        if current != wanted:
            print(f"{readme_path}: values table out of date (run python3 {Path(__file__).name})", file=sys.stderr)
            return 1
        return 0
    readme_path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
