"""Clauses: a call takes its values from the part of the request that asks for its
tool; a misplaced value is sent back once per round, and the retry's grammar holds the
call to the right clause's numbers."""

from __future__ import annotations

from agentfsm.core._types import POLICY_NAMES
from agentfsm.core.backend import Capabilities
from agentfsm.engine.decide import CallTools, Correct, EngineConfig, plan, step
from agentfsm.core.messages import AssistantMessage, Message, ToolSpec, UserMessage
from agentfsm.policy import clauses
from agentfsm.guards.base import Accept, Correction
from agentfsm.prompt.grammar import grammar_schema

from tests._histories import MATH, PLACES, after, call

TWO_SUMS = "Multiply 3 by 7, and add 10 and 5."
CHAIN = "Add 30 and 12, then convert the sum from km to miles."
CONSTRAINED = Capabilities(json_schema=True)


def config() -> EngineConfig:
    return EngineConfig(tools=MATH, dialect="json-protocol", tool_choice="auto", grounding=True, policies=POLICY_NAMES)


def test_a_request_is_cut_into_clauses_each_with_the_tools_it_names() -> None:
    assert clauses.clauses(TWO_SUMS, MATH) == [("Multiply 3 by 7", {"multiply"}), ("and add 10 and 5", {"add"})]
    assert clauses.clauses(CHAIN, MATH) == [("Add 30 and 12", {"add"}),
                                            ("then convert the sum from km to miles", {"convert_km_to_miles"})]
    # a decimal point is not a full stop; plural names count
    assert clauses.clauses("What is 12.5 times 4?", MATH) == [("What is 12.5 times 4", set())]
    assert clauses.clauses("What are the capitals of Peru and Kenya?", PLACES) == [
        ("What are the capitals of Peru and Kenya", {"get_capital"})]
    assert clauses.name_words(MATH[2]) == {"convert", "miles"}


def test_a_value_from_another_tools_clause_is_misplaced() -> None:
    found = clauses.misplaced([UserMessage(content=TWO_SUMS)], [call("add", a=3, b=10)], MATH)
    assert found is not None and found.value == 3.0 and found.clause == "Multiply 3 by 7"
    assert found.owners == {"multiply"}
    chain = clauses.misplaced([UserMessage(content=CHAIN)], [call("convert_km_to_miles", km=12)], MATH)
    assert chain is not None and chain.owners == {"add"}


def test_values_in_place_or_from_results_or_unplaceable_pass() -> None:
    request = [UserMessage(content=TWO_SUMS)]
    assert clauses.misplaced(request, [call("multiply", a=3, b=7), call("add", 1, a=10, b=5)], MATH) is None
    # a result's value is in no clause
    chained = after(CHAIN, (call("add", a=30, b=12), "42.0"))
    assert clauses.misplaced(chained, [call("convert_km_to_miles", 1, km=42)], MATH) is None
    # one clause naming tools: nothing to place ("Paris weather and Tokyo time" is one part)
    one = [UserMessage(content="Multiply 3 by 7 and add 10 and 5")]
    assert clauses.misplaced(one, [call("add", a=3, b=10)], MATH) is None
    # a tool the request never names cannot be misplaced
    unnamed = [UserMessage(content="Multiply 3 by 7, then add 10.")]
    assert clauses.misplaced(unnamed, [call("convert_km_to_miles", km=3)], MATH) is None


def test_the_correction_names_the_clause_and_the_retry_holds_its_numbers() -> None:
    history = [UserMessage(content=TWO_SUMS)]
    decision = step(history, '{"action": {"tool": "add", "args": {"a": 3, "b": 10}}}', config())
    assert isinstance(decision, Correct) and decision.reason == "misplaced_value"
    assert decision.message.content == (
        'add took 3 from "Multiply 3 by 7", the part of the request for multiply. '
        'Call multiply with the values of "Multiply 3 by 7", or answer the user.'
    )
    history += [decision.assistant, decision.message]
    offered = plan(history, config(), CONSTRAINED, "constrained").tools
    assert [t.name for t in offered] == ["multiply"]
    # one number per parameter: each once, in either order
    schema = grammar_schema(offered[0].parameters)
    branches = [{k: v["const"] for k, v in b["properties"].items()} for b in schema["anyOf"]]
    assert branches == [{"a": 3, "b": 7}, {"a": 7, "b": 3}]
    # told once per round: the same misplaced call again runs
    assert isinstance(step(history, '{"action": {"tool": "add", "args": {"a": 3, "b": 10}}}', config()), CallTools)


def test_once_the_values_task_is_done_the_retry_holds_the_called_tool_to_its_own_clause() -> None:
    history = after(TWO_SUMS, (call("multiply", a=3, b=7), "21.0"))
    decision = step(history, '{"action": {"tool": "add", "args": {"a": 3, "b": 7}}}', config())
    assert isinstance(decision, Correct) and decision.reason == "misplaced_value"
    history += [decision.assistant, decision.message]
    offered = plan(history, config(), CONSTRAINED, "constrained").tools
    assert [t.name for t in offered] == ["add"]
    branches = [{k: v["const"] for k, v in b["properties"].items()} for b in offered[0].parameters["anyOf"]]
    assert branches == [{"a": 5, "b": 10}, {"a": 10, "b": 5}]


