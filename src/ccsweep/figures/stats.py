"""Confidence intervals for repeated cells: Student's t-interval, computed exactly.

Repetitions are few (2-10), so the normal approximation would understate the interval badly
(at n = 3 the 95 % multiplier is 4.30, not 1.96).  For an integer number of degrees of freedom the
t distribution's CDF has a closed form (Abramowitz & Stegun 26.7.3-4), so the quantile is found by
bisection without a statistics library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np

CONFIDENCE = 0.95


def t_central_probability(t: float, dof: int) -> float:
    """P(|T| < t) for Student's t with `dof` degrees of freedom (t >= 0)."""
    theta = math.atan(t / math.sqrt(dof))
    s, c = math.sin(theta), math.cos(theta)
    if dof % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = c, 0.0 if dof == 1 else c
        for k in range(3, dof - 1, 2):
            term *= (k - 1) / k * c * c
            total += term
        return 2 / math.pi * (theta + s * total)
    term, total = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for k in range(2, dof - 1, 2):
        term *= (k - 1) / k * c * c
        total += term
    return s * total


@cache
def t_critical(dof: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided critical value: P(|T| < t) = confidence."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    low, high = 0.0, 1.0
    while t_central_probability(high, dof) < confidence:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if t_central_probability(mid, dof) < confidence else (low, mid)
    return (low + high) / 2


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float | None]:
    """Mean and the half-width of its t-interval; no interval (None) for a single value."""
    if not values:
        raise ValueError("no values")
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if data.size < 2:
        return mean, None
    return mean, t_critical(data.size - 1, confidence) * float(data.std(ddof=1)) / math.sqrt(data.size)


def mean_ci_columns(rows: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray | None]:
    """Per column of a (runs x samples) array: mean and t-interval half-width (None for one run)."""
    mean = np.nanmean(rows, axis=0)
    if rows.shape[0] < 2:
        return mean, None
    half = t_critical(rows.shape[0] - 1, confidence) * np.nanstd(rows, axis=0, ddof=1) / math.sqrt(rows.shape[0])
    return mean, half
