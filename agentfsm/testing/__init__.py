"""Fakes for tests, ours and our users': a scripted HTTP upstream and a scripted backend.

Like ``httpx.MockTransport``: every seam ships its fake. :class:`FakeUpstream` is a
real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script and can
stall, reset, throttle, fail or send garbage; :class:`ScriptedBackend` is an
in-process backend that answers from a queue or a function of the conversation.
:func:`empty_answer` says whether a proxy's 200 answer carries no assistant message.
"""

from __future__ import annotations

from agentfsm.backends.scripted import ScriptedBackend, ScriptExhausted
from agentfsm.testing.answers import empty_answer
from agentfsm.testing.fake_upstream import FakeUpstream
from agentfsm.testing.fake_script import (
    FakeReply,
    ReceivedRequest,
    Script,
    drip,
    flood,
    garbage,
    latency,
    raw_body,
    reply,
    reset,
    stall,
    status,
    stream_no_terminator,
)

__all__ = [
    "FakeReply",
    "FakeUpstream",
    "ReceivedRequest",
    "Script",
    "ScriptExhausted",
    "ScriptedBackend",
    "drip",
    "empty_answer",
    "flood",
    "garbage",
    "latency",
    "raw_body",
    "reply",
    "reset",
    "stall",
    "status",
    "stream_no_terminator",
]
