"""LiteLLM used as a client: litellm.completion(model="openai/...", api_base=...) with tools,
and litellm.responses (the Responses API).

Usage: litellm_client.py MODE... (MODE: whole|stream|responses)
"""

from __future__ import annotations

import json
from typing import Any

import litellm

from _common import KEY, MODEL, OPENAI_URL, QUESTION, done, get_weather, run_modes

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]


def ask(messages: list[dict[str, Any]], stream: bool) -> Any:
    kwargs: dict[str, Any] = dict(
        model=f"openai/{MODEL}", api_base=OPENAI_URL, api_key=KEY, messages=messages, tools=TOOLS,
        num_retries=0, timeout=60,
    )
    if not stream:
        return litellm.completion(**kwargs).choices[0].message
    chunks = list(litellm.completion(stream=True, **kwargs))
    return litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message


def responses() -> None:
    tools = [{"type": "function", **TOOLS[0]["function"]}]
    kwargs: dict[str, Any] = dict(
        model=f"openai/{MODEL}", api_base=OPENAI_URL, api_key=KEY, tools=tools, num_retries=0, timeout=60
    )
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    first = litellm.responses(input=items, **kwargs)
    calls = [item for item in first.output if getattr(item, "type", None) == "function_call"]
    for call in calls:
        items.append(
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments}
        )
        result = get_weather(**json.loads(call.arguments))
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    final = litellm.responses(input=items, **kwargs)
    text = "".join(
        part.text for item in final.output if getattr(item, "type", None) == "message" for part in item.content
    )
    done(text, tool_calls=len(calls))


def main(mode: str) -> None:
    if mode == "responses":
        responses()
        return
    stream = mode == "stream"
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = ask(messages, stream)
    messages.append(first.model_dump())
    for call in first.tool_calls or []:
        result = get_weather(**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = ask(messages, stream)
    done(final.content, tool_calls=len(first.tool_calls or []))


if __name__ == "__main__":
    run_modes(main)
