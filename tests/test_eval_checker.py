"""The ported AST checker agrees with BFCL's official one (its heavy imports stubbed here only)."""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm.eval import checker
from agentfsm.eval.bfcl_data import BfclCase, load_cases

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bfcl"
Official = Callable[..., dict[str, Any]]


class _Config:
    underscore_to_dot = False


class _Mapping(dict[str, Any]):
    def __getitem__(self, key: str) -> Any:
        return _Config()


@pytest.fixture(scope="module")
def official() -> Iterator[Official]:
    """BFCL's ``ast_checker`` with its model registry (every provider SDK) stubbed out."""
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = _Mapping()  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "bfcl_eval.constants.model_config", stub)
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

        def run(functions: list[dict[str, Any]], output: Any, truth: list[dict[str, Any]], category: str) -> Any:
            return ast_checker(functions, output, truth, Language.PYTHON, category, "agentfsm")

        yield run


def _first_value(allowed: list[Any]) -> Any:
    for value in allowed:
        if value != "":
            return value
    return None


def _perturb(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + " extra"
    if isinstance(value, list):
        return value[:-1] if value else [1]
    if isinstance(value, dict):
        return {**value, "unexpected": 1}
    return value


def _candidates(case: BfclCase) -> Iterator[list[dict[str, Any]]]:
    """Outputs around the answer key: right, minimal, perturbed, renamed, extra, int-for-float, reordered."""
    assert case.ground_truth is not None
    right: list[dict[str, Any]] = []
    minimal: list[dict[str, Any]] = []
    for call in case.ground_truth:
        name, params = next(iter(call.items()))
        full = {p: _first_value(v) for p, v in params.items() if _first_value(v) is not None}
        # a dict possible answer holds lists of allowed values per key: take the first of each
        for p, v in list(full.items()):
            if isinstance(v, dict):
                full[p] = {k: _first_value(vs) if isinstance(vs, list) else vs for k, vs in v.items()}
        right.append({name: full})
        minimal.append({name: {p: v for p, v in full.items() if "" not in params[p]}})
    yield right
    yield minimal
    yield list(reversed(right))
    yield right + right[:1]
    yield []
    for i, call in enumerate(right):
        name, params = next(iter(call.items()))
        yield right[:i] + [{name + "_x": params}] + right[i + 1 :]
        yield right[:i] + [{name: {**params, "bogus_param": 1}}] + right[i + 1 :]
        for p, v in params.items():
            yield right[:i] + [{name: {**params, p: _perturb(v)}}] + right[i + 1 :]
            if isinstance(v, float) and v.is_integer():
                yield right[:i] + [{name: {**params, p: int(v)}}] + right[i + 1 :]
            if isinstance(v, str):
                yield right[:i] + [{name: {**params, p: v.upper().replace(" ", "-")}}] + right[i + 1 :]
            if isinstance(v, list):
                yield right[:i] + [{name: {**params, p: tuple(v)}}] + right[i + 1 :]


def _sample_cases() -> list[BfclCase]:
    cases: list[BfclCase] = []
    for category in ("simple_python", "multiple", "parallel"):
        cases += load_cases(category, data_dir=FIXTURES)
    for category in ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple"):
        cases += load_cases(category, limit=25)
    # the live parallel categories are small: all of them (the quality gate runs them whole)
    for category in ("live_parallel", "live_parallel_multiple"):
        cases += load_cases(category)
    return cases


def test_port_agrees_with_the_official_checker_on_a_sample(official: Official) -> None:
    compared = 0
    valid_seen = 0
    for case in _sample_cases():
        assert case.ground_truth is not None
        for output in _candidates(case):
            functions = copy.deepcopy(list(case.functions))
            truth = copy.deepcopy(list(case.ground_truth))
            ours = checker.ast_checker(functions, copy.deepcopy(output), truth, case.category)
            theirs = official(copy.deepcopy(functions), copy.deepcopy(output), copy.deepcopy(truth), case.category)
            assert ours["valid"] == theirs["valid"], (case.id, output, ours, theirs)
            if not theirs["valid"]:
                assert ours["error_type"] == theirs["error_type"], (case.id, output)
            compared += 1
            valid_seen += bool(ours["valid"])
    assert compared > 1000
    assert 50 < valid_seen < compared  # the sample has both verdicts in numbers


@pytest.mark.parametrize(
    ("case_id", "output", "valid"),
    [
        ("simple_python_0", [{"weather.get": {"city": "paris"}}], True),
        ("simple_python_0", [{"weather.get": {"city": "Paris,France", "unit": "celsius"}}], True),
        ("simple_python_0", [{"weather.get": {"city": "Lyon"}}], False),
        ("simple_python_1", [{"circle_area": {"radius": 3}}], True),
        ("simple_python_1", [{"circle_area": {"radius": "3"}}], False),
        ("simple_python_2", [{"sort_numbers": {"numbers": [3, 1, 2], "descending": True}}], True),
        ("simple_python_2", [{"sort_numbers": {"numbers": [3, 1, 2]}}], False),
        (
            "simple_python_2",
            [{"sort_numbers": {"numbers": [3, 1, 2], "descending": True, "options": {"stable": True}}}],
            True,
        ),
        ("multiple_0", [{"convert_length": {"value": 10, "from_unit": "mi", "to_unit": "km"}}], True),
        ("multiple_0", [{"convert_weight": {"value": 10, "from_unit": "mi", "to_unit": "km"}}], False),
        ("parallel_0", [{"city.population": {"city": "Lima"}}, {"city.population": {"city": "Oslo"}}], True),
        ("parallel_0", [{"city.population": {"city": "Lima"}}], False),
    ],
)
def test_fixture_verdicts(official: Official, case_id: str, output: list[dict[str, Any]], valid: bool) -> None:
    category = case_id.rsplit("_", 1)[0]
    case = next(c for c in load_cases(category, data_dir=FIXTURES) if c.id == case_id)
    truth = list(case.ground_truth or [])
    assert checker.check_case(category, list(case.functions), truth, output)["valid"] is valid
    assert official(list(case.functions), output, truth, category)["valid"] is valid


@pytest.mark.parametrize(
    ("category", "decoded", "valid", "error_type"),
    [
        ("irrelevance", [], True, None),
        ("irrelevance", [{}], True, None),
        ("irrelevance", None, True, None),
        ("irrelevance", "prose", True, None),
        ("irrelevance", [{"f": {"a": 1}}], False, "irrelevance_error:decoder_success"),
        ("live_relevance", [{"f": {}}], True, None),
        ("live_relevance", [], False, "relevance_error:decoder_failed"),
    ],
)
def test_relevance_rule(category: str, decoded: Any, valid: bool, error_type: str | None) -> None:
    result = checker.check_case(category, [], None, decoded)
    assert result["valid"] is valid
    assert result.get("error_type") == error_type


def test_undecoded_and_misshapen_outputs_are_wrong_in_ast_categories() -> None:
    case = load_cases("simple_python", data_dir=FIXTURES)[0]
    truth = list(case.ground_truth or [])
    assert checker.check_case("simple_python", list(case.functions), truth, None)["error_type"] == "ast_decoder:decoder_failed"
    shaped = checker.check_case("simple_python", list(case.functions), truth, ["weather.get(city='Paris')"])
    assert shaped["error_type"] == "ast_decoder:decoder_wrong_output_format"


def test_standardize_string_matches_bfcl_rules() -> None:
    assert checker.standardize_string("New York, NY") == "newyorkny"
    assert checker.standardize_string("it's_A-b/c.d*e^f") == 'it"sabcdef'
