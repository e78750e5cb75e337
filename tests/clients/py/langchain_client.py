"""LangChain chat models (bind_tools, invoke and stream) and a LangGraph ReAct agent.

Usage: langchain_client.py MODE... (MODE: openai|openai-stream|openai-responses|anthropic|anthropic-stream|langgraph)
"""

from __future__ import annotations

from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from _common import KEY, MODEL, OPENAI_URL, QUESTION, URL, done, get_weather, run_modes

weather = tool(get_weather)


def chat_model(mode: str) -> Any:
    if mode.startswith("anthropic"):
        return ChatAnthropic(model_name=MODEL, base_url=URL, api_key=KEY, max_retries=0, timeout=60)  # type: ignore[call-arg]
    return ChatOpenAI(
        model=MODEL, base_url=OPENAI_URL, api_key=KEY, max_retries=0, timeout=60,  # type: ignore[arg-type]
        use_responses_api=mode == "openai-responses",
    )


def ask(model: Any, messages: list[BaseMessage], stream: bool) -> Any:
    if not stream:
        return model.invoke(messages)
    whole: AIMessageChunk | None = None
    for chunk in model.stream(messages):
        whole = chunk if whole is None else whole + chunk
    return whole


def main(mode: str) -> None:
    if mode == "langgraph":
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(chat_model("openai"), [weather])
        state = agent.invoke({"messages": [HumanMessage(QUESTION)]})
        done(state["messages"][-1].content, messages=len(state["messages"]))
        return
    stream = mode.endswith("stream")
    model = chat_model(mode).bind_tools([weather])
    messages: list[BaseMessage] = [HumanMessage(QUESTION)]
    first = ask(model, messages, stream)
    messages.append(first)
    for call in first.tool_calls:
        messages.append(ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"]))
    final = ask(model, messages, stream)
    done(final.text if hasattr(final, "text") else final.content, tool_calls=len(first.tool_calls))


if __name__ == "__main__":
    run_modes(main)
