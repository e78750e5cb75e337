"""The parser chaos run (bench/chaos_parser.py) at a small size: every count that should be 0 is 0.

``make chaos`` runs it at 100,000 inputs; this is the same generator, so a defect it
finds shows up here with a fixed seed.
"""

from __future__ import annotations

import pytest

from bench.chaos_parser import COUNTS, run


@pytest.mark.parametrize("seed", [0, 1])
def test_parser_chaos_counts_are_zero(seed: int) -> None:
    counts = run(1000, seed)
    assert set(counts) == set(COUNTS)
    assert counts["inputs"] == 1000
    assert {k: v for k, v in counts.items() if k != "inputs"} == {
        "untyped_exceptions": 0,
        "calls_from_cut_input": 0,
        "calls_with_unwritten_arguments": 0,
        "stream_vs_whole_differences": 0,
    }
