"""openai-agents against the proxy: the default Responses model, the chat-completions model, output_type.

Usage: openai_agents.py MODE... (MODE: responses|responses-stream|chat|chat-stream|output-chat|output-responses)
       (output-...-notools: the same agent without tools, so its response_format applies;
        giveup-responses|giveup-chat: the plain agent, for a model that never answers acceptably)
"""

from __future__ import annotations


from openai import AsyncOpenAI
from pydantic import BaseModel

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)

from _common import KEY, MODEL, OPENAI_URL, QUESTION, done, get_weather, run_modes


class Weather(BaseModel):
    city: str
    temperature_c: int


async def main(mode: str) -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=OPENAI_URL, api_key=KEY, max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    model: object = MODEL  # a name: the SDK's default model class, OpenAIResponsesModel
    if mode.startswith(("chat", "output-chat", "giveup-chat")):
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    output_type = Weather if mode.startswith("output") else None
    agent = Agent(
        name="weather",
        instructions="Answer questions about the weather.",
        tools=[] if mode.endswith("notools") else [function_tool(get_weather)],
        model=model,  # type: ignore[arg-type]
        output_type=output_type,
    )
    if mode.endswith("stream"):
        result = Runner.run_streamed(agent, QUESTION)
        kinds = [event.type async for event in result.stream_events()]
        done(result.final_output, streamed_events=len(kinds))
        return
    run = await Runner.run(agent, QUESTION)
    final = run.final_output
    done(final.model_dump() if isinstance(final, BaseModel) else final, model=type(agent.model).__name__)


if __name__ == "__main__":
    run_modes(main)
