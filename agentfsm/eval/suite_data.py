"""The task suite: fifteen base tasks, each in three English wordings and in German, Spanish and French.

Kinds (three base tasks each): one call under ``auto``; one call under ``required`` or
a named tool; two independent calls; a chain (the second call needs the first one's
result); no tool needed. Some offer the small tool sets, some the ten everyday tools
together (:data:`~agentfsm.eval.fake_tools.EVERYDAY`), so that choosing one tool among
many is tested. Each base task's English wordings include one that shares no content
word with its tools' names and descriptions ("Is it raining in Nairobi right now?" for
``get_weather``); the other languages are phrased as a person would type them, decimal
commas and local names included. Numbers and names come from the user's words; the
answers need the tools' results.

**Held-out split.** A third of the base tasks of each kind (all their wordings and
languages) form the held-out split, chosen by :data:`HELD_OUT_SEED`: the base tasks
whose ``sha256(seed:name)`` sorts first within their kind. No change is tuned on the
held-out split: its rows, beside the tuned ones, say whether a gain carries to requests
it was not made for. Changing the seed or the base tasks of a kind changes the split,
and is a change to the gate itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


from agentfsm.eval.fake_tools import CITY_NAMES, COUNTRY_NAMES, CURRENCY_NAMES, EVERYDAY, MATH, PLACES
from agentfsm.eval.matching import ANY, Call, OneOf, call, commuting
from agentfsm.eval.suite import KINDS, SuiteTask

__all__ = ["BASE_TASKS", "HELD_OUT", "HELD_OUT_SEED", "LANGUAGES", "TASKS", "BaseTask", "expand", "held_out_bases"]

#: the languages of the suite (English first)
LANGUAGES: tuple[str, ...] = ("en", "de", "es", "fr")
#: the committed seed of the held-out split
HELD_OUT_SEED = 27


@dataclass(frozen=True)
class BaseTask:
    """A request in several wordings and languages, with the calls and results it needs."""

    name: str
    kind: str
    tools: tuple[str, ...]
    calls: tuple[Call, ...]
    answer: tuple[float | OneOf, ...]
    #: language -> wordings
    wordings: Mapping[str, tuple[str, ...]]
    tool_choice: str = "auto"  # as spelled: auto, required or a tool name


def _city(name: str) -> OneOf:
    return OneOf(*CITY_NAMES[name])


def _country(name: str) -> OneOf:
    return OneOf(*COUNTRY_NAMES[name])


def _currency(code: str) -> OneOf:
    return OneOf(*CURRENCY_NAMES[code])


def _words(en: tuple[str, str, str], de: str, es: str, fr: str) -> dict[str, tuple[str, ...]]:
    return {"en": en, "de": (de,), "es": (es,), "fr": (fr,)}


_ALL = MATH + PLACES
_TOKYO_TIME = OneOf("14:30", "14h30", "14 h 30", "2:30 pm", "2:30 p.m.")

BASE_TASKS: tuple[BaseTask, ...] = (
    # one call (auto)
    BaseTask("add_8_5", KINDS[0], MATH, (commuting("add", 8, 5),), (13,), _words(
        ("Add 8 and 5.", "What's 8 plus 5?", "I had 8 apples and bought 5 more. How many do I have now?"),
        "Wie viel ist 8 plus 5?", "¿Cuánto es 8 más 5?", "Combien font 8 plus 5 ?")),
    BaseTask("weather_nairobi", KINDS[0], EVERYDAY, (call("get_weather", city=_city("Nairobi")),), (26,), _words(
        ("What's the weather in Nairobi?", "Tell me the current weather in Nairobi, please.",
         "Is it raining in Nairobi right now?"),
        "Wie ist das Wetter in Nairobi?", "¿Qué tiempo hace en Nairobi?", "Quel temps fait-il à Nairobi ?")),
    BaseTask("stock_apple", KINDS[0], EVERYDAY,
             (call("get_stock_price", symbol=OneOf("AAPL", "Apple", "Apple Inc.")),), (187.5,), _words(
        ("What's Apple's stock price?", "Get me the latest AAPL share price.",
         "How much does one Apple share cost right now?"),
        "Was kostet eine Apple-Aktie gerade?", "¿A cuánto cotiza Apple en bolsa ahora mismo?",
        "Quel est le cours de l'action Apple en ce moment ?")),
    # one call (required or a named tool)
    BaseTask("multiply_12_5", KINDS[1], MATH, (commuting("multiply", 12.5, 4),), (50,), _words(
        ("What is 12.5 times 4?", "Multiply 12.5 by 4.", "Four boxes cost 12.5 each. What's the total?"),
        "Was ist 12,5 mal 4?", "¿Cuánto es 12,5 por 4?", "Combien font 12,5 fois 4 ?"), "required"),
    BaseTask("km_100", KINDS[1], MATH, (call("convert_km_to_miles", km=100),), (62.14,), _words(
        ("Convert 100 km to miles.", "How many miles is 100 km?",
         "I cycled 100K today. How far is that for my friends in the US?"),
        "Wie viele Meilen sind 100 Kilometer?", "¿Cuántas millas son 100 kilómetros?",
        "Combien de miles font 100 kilomètres ?"), "convert_km_to_miles"),
    BaseTask("dollars_50", KINDS[1], EVERYDAY,
             (call("convert_currency", amount=50, from_currency=_currency("USD"), to_currency=_currency("EUR")),),
             (46,), _words(
        ("Convert 50 US dollars to euros.", "How much is $50 in euros?", "I have 50 bucks. What's that worth in Europe?"),
        "Wie viel sind 50 US-Dollar in Euro?", "¿Cuántos euros son 50 dólares estadounidenses?",
        "Combien font 50 dollars américains en euros ?"), "required"),
    # two calls
    BaseTask("weather_two_cities", KINDS[2], PLACES,
             (call("get_weather", city=_city("Paris")), call("get_weather", city=_city("Tokyo"))), (18, 22), _words(
        ("What's the weather in Paris and in Tokyo?", "Give me the weather for Paris and for Tokyo.",
         "How warm is it in Paris and in Tokyo right now?"),
        "Wie ist das Wetter in Paris und in Tokio?", "¿Qué tiempo hace en París y en Tokio?",
        "Quel temps fait-il à Paris et à Tokyo ?")),
    BaseTask("capitals_peru_kenya", KINDS[2], PLACES,
             (call("get_capital", country=_country("Peru")), call("get_capital", country=_country("Kenya"))),
             (OneOf("Lima"), OneOf("Nairobi")), _words(
        ("What are the capitals of Peru and Kenya?", "Tell me the capital of Peru and the capital of Kenya.",
         "Where are the governments of Peru and Kenya based?"),
        "Was sind die Hauptstädte von Peru und Kenia?", "¿Cuáles son las capitales de Perú y Kenia?",
        "Quelles sont les capitales du Pérou et du Kenya ?")),
    BaseTask("tokyo_time_msft", KINDS[2], EVERYDAY,
             (call("get_current_time", city=_city("Tokyo")),
              call("get_stock_price", symbol=OneOf("MSFT", "Microsoft", "Microsoft Corporation"))),
             (_TOKYO_TIME, 412.3), _words(
        ("What time is it in Tokyo, and what's Microsoft's stock price?",
         "Tell me the current time in Tokyo and the MSFT share price.",
         "Is it late in Tokyo right now? Also, how much does one Microsoft share cost?"),
        "Wie spät ist es in Tokio, und was kostet eine Microsoft-Aktie?",
        "¿Qué hora es en Tokio y a cuánto cotiza Microsoft?",
        "Quelle heure est-il à Tokyo, et quel est le cours de l'action Microsoft ?")),
    # chain: the second call needs the first one's result
    BaseTask("weather_french_capital", KINDS[3], PLACES,
             (call("get_capital", country=_country("France")), call("get_weather", city=_city("Paris"))), (18,),
             _words(
        ("What's the weather in the capital of France?", "Find the capital of France, then tell me its weather.",
         "How warm is it right now where France's president lives?"),
        "Wie ist das Wetter in der Hauptstadt von Frankreich?", "¿Qué tiempo hace en la capital de Francia?",
        "Quel temps fait-il dans la capitale de la France ?")),
    BaseTask("laps_to_miles", KINDS[3], MATH,
             (commuting("multiply", 12.5, 4), call("convert_km_to_miles", km=50)), (31.07,), _words(
        ("Multiply 12.5 by 4, then convert the result from km to miles.",
         "Work out 12.5 times 4 in kilometres, then tell me how many miles that is.",
         "I ran 12.5 laps of a 4K loop. How far did I go, in the units Americans use?"),
        "Multipliziere 12,5 mit 4 und rechne das Ergebnis von Kilometern in Meilen um.",
        "Multiplica 12,5 por 4 y convierte el resultado de kilómetros a millas.",
        "Multiplie 12,5 par 4, puis convertis le résultat de kilomètres en miles.")),
    BaseTask("tip_in_euros", KINDS[3], EVERYDAY,
             (call("calculate_tip", bill=80, percent=15),
              call("convert_currency", amount=12, from_currency=_currency("USD"), to_currency=_currency("EUR"))),
             (11.04,), _words(
        ("Work out a 15% tip on an $80 bill, then convert the tip to euros.",
         "Calculate the tip at 15 percent on a bill of 80 US dollars and tell me how much it is in euros.",
         "Dinner came to $80 and we want to leave the waiter 15% extra. How much is that extra in euros?"),
        "Berechne 15 % Trinkgeld auf eine Rechnung von 80 US-Dollar und rechne das Trinkgeld in Euro um.",
        "Calcula una propina del 15 % sobre una cuenta de 80 dólares y pásala a euros.",
        "Calcule un pourboire de 15 % sur une addition de 80 dollars, puis convertis-le en euros.")),
    # no tool needed
    BaseTask("greeting", KINDS[4], _ALL, (), (), _words(
        ("Hello! How are you today?", "Hi there, how's it going?", "Good morning! I hope you're doing well."),
        "Hallo! Wie geht es dir heute?", "¡Hola! ¿Qué tal estás hoy?", "Bonjour ! Comment ça va aujourd'hui ?")),
    BaseTask("sea_sentence", KINDS[4], EVERYDAY, (), (), _words(
        ("Write one short sentence about the sea.", "Give me a single sentence describing the ocean.",
         "Say something poetic about waves, in one line."),
        "Schreib einen kurzen Satz über das Meer.", "Escribe una frase corta sobre el mar.",
        "Écris une courte phrase sur la mer.")),
    BaseTask("joke", KINDS[4], EVERYDAY, (), (), _words(
        ("Tell me a short joke.", "Do you know any good jokes?", "Make me laugh with something funny."),
        "Erzähl mir einen kurzen Witz.", "Cuéntame un chiste corto.", "Raconte-moi une blague courte.")),
)


def _rank(seed: int, name: str) -> str:
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def held_out_bases(bases: Sequence[BaseTask], seed: int = HELD_OUT_SEED) -> frozenset[str]:
    """The names of the held-out base tasks: a third of each kind (rounded down, at least
    one where a kind has three or more), those whose ``sha256(seed:name)`` sorts first."""
    out: set[str] = set()
    for kind in dict.fromkeys(b.kind for b in bases):
        names = sorted((b.name for b in bases if b.kind == kind), key=lambda n: _rank(seed, n))
        out.update(names[: len(names) // 3])
    return frozenset(out)


def expand(bases: Sequence[BaseTask], held_out: frozenset[str] = frozenset()) -> tuple[SuiteTask, ...]:
    """Every wording of every base task as a :class:`~agentfsm.eval.suite.SuiteTask`, by base
    task then language (``BASE.en1``, ``BASE.en2``, ..., ``BASE.de1``)."""
    return tuple(
        SuiteTask(
            name=f"{b.name}.{lang}{i}",
            base=b.name,
            kind=b.kind,
            language=lang,
            prompt=prompt,
            tools=b.tools,
            calls=b.calls,
            answer=b.answer,
            tool_choice=b.tool_choice,
            held_out=b.name in held_out,
        )
        for b in bases
        for lang, prompts in b.wordings.items()
        for i, prompt in enumerate(prompts, 1)
    )


#: the held-out base tasks
HELD_OUT: frozenset[str] = held_out_bases(BASE_TASKS)
#: the suite: every wording of every base task
TASKS: tuple[SuiteTask, ...] = expand(BASE_TASKS, HELD_OUT)
