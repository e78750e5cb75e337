"""The task suite's data: kinds, wordings, languages, the held-out split, the fake tools."""

from __future__ import annotations

import os
import re

import pytest

from agentfsm.eval.fake_tools import EVERYDAY, TOOLS, convert_currency, get_capital, get_current_time, get_weather
from agentfsm.eval.matching import ANY, OneOf, answer_matches
from agentfsm.eval.suite import KINDS
from agentfsm.eval.suite_data import BASE_TASKS, HELD_OUT, HELD_OUT_SEED, LANGUAGES, TASKS, BaseTask, expand, held_out_bases
from agentfsm.runtime.tools import ToolRegistry

SPECS = {s.name: s for s in ToolRegistry(list(TOOLS.values())).specs}
#: English function words: what a "content word" is not (for this test of the data only)
STOP = set(
    "a an the and or but of in on at to for from by with about into as is are was were be been am it its i "
    "im me my we our you your he she they them this that these those there here what whats which who where "
    "when why how much many do does did have has had get got can could would should will may might must "
    "please tell give show say one now right then also any some all just very so than too not no yes".split()
)


def _content(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower().replace("'", "")) if len(w) >= 3 and w not in STOP}


def _same(a: str, b: str) -> bool:
    """The same word, a plural of it, or one sharing a stem of five letters ("kilometers", "kilometres")."""
    return a == b or a.rstrip("s") == b.rstrip("s") or len(os.path.commonprefix([a, b])) >= 5


def _tool_words(name: str) -> set[str]:
    spec = SPECS[name]
    return _content(" ".join([name.replace("_", " "), spec.description, *spec.parameters.get("properties", {})]))


def test_the_suite_has_every_kind_and_at_least_60_tasks() -> None:
    assert len(TASKS) >= 60 and len({t.name for t in TASKS}) == len(TASKS)
    assert {b.kind for b in BASE_TASKS} == set(KINDS)
    assert len({b.name for b in BASE_TASKS}) == len(BASE_TASKS)
    assert {t.tool_choice for t in TASKS} >= {"auto", "required", "convert_km_to_miles"}
    assert all(b.tool_choice != "auto" for b in BASE_TASKS if b.kind == "one call (required)")
    assert all(len(b.calls) == 2 for b in BASE_TASKS if b.kind in ("two calls", "chain"))
    assert all(not b.calls for b in BASE_TASKS if b.kind == "no tool")
    # tool choice among many: some base tasks of each calling kind offer the ten everyday tools
    assert len(EVERYDAY) == 10
    assert {b.kind for b in BASE_TASKS if b.tools == EVERYDAY} == set(KINDS)


@pytest.mark.parametrize("base", BASE_TASKS, ids=lambda b: b.name)
def test_every_base_task_has_three_english_wordings_and_three_other_languages(base: BaseTask) -> None:
    wordings = base.wordings
    assert len(set(wordings["en"])) >= 3
    others = [lang for lang in wordings if lang != "en" and wordings[lang]]
    assert len(others) >= 3 and {"de", "es", "fr"} <= set(others)
    assert all(prompt.strip() == prompt and prompt for prompts in wordings.values() for prompt in prompts)


@pytest.mark.parametrize("base", BASE_TASKS, ids=lambda b: b.name)
def test_one_english_wording_shares_no_content_word_with_its_tools(base: BaseTask) -> None:
    names = [c.name for c in base.calls] or list(base.tools)
    tool_words = set().union(*(_tool_words(n) for n in names))
    disjoint = [
        w for w in base.wordings["en"]
        if not any(_same(x, y) for x in _content(w) for y in tool_words)
    ]
    assert disjoint, (base.name, tool_words)


def test_the_content_word_rule_catches_shared_words() -> None:
    assert any(_same(x, y) for x in _content("How many miles is 100 km?") for y in _tool_words("convert_km_to_miles"))
    assert any(_same(x, y) for x in _content("Give me kilometers") for y in _tool_words("convert_km_to_miles"))
    assert not any(_same(x, y) for x in _content("Is it raining in Nairobi?") for y in _tool_words("get_weather"))


