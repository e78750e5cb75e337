"""pydantic-ai against the proxy, with its OpenAI (chat and responses) and Anthropic providers.

Usage: pydantic_ai_client.py MODE... (MODE: openai|openai-stream|openai-responses|anthropic|anthropic-stream,
       each also as giveup-MODE: the same run, for a model that never answers acceptably)
"""

from __future__ import annotations


from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from _common import KEY, MODEL, OPENAI_URL, QUESTION, URL, done, get_weather, run_modes


async def main(mode: str) -> None:
    mode = mode.removeprefix("giveup-")
    if mode.startswith("anthropic"):
        model: object = AnthropicModel(MODEL, provider=AnthropicProvider(base_url=URL, api_key=KEY))
    elif mode == "openai-responses":
        model = OpenAIResponsesModel(MODEL, provider=OpenAIProvider(base_url=OPENAI_URL, api_key=KEY))
    else:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=OPENAI_URL, api_key=KEY))
    agent = Agent(model, tools=[get_weather], instructions="Answer questions about the weather.")  # type: ignore[call-overload]
    if mode.endswith("stream"):
        async with agent.run_stream(QUESTION) as run:
            final = await run.get_output()
        done(final)
        return
    result = await agent.run(QUESTION)
    done(result.output)


if __name__ == "__main__":
    run_modes(main)