def test_a_clause_short_of_numbers_takes_the_rest_from_the_results() -> None:
    request = "Multiply 6 by 7, then add 5 to the product."
    history = after(request, (call("multiply", a=6, b=7), "42.0"))
    decision = step(history, '{"action": {"tool": "add", "args": {"a": 6, "b": 5}}}', config())
    assert isinstance(decision, Correct) and decision.reason == "misplaced_value"
    history += [decision.assistant, decision.message]
    (offered,) = plan(history, config(), CONSTRAINED, "constrained").tools
    branches = [{k: v["const"] for k, v in b["properties"].items()} for b in offered.parameters["anyOf"]]
    assert branches == [{"a": 5, "b": 42}, {"a": 42, "b": 5}]


def test_more_numbers_than_parameters_each_parameter_takes_any_of_them() -> None:
    request = "Multiply 6 by 7, then add 5 and 8 and 9."
    history = after(request, (call("multiply", a=6, b=7), "42.0"))
    decision = step(history, '{"action": {"tool": "add", "args": {"a": 6, "b": 5}}}', config())
    assert isinstance(decision, Correct)
    history += [decision.assistant, decision.message]
    (offered,) = plan(history, config(), CONSTRAINED, "constrained").tools
    assert offered.parameters["properties"]["a"]["enum"] == [5, 8, 9]
    assert offered.parameters["properties"]["b"]["type"] == "number"


def test_off_without_grounding_and_a_new_round_is_checked_again() -> None:
    plain = EngineConfig(tools=MATH, dialect="json-protocol", tool_choice="auto")
    assert isinstance(step([UserMessage(content=TWO_SUMS)], '{"action": {"tool": "add", "args": {"a": 3, "b": 10}}}',
                           plain), CallTools)
    told = [UserMessage(content=TWO_SUMS), AssistantMessage(content="x"),
            UserMessage(content="y", correction="misplaced_value")]
    assert isinstance(clauses.check(told, [call("add", a=3, b=10)], MATH), Accept)
    later = after(TWO_SUMS, (call("multiply", a=3, b=7), "21.0"))
    assert isinstance(clauses.check(told[:1] + told[1:] + later[1:], [call("add", 1, a=3, b=10)], MATH), Correction)


def _derivative() -> ToolSpec:
    def calculate_derivative(function: str, x_value: float = 0.0) -> str:
        """The derivative of a polynomial function, at x_value."""
        return f"d/dx {function} at {x_value}"

    return ToolSpec.from_callable(calculate_derivative)


def test_an_optional_number_written_only_inside_another_arguments_text_is_misplaced() -> None:
    tools = [_derivative()]
    cfg = EngineConfig(tools=tools, dialect="json-protocol", tool_choice="auto", grounding=True, policies=POLICY_NAMES)
    history: list[Message] = [UserMessage(content="Calculate the derivative of the function 3x^2 + 2x - 1.")]
    reply = '{"action": {"tool": "calculate_derivative", "args": {"function": "3x^2 + 2x - 1", "x_value": 3}}}'
    decision = step(history, reply, cfg)
    assert isinstance(decision, Correct) and decision.reason == "misplaced_value"
    assert decision.message.content == (
        'x_value=3 is part of function "3x^2 + 2x - 1", not a value the user gave for x_value. '
        "Call calculate_derivative without x_value, or answer the user."
    )
    history += [decision.assistant, decision.message]
    (offered,) = plan(history, cfg, CONSTRAINED, "constrained").tools
    assert list(offered.parameters["properties"]) == ["function"]
    # the call without it runs
    assert isinstance(step(history, '{"action": {"tool": "calculate_derivative", "args": '
                                    '{"function": "3x^2 + 2x - 1"}}}', cfg), CallTools)


def test_a_number_the_request_also_writes_on_its_own_or_a_required_one_is_not_nested() -> None:
    tools = [_derivative()]
    made = call("calculate_derivative", function="3x^2 + 2x - 1", x_value=3)
    # "at x = 3": the 3 stands on its own too
    assert clauses.nested([UserMessage(content="The derivative of 3x^2 + 2x - 1 at x = 3")], [made], tools) is None
    # a number the model did not take from the formula is grounding's business, not this one's
    other = call("calculate_derivative", function="3x^2 + 2x - 1", x_value=5)
    assert clauses.nested([UserMessage(content="The derivative of 3x^2 + 2x - 1")], [other], tools) is None
    found = clauses.nested([UserMessage(content="The derivative of 3x^2 + 2x - 1")], [made], tools)
    assert found is not None and (found.param, found.within, found.value) == ("x_value", "function", 3.0)
    # a required parameter is left alone: leaving it out is no remedy
    strict = ToolSpec(name="f", parameters={"type": "object", "properties": {"text": {"type": "string"},
                                            "n": {"type": "integer"}}, "required": ["text", "n"]})
    assert clauses.nested([UserMessage(content="Count words in 'top 10 songs'")],
                          [call("f", text="top 10 songs", n=10)], [strict]) is None
