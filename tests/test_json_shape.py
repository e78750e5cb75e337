"""What a cut-off JSON text leaves open: one scanner for closing a cut final answer and
for finding the string a looping action was cut inside."""

from __future__ import annotations

import json

import pytest

from agentfsm.dialects._shape import Unclosed, unclosed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', Unclosed(None, "", False)),
        ('{"a": [1, {"b": 2', Unclosed(None, "}]}", False)),
        ('{"a": "x]}', Unclosed(6, "}", False)),
        ('{"a": "say \\"hi\\" then', Unclosed(6, "}", False)),
        ('{"a": "ends on \\', Unclosed(6, "}", True)),
        ('["x", "y\\\\", "z', Unclosed(13, "]", False)),
        ('', Unclosed(None, "", False)),
    ],
)
def test_what_is_left_open(text: str, expected: Unclosed) -> None:
    assert unclosed(text) == expected


@pytest.mark.parametrize(
    "value",
    [{"final": {"content": "a \"quoted\" [word] {x}"}}, ["a", {"b": ["c\\d", 1]}], {"k": "é\n"}],
)
def test_closing_every_cut_of_a_text_keeps_strings_and_brackets_balanced(value: object) -> None:
    text = json.dumps(value)
    for end in range(len(text) + 1):
        cut = text[:end]
        left = unclosed(cut)
        closed = (cut[:-1] if left.escape else cut) + ('"' if left.string is not None else "") + left.closers
        assert unclosed(closed) == Unclosed(None, "", False), cut
        if left.string is not None:
            assert cut[left.string] == '"'
