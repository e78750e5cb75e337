"""The task suite's tools: deterministic fakes with honest descriptions.

Two sets. The small ones (``add``, ``multiply``, ``convert_km_to_miles``; ``get_weather``,
``get_capital``) are the suite's first tools. :data:`EVERYDAY` is ten tools a person
would give an assistant (stock price, email, calendar, tip, translation, time, weather,
web search, currency, files), offered together so that a task tests choosing the one
tool that fits among many.

Every fake answers from a fixed table, so a task's expected answer is known; place
and currency names are looked up by their folded form (:func:`~agentfsm.eval.matching.fold`)
and in the local names a person writing German, Spanish or French would use
("Frankreich", "Tokio", "Pérou", "dólares"), since the suite's checks accept those too.
Nothing is fetched, sent or written: the email, calendar and search tools say what they
would have done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentfsm.eval.matching import fold
from agentfsm.testing.example_tools import convert_km_to_miles, multiply

__all__ = [
    "CITY_NAMES",
    "COUNTRY_NAMES",
    "CURRENCY_NAMES",
    "EVERYDAY",
    "MATH",
    "PLACES",
    "TOOLS",
    "add",
    "calculate_tip",
    "convert_currency",
    "create_calendar_event",
    "get_capital",
    "get_current_time",
    "get_stock_price",
    "get_weather",
    "read_file",
    "send_email",
    "translate_text",
    "web_search",
]


def add(a: float, b: float) -> float:
    """Add two numbers: a plus b."""
    return float(a) + float(b)


#: a country's names as people write them in en, de, es, fr (the suite accepts any of them)
COUNTRY_NAMES: dict[str, tuple[str, ...]] = {
    "France": ("France", "Frankreich", "Francia"),
    "Japan": ("Japan", "Japón", "Japon"),
    "Norway": ("Norway", "Norwegen", "Noruega", "Norvège"),
    "Peru": ("Peru", "Perú", "Pérou"),
    "Kenya": ("Kenya", "Kenia"),
    "Germany": ("Germany", "Deutschland", "Alemania", "Allemagne"),
}
#: a city's names in en, de, es, fr
CITY_NAMES: dict[str, tuple[str, ...]] = {
    "Paris": ("Paris", "París"),
    "Tokyo": ("Tokyo", "Tokio"),
    "Oslo": ("Oslo",),
    "Lima": ("Lima",),
    "Nairobi": ("Nairobi",),
    "Berlin": ("Berlin", "Berlín"),
}
_CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Norway": "Oslo", "Peru": "Lima", "Kenya": "Nairobi",
             "Germany": "Berlin"}
_WEATHER = {"Paris": (18, "sunny"), "Tokyo": (22, "cloudy"), "Oslo": (-3, "snowing"), "Lima": (24, "clear"),
            "Nairobi": (26, "rainy"), "Berlin": (9, "windy")}
_LOCAL_TIME = {"Tokyo": "14:30", "Paris": "07:30", "Oslo": "07:30", "Lima": "01:30", "Nairobi": "08:30",
               "Berlin": "07:30"}


def _lookup(names: Mapping[str, tuple[str, ...]], value: str) -> str | None:
    """The canonical name whose names include ``value`` (folded), or ``None``."""
    key = fold(value)
    return next((canon for canon, aliases in names.items() if key in {fold(a) for a in aliases}), None)


def _known(names: Mapping[str, tuple[str, ...]], value: str, what: str) -> str:
    """The canonical name of ``value``; a ValueError (the model sees it as an error result) when unknown."""
    canon = _lookup(names, value)
    if canon is None:
        raise ValueError(f"unknown {what} {value!r}")
    return canon


def get_capital(country: str) -> str:
    """The capital city of a country."""
    return _CAPITALS[_known(COUNTRY_NAMES, country, "country")]


def get_weather(city: str) -> str:
    """The current weather in a city."""
    canon = _lookup(CITY_NAMES, city)
    temp, sky = _WEATHER.get(canon or "", (12, "overcast"))
    return f"{sky}, {temp} °C"


_STOCKS = {"AAPL": ("Apple", 187.5), "MSFT": ("Microsoft", 412.3), "GOOGL": ("Alphabet", 151.2)}


def get_stock_price(symbol: str) -> str:
    """The latest stock price of a company in US dollars, by ticker symbol (such as AAPL)."""
    key = fold(symbol)
    for ticker, (company, price) in _STOCKS.items():
        if key in (fold(ticker), fold(company), fold(company + " Inc")):
            return f"{ticker}: {price:.2f} USD"
    raise ValueError(f"unknown ticker symbol {symbol!r}")


def send_email(to: str, subject: str, body: str) -> str:
    """Send an email to one address, with a subject line and a body."""
    if "@" not in to:
        raise ValueError(f"not an email address: {to!r}")
    return f"Email to {to} queued (id 4711)."


def create_calendar_event(title: str, date: str, time: str) -> str:
    """Add an event to the user's calendar (date as YYYY-MM-DD, time as HH:MM)."""
    return f"Event created: {title!r} on {date} at {time} (id 815)."


