"""Tests for the linear-time regex search used on client schema patterns."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm.guards import _linear_regex

ATOMS = st.sampled_from(
    ["a", "b", "ab", ".", "[ab]", "[^a]", r"\d", r"\w", r"\s", "x", "-", "[a-c1]"]
)


def _regexes() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,}", "*?"])).map(
                lambda p: f"({p[0]}){p[1]}"
            ),
        )

    body = st.recursive(ATOMS, extend, max_leaves=6)
    starts = st.sampled_from(["", "^", r"\A", r"\b"])
    ends = st.sampled_from(["", "$", r"\Z"])
    return st.tuples(starts, body, ends).map("".join)


@settings(max_examples=400, deadline=None)
@given(pattern=_regexes(), text=st.text(alphabet="ab1 x-\n", max_size=10))
def test_agrees_with_re_search(pattern: str, text: str) -> None:
    # texts are short, so the backtracking reference finishes even on nested repeats
    assert _linear_regex.search(pattern, text) is (re.search(pattern, text) is not None)


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"^[a-z]+@[a-z]+\.com$", "me@example.com", True),
        (r"^[a-z]+@[a-z]+\.com$", "me@example.org", False),
        (r"^\d{3}-\d{4}$", "555-1234\n", True),  # Python's $ also matches before a final newline
        (r"^\d{3}-\d{4}\Z", "555-1234\n", False),
        (r"\bcat\b", "a cat sat", True),
        (r"\Bcat", "a cat sat", False),
        (r"colou?r", "my color", True),
        ("", "", True),
    ],
)
def test_examples(pattern: str, text: str, expected: bool) -> None:
    assert _linear_regex.search(pattern, text) is expected


def test_catastrophic_pattern_completes() -> None:
    # exponential for a backtracking engine; one pass over the text here
    assert _linear_regex.search(r"^(a+)+$", "a" * 5_000 + "!") is False
    assert _linear_regex.search(r"^(a|aa)*$", "a" * 5_000 + "!") is False
    assert _linear_regex.search(r"^(a+)+$", "a" * 5_000) is True


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",
        r"(?=a)a",
        r"(?<!b)a",
        r"(?i)a",
        r"(?i:a)",
        r"(?>a+)",
        r"a++",
        r"[",
        "a" * 3000,
        "(a{1000}){100}",
    ],
)
def test_unsupported_patterns_are_undecided(pattern: str) -> None:
    assert _linear_regex.search(pattern, "aaaa") is None
    assert _linear_regex.work(pattern, "aaaa") is None


def test_work_bound_is_known_before_running() -> None:
    work = _linear_regex.work("ab", "xyz")
    assert work == 4 * 3  # (len(text) + 1) positions x 3 instructions (two chars and match)
    assert _linear_regex.search("ab", "x" * 10, max_work=5) is None
