"""Numbers quoted in prose, filled from data between generated markers.

A results README (and README.md where it quotes one) writes each number it takes from data as

    <!-- value: NAME -->42.1<!-- /value -->

and a result folder's `report` module computes every NAME from the folder's committed files. The
text between the markers is generated, the rest is prose: `fill` rewrites the former and leaves the
latter byte for byte, so regenerating a committed README reproduces it exactly, and a number changed
by hand no longer matches what its data gives (tests/unit/test_quoted_numbers.py). A value may span
lines: a table is written with blank lines around it, between markers on lines of their own, since
a line that starts with an HTML comment is not a table row. A marker naming no computed value is an
error: the prose quotes a number its data no longer gives.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

MARKER = re.compile(r"<!-- value: (?P<name>[a-z0-9][a-z0-9._-]*) -->(?P<body>.*?)<!-- /value -->", re.DOTALL)


class QuoteError(ValueError):
    """Prose and data name different values."""


def names(text: str) -> list[str]:
    """The value names `text` quotes, in order (a name may be quoted more than once)."""
    return [match["name"] for match in MARKER.finditer(text)]


def block(table: Iterable[str]) -> str:
    """A Markdown table's lines as a quoted value: on lines of its own between its markers, blank
    lines around it (a line that starts with the marker is not a table row)."""
    return "\n\n" + "\n".join(table) + "\n\n"


def fill(text: str, values: Mapping[str, str]) -> str:
    """`text` with every marker's body replaced by its value; the prose around them unchanged."""
    unknown = sorted(set(names(text)) - set(values))
    if unknown:
        raise QuoteError(f"quoted but not computed: {', '.join(unknown)}")

    def filled(match: re.Match[str]) -> str:
        # A value of several lines (a table) keeps the indentation of the line it starts on, so a
        # table inside a list item stays inside it.
        line = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
        indent = line[:len(line) - len(line.lstrip(" "))]
        lines = values[match["name"]].split("\n")
        body = "\n".join([lines[0], *(indent + line if line or at == len(lines) - 1 else line
                                       for at, line in enumerate(lines[1:], start=1))])
        return f"<!-- value: {match['name']} -->{body}<!-- /value -->"

    return MARKER.sub(filled, text)


def regenerate_main(readme: Path, compute: Callable[[], Mapping[str, str]], description: str | None) -> None:
    """A result folder's `report` command: rewrite the README's quoted values from its data, or with
    --check change nothing and exit 1 if they differ."""
    regenerate_all([(readme, compute)], description)


def regenerate_all(readmes: Sequence[tuple[Path, Callable[[], Mapping[str, str]]]], description: str | None) -> None:
    """`regenerate_main` for several READMEs, each with its own values (one report module, a folder
    per run): with --check, exit 1 if any differs."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a README differs")
    args = parser.parse_args()
    differ = False
    for readme, compute in readmes:
        committed = readme.read_text()
        regenerated = fill(committed, compute())
        if regenerated == committed:
            continue
        differ = True
        if args.check:
            print(f"{readme}: its quoted numbers differ from what the data gives", file=sys.stderr)
        else:
            readme.write_text(regenerated)
            print(f"rewrote {readme}")
    if args.check:
        sys.exit(1 if differ else 0)
