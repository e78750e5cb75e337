"""Wire protocols: OpenAI chat completions and Anthropic messages, both ways.

In: ``normalize_openai`` / ``normalize_anthropic`` turn a client's request body into a
:class:`NormalizedRequest`. Out: ``encode_*_response`` build whole responses, the
``*StreamEncoder`` classes build server-sent events, ``*_error`` build error bodies.
Pure code: the edge passes in ids, times and tokens.
"""

from __future__ import annotations

from agentfsm.protocols.anthropic import (
    anthropic_error,
    anthropic_error_for,
    encode_anthropic_response,
    normalize_anthropic,
)
from agentfsm.protocols.anthropic_stream import AnthropicStreamEncoder
from agentfsm.protocols.common import (
    NormalizedRequest,
    WireProtocol,
    error_status,
    estimate_tokens,
    mint_call_id,
    mint_response_id,
    recover_tools,
    remint_ids,
    to_openai_upstream_messages,
    upstream_openai_body,
)
from agentfsm.protocols.openai import (
    encode_openai_response,
    normalize_openai,
    openai_error,
    openai_error_for,
)
from agentfsm.protocols.openai_stream import OpenAIStreamEncoder

__all__ = [
    "AnthropicStreamEncoder",
    "NormalizedRequest",
    "OpenAIStreamEncoder",
    "WireProtocol",
    "anthropic_error",
    "anthropic_error_for",
    "encode_anthropic_response",
    "encode_openai_response",
    "error_status",
    "estimate_tokens",
    "mint_call_id",
    "mint_response_id",
    "normalize_anthropic",
    "normalize_openai",
    "openai_error",
    "openai_error_for",
    "recover_tools",
    "remint_ids",
    "to_openai_upstream_messages",
    "upstream_openai_body",
]
