"""Refusal phrases: "I don't have tools", hard refusals, environment limitations, soft deflections.

:data:`PHRASES` is the maintained phrase set (English), by category. Each entry is a
regular expression matched against *normalized* text: lower case, curly quotes made
straight, whitespace collapsed, and contractions expanded (``can't`` -> ``cannot``,
``don't`` -> ``do not``, ``I'm`` -> ``i am``; also without the apostrophe: ``cant``,
``dont``, ``im``). So one entry covers "I can't", "I cannot", "I can not" and "I cant".
Add a phrase with a positive and a lookalike example in ``fixtures/refusals/``.

The policy only says which phrase a reply uses (:meth:`RefusalPolicy.refusal`); what
a refusal means for the turn (a correction naming the tools, or a soft deflection
accepted under ``auto``) is the protocol guard's, :mod:`agentfsm.guards.refusal`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentfsm.guards.refusal import CATEGORIES, RefusalCategory, RefusalMatch
from agentfsm.policy.base import Policy

__all__ = ["MAX_SCAN_CHARS", "PHRASES", "POLICY", "RefusalPolicy", "match", "normalize"]

#: only the start of a reply is scanned: refusals come first, and the work stays bounded
MAX_SCAN_CHARS = 4_000

_CANT = r"(?:cannot|am unable to|am not able to|do not have the (?:ability|capability) to)"
_TOOL = r"(?:tools?|functions?|function calling|tool calling|apis?|plugins?)"
_LIVE = r"(?:real-time|realtime|live|current|up-to-date|up to date|today's|latest)"

PHRASES: Mapping[RefusalCategory, tuple[str, ...]] = {
    "no_tools": (
        rf"\bi (?:do|did) not have (?:any )?(?:access to )?(?:any )?{_TOOL}\b",
        rf"\bi (?:do|did) not have (?:access to )?(?:a|the|any) (?:[\w-]+ )?(?:tool|function)\b",
        rf"\bi (?:do|did) not have the ability to (?:call|use|invoke|run|execute) (?:any )?{_TOOL}",
        rf"\bi {_CANT} (?:call|use|invoke|access|run|execute) (?:any |external |the |these )?"
        rf"(?:[\w-]+ )?{_TOOL}\b",
        r"\b(?:no|there are no|i have no) tools? (?:are |is )?(?:available|provided|accessible)",
        r"\bno (?:tools|functions) (?:are )?available to me\b",
        rf"\b{_TOOL} (?:is|are) not (?:available|supported|enabled|accessible) "
        r"(?:to me|here|in this)",
        r"\bi (?:do not|cannot) (?:have|use) (?:tools|function calls|tool calls)\b",
        r"\bi am (?:just )?an? (?:text-based|text based|language) (?:model|ai|assistant)\b"
        r"[^.]{0,60}\b(?:cannot|not able|unable|no access|do not have)",
    ),
    "environment_limitation": (
        rf"\bi {_CANT} (?:browse|search|access|surf|connect to) (?:the )?"
        rf"(?:internet|web|online|external|{_LIVE})",
        r"\bi (?:do|did) not have (?:access to )?(?:the )?(?:internet|web|browsing|external)\b",
        r"\bi (?:do|did) not have (?:any )?(?:internet|web|network|online|browsing) access\b",
        rf"\bi (?:do|did) not have (?:access to )?(?:any )?{_LIVE} "
        r"(?:data|information|info|weather|prices|news|updates)",
        r"\bi (?:cannot|am unable to|am not able to) (?:run|execute|compile) "
        r"(?:code|programs?|scripts?|commands?)",
        r"\bi (?:cannot|am unable to|am not able to|do not have access to) "
        r"(?:access |read |open |see |view |modify |write to )?(?:your |the |local |any )?"
        r"(?:files?|file system|filesystem|computer|device|database|screen)\b",
        r"\bi (?:cannot|am unable to|am not able to) "
        r"(?:provide|give|get|check|fetch|retrieve|look up) "
        rf"(?:you )?(?:with )?(?:the )?{_LIVE}",
        r"\b(?:my|the) (?:knowledge|training data) (?:cutoff|cut-off|only goes|is limited to|ends)",
        r"\bas an ai(?: language model| assistant| model)?,? i "
        r"(?:cannot|am unable to|am not able to|do not have)",
    ),
    "hard_refusal": (
        r"\bi (?:cannot|am unable to|am not able to|will not|refuse to|am not going to) "
        r"(?:help(?! but)|assist|comply|fulfill|fulfil|complete that|complete this|do that|do this"
        r"|perform that|answer that|provide that)",
        r"\bi (?:must|have to) (?:decline|refuse)\b",
        r"\bi am (?:very |really |truly )?sorry,? but i "
        r"(?:cannot|am unable|am not able|will not|must decline)",
        r"\b(?:sorry|unfortunately),? (?:but )?i "
        r"(?:cannot|am unable to|am not able to|will not be able to)\b",
        r"\bi will not be able to (?:help|assist|do)\b",
        r"\bthat is not something i (?:can|am able to) (?:help|assist|do)\b",
        r"\bi am not (?:allowed|permitted) to (?:help|assist|do|share|answer)\b",
    ),
    "soft_deflection": (
        r"\b(?:you can|you could|you may want to|you might want to|i recommend|i would recommend"
        r"|i suggest|i would suggest|try|consider) (?:check(?:ing)?|visit(?:ing)?|look(?:ing)? up"
        r"|search(?:ing)?(?: for)?|consult(?:ing)?|us(?:e|ing)|refer(?:ring)? to) "
        r"(?:a |an |the |your |some |any )?(?:[\w-]+ )?(?:[\w-]+ )?"
        r"(?:website|web site|site|app|service|search engine|online resources?"
        r"|news outlet|provider)\b",
        r"\bplease (?:check|visit|refer to|consult) (?:a |an |the |your )?(?:[\w-]+ )?"
        r"(?:website|site|app|service|official|online|local|resource)",
        rf"\bfor (?:the )?(?:most )?(?:{_LIVE}|accurate) "
        r"(?:information|data|results|weather|prices|news)"
        r"\b[^.]{0,40}\b(?:check|visit|refer|consult|recommend)",
    ),
}

_COMPILED: tuple[tuple[RefusalCategory, tuple[re.Pattern[str], ...]], ...] = tuple(
    (category, tuple(re.compile(p) for p in PHRASES[category])) for category in CATEGORIES
)

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'", "\u02bc": "'"})
_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        (r"\bcan'?t\b|\bcan not\b", "cannot"),
        (r"\bwon'?t\b", "will not"),
        (r"\bi'?m\b", "i am"),
        (r"\bi've\b", "i have"),
        (r"\bi'd\b", "i would"),
        (r"\bi'll\b", "i will"),
        (r"\bthat's\b", "that is"),
        (r"\bthere's\b", "there is"),
        (r"\b(do|does|did|is|are|was|were|have|has|had|could|would|should)n'?t\b", r"\1 not"),
    )
)
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lower-case, straighten quotes, collapse whitespace, expand contractions."""
    out = _SPACE.sub(" ", text[:MAX_SCAN_CHARS].translate(_QUOTES).lower())
    for pattern, repl in _CONTRACTIONS:
        out = pattern.sub(repl, out)
    return out.strip()


def match(text: str) -> RefusalMatch | None:
    """The first refusal phrase found in ``text`` (most specific category first), or None."""
    normalized = normalize(text)
    for category, patterns in _COMPILED:
        for pattern in patterns:
            found = pattern.search(normalized)
            if found:
                return RefusalMatch(
                    category=category, phrase=found.group(0), pattern=pattern.pattern
                )
    return None


class RefusalPolicy(Policy):
    """Tells the refusal guard which phrase of :data:`PHRASES` a reply without calls uses."""

    name = "refusal"

    def refusal(self, text: str) -> RefusalMatch | None:
        return match(text)


POLICY = RefusalPolicy()
