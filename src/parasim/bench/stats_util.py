"""Small statistics the benchmarks share (no benchmark here: this module has no ``main``)."""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson"]

#: The normal quantile of a two-sided 95 % interval.
Z95 = 1.959964


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``k`` successes in ``n`` trials, rounded to 4 digits and
    kept within [0, 1] (None when ``n`` is 0); ``k`` and ``n`` may be effective (weighted)
    counts."""
    if n <= 0:
        return None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (round(max(0.0, c - h), 4), round(min(1.0, c + h), 4))
