"""Intervals for accuracies measured on few cases: the Wilson score interval.

At 50 % on 10 cases the 95 % interval is about 24-76 %: two tables differ by more than
noise only where their intervals say so. Wilson's interval (not the normal
approximation) stays inside 0-100 % and is honest at 0 and at n (0 of 10 is 0-28 %).
"""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson_interval"]

#: the two-sided 95 % normal quantile
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n``, as fractions in [0, 1].
    ``(0.0, 1.0)`` when ``n`` is 0: nothing measured, nothing known."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # exact bounds at 0 and n (the formula gives them up to rounding)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)

