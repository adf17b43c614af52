"""The command line of a results folder's README generator: write DIR/README.md from the folder's
data alone, or, with --check, say whether the committed README is still what the data give (exit 1
if not), so a number edited by hand or data changed without the text is caught."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def readme_main(description: str, readme: Callable[[Path], str], argv: list[str] | None = None) -> int:
    """Runs the generator `readme` (a folder's README text from its files) as a command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs from the data's text")
    args = parser.parse_args(argv)
    text = readme(args.folder)
    target = args.folder / "README.md"
    if args.check:
        return 0 if target.exists() and target.read_text() == text else 1
    target.write_text(text)
    return 0
