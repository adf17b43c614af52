"""Command-line value types the benchmarks share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def number_list(noun: str, unit: str, low: float, high: float, example: str) -> Callable[[str], list[float]]:
    """An argparse type: a comma-separated list of numbers, each within [low, high] (in `unit`)."""

    def parse(text: str) -> list[float]:
        try:
            values = [float(part) for part in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {noun}s in {unit}, e.g. {example}") from None
        if any(not low <= v <= high for v in values):
            raise argparse.ArgumentTypeError(f"{text!r}: each {noun} must be {low:g}-{high:g} {unit}")
        return values

    return parse
