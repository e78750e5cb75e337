"""The chaos run, small: every count that must be 0 is 0 (the long form is ``make chaos``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _chaos() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chaos", BENCH / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos"] = module
    spec.loader.exec_module(module)
    return module


#: the new sections that run in seconds (each heavier one has regression tests of its own)
_QUICK = {"big_integers", "host_origin", "xml_and_quotes", "base_url", "transcript_keys", "tool_lists",
          "schema_stall", "stream_stall", "upstream_size", "two_batches", "tampered_transcripts"}


@pytest.mark.slow
def test_the_short_chaos_run_counts_nothing_wrong() -> None:
    chaos = _chaos()
    original = {"parser", "bad_input", "upstream_faults", "slow_body", "load", "injection", "answers", "secrets"}
    results = chaos.run(10, only=original | _QUICK)
    wrong = {
        f"{section}.{name}": value
        for section, counts in results.items()
        for name, value in counts.items()
        if name in chaos.MUST_BE_ZERO and value
    }
    assert wrong == {}
    # each section did run what it counts
    assert results["bad_input"]["requests"] > 0 and results["upstream_faults"]["requests"] > 0
    assert results["slow_body"]["half_bodies"] > 0 and results["injection"]["requests"] > 0
    assert results["load"]["requests"] > 0
    assert results["answers"]["gave_up"] > 0 and results["answers"]["answered"] > 0
    assert results["secrets"]["forced_500s"] > 0 and results["secrets"]["texts_searched"] > 0
    assert results["big_integers"]["requests"] > 0 and results["host_origin"]["requests"] > 0
    assert results["xml_and_quotes"]["replies"] > 0 and results["transcript_keys"]["runs"] > 0
    assert results["base_url"]["starts"] > 0 and results["tool_lists"]["requests"] >= 3
    assert results["schema_stall"]["probes"] > 0 and results["stream_stall"]["probes"] > 0
    assert results["upstream_size"]["requests"] > 0 and results["two_batches"]["pairs"] > 0
    # a section that stops running (the full run crashed in this one once: an API it used
    # had gone) fails here, not in make bench
    assert results["tampered_transcripts"]["files"] >= 7


def test_every_section_is_listed_and_every_zero_count_is_one_a_section_makes() -> None:
    chaos = _chaos()
    assert set(chaos.SECTIONS) >= _QUICK | {"injection_variants", "key_forms", "schema_stall", "stream_stall",
                                             "upstream_size", "slow_headers", "two_batches", "tampered_transcripts"}
    assert list(chaos.SECTIONS)[-1] == "secrets"  # it searches what the others left


def test_the_table_marks_a_count_that_should_be_zero() -> None:
    chaos = _chaos()
    text = chaos.render({"secrets": {"canary_hits": 2, "texts_searched": 9}}, 1, 1.0)
    assert "| secrets | canary_hits* | 2 **FAIL** |" in text
    assert "| secrets | texts_searched | 9 |" in text
