"""BFCL's prompt mode, ported: same system prompt and decoder as the official code."""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm.eval.baseline import bfcl_prompt_messages, bfcl_system_prompt, decode_ast_prompting
from agentfsm.eval.bfcl_data import load_cases

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bfcl"


@pytest.fixture(scope="module")
def official_utils() -> Iterator[types.ModuleType]:
    """``bfcl_eval.model_handler.utils`` with its tree-sitter parsers (Java, JS) stubbed out."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("java_parser", "js_parser"):
            stub = types.ModuleType(f"bfcl_eval.model_handler.parser.{name}")
            stub.parse_java_function_call = None  # type: ignore[attr-defined]
            stub.parse_javascript_function_call = None  # type: ignore[attr-defined]
            mp.setitem(sys.modules, f"bfcl_eval.model_handler.parser.{name}", stub)
        import bfcl_eval.model_handler.utils as utils

        yield utils


def test_system_prompt_matches_bfcl(official_utils: types.ModuleType) -> None:
    for case in load_cases("simple_python", limit=5) + load_cases("multiple", data_dir=FIXTURES):
        messages = [dict(m) for m in case.messages]
        theirs = official_utils.system_prompt_pre_processing_chat_model(
            copy.deepcopy(messages), copy.deepcopy(list(case.functions)), case.id
        )
        assert bfcl_prompt_messages(messages, list(case.functions)) == theirs


def test_existing_system_message_is_prefixed(official_utils: types.ModuleType) -> None:
    functions: list[dict[str, Any]] = [{"name": "f", "description": "d", "parameters": {"type": "dict", "properties": {}}}]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    ours = bfcl_prompt_messages(messages, functions)
    assert ours == official_utils.system_prompt_pre_processing_chat_model(copy.deepcopy(messages), functions, "x_0")
    assert ours[0]["content"].endswith("\n\nBe brief.")
    assert ours[0]["content"].startswith(bfcl_system_prompt(functions))


REPLIES = [
    "[get_weather(city='Paris')]",
    "get_weather(city='Paris', unit=\"celsius\")",
    "```\n[math.factorial(number=5)]\n```",
    "[a.b.c(x=1, y=-2.5, z=[1, 2], w={'k': (1, 2)}, n=None, t=True)]",
    "[f(a=1), g(b='two')]",
    "[f(x=2*3), f(y=2**10), f(z='ab' + 'cd')]",
    "[f(x=np.array)]",
    "[f(x=foo(1)), f(y=foo(k=1))]",
    "[f(x=data[0])]",
    "[f(1, 2, a=3)]",
    "'[f(a=1)]'",
    "I cannot help with that.",
    "[f(a=)]",
    "[1, 2]",
    "f",
    "",
    "[f(x=lambda: 1)]",
    "[f(x=not True)]",
    "[f(x=-y)]",
]


@pytest.mark.parametrize("reply", REPLIES)
def test_decoder_matches_bfcl(official_utils: types.ModuleType, reply: str) -> None:
    try:
        theirs: Any = official_utils.default_decode_ast_prompting(reply)
    except Exception:  # noqa: BLE001 - any failure of theirs is "did not decode"
        theirs = None
    try:
        ours: Any = decode_ast_prompting(reply)
    except Exception:  # noqa: BLE001
        ours = None
    assert ours == theirs


def test_decoder_bounds_arithmetic_bfcl_would_eval() -> None:
    with pytest.raises(ValueError, match="exponent"):
        decode_ast_prompting("[f(x=10**100000)]")
    with pytest.raises(ValueError, match="repetition"):
        decode_ast_prompting("[f(x='a' * 10**8)]")
