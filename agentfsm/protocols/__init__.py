"""Wire protocols: OpenAI chat completions, OpenAI responses and Anthropic messages, both ways.

In: ``normalize_openai`` / ``normalize_responses`` / ``normalize_anthropic`` turn a client's request body into a
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
)
from agentfsm.protocols.openai import (
    encode_openai_response,
    normalize_openai,
    openai_error,
    openai_error_for,
    read_conversation,
)
from agentfsm.protocols.openai_stream import OpenAIStreamEncoder
from agentfsm.protocols.responses import normalize_responses
from agentfsm.protocols.responses_items import encode_responses_response
from agentfsm.protocols.responses_stream import ResponsesStreamEncoder
from agentfsm.protocols.sampling import IGNORED_HEADER, generation_options, settle

__all__ = [
    "AnthropicStreamEncoder",
    "IGNORED_HEADER",
    "NormalizedRequest",
    "OpenAIStreamEncoder",
    "ResponsesStreamEncoder",
    "WireProtocol",
    "anthropic_error",
    "anthropic_error_for",
    "encode_anthropic_response",
    "encode_openai_response",
    "encode_responses_response",
    "error_status",
    "estimate_tokens",
    "generation_options",
    "mint_call_id",
    "mint_response_id",
    "normalize_anthropic",
    "normalize_openai",
    "normalize_responses",
    "openai_error",
    "openai_error_for",
    "read_conversation",
    "recover_tools",
    "remint_ids",
    "settle",
]