def calculate_tip(bill: float, percent: float) -> float:
    """The tip for a restaurant bill at a percentage (15 means 15 %), rounded to cents."""
    return round(float(bill) * float(percent) / 100, 2)


_TRANSLATIONS = {("good morning", "es"): "buenos días", ("good morning", "de"): "guten Morgen",
                 ("good morning", "fr"): "bonjour"}
_LANGUAGES = {"es": ("es", "Spanish", "Spanisch", "español", "espagnol"),
              "de": ("de", "German", "Deutsch", "alemán", "allemand"),
              "fr": ("fr", "French", "Französisch", "francés", "français")}


def translate_text(text: str, target_language: str) -> str:
    """Translate a short text into another language."""
    lang = _lookup(_LANGUAGES, target_language)
    found = _TRANSLATIONS.get((" ".join(text.lower().split()), lang or ""))
    if found is None:
        raise ValueError(f"no translation of {text!r} into {target_language!r} in this offline tool")
    return found


def get_current_time(city: str) -> str:
    """The current local time in a city, as HH:MM on a 24-hour clock."""
    return _LOCAL_TIME[_known(CITY_NAMES, city, "city")]


def web_search(query: str) -> str:
    """Search the web; returns the top result's title and address."""
    return f"Top result for {query!r}: 'Example Domain', https://example.com/"


#: a currency's names (ISO code first); the suite accepts any of them as an argument
CURRENCY_NAMES: dict[str, tuple[str, ...]] = {
    "USD": ("USD", "$", "US$", "dollar", "dollars", "US dollar", "US dollars", "US-Dollar", "dólar", "dólares",
            "dólares estadounidenses", "dollar américain", "dollars américains"),
    "EUR": ("EUR", "€", "euro", "euros"),
    "GBP": ("GBP", "£", "pound", "pounds", "Pfund", "libra", "libras", "livre", "livres"),
    "JPY": ("JPY", "¥", "yen"),
}
#: euros per unit, fixed
_EUR_PER = {"USD": 0.92, "EUR": 1.0, "GBP": 1.17, "JPY": 0.0062}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert an amount of money from one currency to another (ISO codes such as USD, EUR, JPY) at today's rate."""
    source = _known(CURRENCY_NAMES, from_currency, "currency (use an ISO code such as USD or EUR)")
    target = _known(CURRENCY_NAMES, to_currency, "currency (use an ISO code such as USD or EUR)")
    return round(float(amount) * _EUR_PER[source] / _EUR_PER[target], 2)


_FILES = {"notes.txt": "Buy milk. Call Ana at 17:00."}


def read_file(path: str) -> str:
    """Read a text file from the user's workspace and return its contents."""
    content = _FILES.get(path.strip().lstrip("./"))
    if content is None:
        raise FileNotFoundError(path)
    return content


#: every fake, by name
TOOLS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (multiply, add, convert_km_to_miles, get_weather, get_capital, get_stock_price, send_email,
              create_calendar_event, calculate_tip, translate_text, get_current_time, web_search,
              convert_currency, read_file)
}
#: the arithmetic set
MATH: tuple[str, ...] = ("multiply", "add", "convert_km_to_miles")
#: the places set
PLACES: tuple[str, ...] = ("get_weather", "get_capital")
#: ten everyday tools, offered together
EVERYDAY: tuple[str, ...] = ("get_stock_price", "send_email", "create_calendar_event", "calculate_tip",
                             "translate_text", "get_current_time", "get_weather", "web_search",
                             "convert_currency", "read_file")
