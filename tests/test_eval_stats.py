"""The Wilson 95 % interval of an accuracy."""

from __future__ import annotations

import pytest

from agentfsm.eval.stats import wilson_interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # reference values (statsmodels' proportion_confint(method="wilson"), alpha 0.05)
        (5, 10, 0.2366, 0.7634),
        (1, 10, 0.0179, 0.4042),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (20, 40, 0.3520, 0.6480),
    ],
)
def test_wilson_interval_matches_reference_values(successes: int, n: int, low: float, high: float) -> None:
    assert wilson_interval(successes, n) == pytest.approx((low, high), abs=1e-4)


def test_the_interval_holds_the_point_narrows_with_cases_and_is_symmetric() -> None:
    for n in (1, 7, 40, 300):
        for k in range(n + 1):
            low, high = wilson_interval(k, n)
            assert 0.0 <= low <= k / n <= high <= 1.0
            mirror = wilson_interval(n - k, n)
            assert (low, high) == pytest.approx((1 - mirror[1], 1 - mirror[0]))
    widths = [wilson_interval(n // 2, n)[1] - wilson_interval(n // 2, n)[0] for n in (10, 40, 160)]
    assert widths == sorted(widths, reverse=True) and widths[0] > 0.5 > 0.3 > widths[1] > 0.25 > widths[2]


def test_no_cases_means_nothing_is_known_and_bad_counts_are_refused() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(-1, 2)