def test_other_languages_are_not_english_copies() -> None:
    for base in BASE_TASKS:
        english = set(base.wordings["en"])
        assert all(p not in english for lang in LANGUAGES[1:] for p in base.wordings[lang])
    # natural spellings: accents and inverted marks where the language has them
    spanish = " ".join(p for b in BASE_TASKS for p in b.wordings["es"])
    french = " ".join(p for b in BASE_TASKS for p in b.wordings["fr"])
    german = " ".join(p for b in BASE_TASKS for p in b.wordings["de"])
    assert "¿" in spanish and "á" in spanish and "é" in french and "ä" in german


def test_the_held_out_split_is_a_third_of_each_kind_and_stable_under_the_seed() -> None:
    assert HELD_OUT_SEED == 27
    assert HELD_OUT == {"greeting", "multiply_12_5", "stock_apple", "tip_in_euros", "tokyo_time_msft"}
    assert held_out_bases(BASE_TASKS, HELD_OUT_SEED) == HELD_OUT
    for kind in KINDS:
        names = {b.name for b in BASE_TASKS if b.kind == kind}
        assert len(names & HELD_OUT) == len(names) // 3
    assert held_out_bases(BASE_TASKS, 28) != HELD_OUT  # the seed decides, not the order of the list
    assert held_out_bases(tuple(reversed(BASE_TASKS)), HELD_OUT_SEED) == HELD_OUT
    # every wording and language of a held-out base task is held out
    assert {t.base for t in TASKS if t.held_out} == HELD_OUT
    assert all(t.held_out == (t.base in HELD_OUT) for t in TASKS)
    assert len([b for b in BASE_TASKS if b.name in HELD_OUT]) * 3 == len(BASE_TASKS)


def test_expand_names_every_wording() -> None:
    tasks = expand(BASE_TASKS[:1])
    assert [t.name for t in tasks] == ["add_8_5.en1", "add_8_5.en2", "add_8_5.en3", "add_8_5.de1", "add_8_5.es1",
                                       "add_8_5.fr1"]
    assert {t.language for t in tasks} == set(LANGUAGES) and not any(t.held_out for t in tasks)


def _first(value: object) -> object:
    return value.values[0] if isinstance(value, OneOf) else value


@pytest.mark.parametrize("base", [b for b in BASE_TASKS if b.calls], ids=lambda b: b.name)
def test_expected_answers_are_what_the_fake_tools_return(base: BaseTask) -> None:
    """Every expected result is in the results of the expected calls, so a right run can pass."""
    results = []
    for expected in base.calls:
        args = {k: _first(v) for k, v in expected.args[0].items()}
        assert ANY not in args.values()
        results.append(str(TOOLS[expected.name](**args)))
    assert answer_matches(" ".join(results), base.answer)


def test_every_accepted_local_name_reaches_the_same_result() -> None:
    assert {get_capital(n) for n in ("Allemagne", "Deutschland", "germany", "ALEMANIA")} == {"Berlin"}
    assert get_capital("Pérou") == get_capital("Peru") == "Lima"
    assert get_weather("Tokio") == get_weather("tokyo") == "cloudy, 22 °C"
    assert get_weather("París") == "sunny, 18 °C" and get_weather("Example City") == "overcast, 12 °C"
    assert get_current_time("Tokio") == "14:30"
    assert convert_currency(50, "US-Dollar", "€") == convert_currency(50, "USD", "euros") == 46.0
    assert convert_currency(50, "dólares", "EUR") == 46.0
    with pytest.raises(ValueError, match="unknown currency"):
        convert_currency(1, "doubloons", "EUR")
    with pytest.raises(ValueError, match="unknown country"):
        get_capital("Atlantis")


def test_the_tool_sets_exist_and_descriptions_are_honest() -> None:
    assert all(name in TOOLS for b in BASE_TASKS for name in b.tools)
    for name in EVERYDAY:
        assert SPECS[name].description and len(SPECS[name].description) < 120
