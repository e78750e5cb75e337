"""OpenAI Responses API streaming: typed server-sent events with sequence numbers.

The sequence is: ``response.created`` and ``response.in_progress``; for prose, a
``message`` item (``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` ..., then ``.output_text.done``, ``.content_part.done``,
``.output_item.done``); for each call, a ``function_call`` item
(``output_item.added``, ``response.function_call_arguments.delta`` / ``.done``,
``output_item.done``), or for a call of a custom (freeform) tool a ``custom_tool_call``
item (``response.custom_tool_call_input.delta`` / ``.done``), each naming the ``namespace``
of a tool offered inside one; then ``response.completed`` (``response.incomplete`` when
the token limit cut the prose) carrying the whole response and its usage. A failure
mid-stream ends it with an ``error`` event and ``response.failed``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Usage
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.protocols.common import dump_arguments, sse_event
from agentfsm.protocols.responses_items import (
    custom_input,
    custom_tool_call_item,
    encode_responses_response,
    function_call_item,
    message_item,
    tool_namespaces,
)

__all__ = ["ResponsesStreamEncoder"]


class ResponsesStreamEncoder:
    """Turns one reply, as it is produced, into Responses API SSE strings.

    Every method returns the events to write, possibly none. After :meth:`finish` or
    :meth:`error` the encoder is closed and any further call is a :class:`UsageError`.
    """

    def __init__(
        self, model: str, response_id: str, created: int, custom_tools: Collection[str] = (),
        echo: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        #: the custom (freeform) tools, whose calls are ``custom_tool_call`` items
        self.custom_tools = frozenset(custom_tools)
        #: the request's settings, repeated in every snapshot of the response
        self.echo = echo
        #: the namespace of each tool offered inside a ``namespace`` tool, named by its calls
        self.namespaces = tool_namespaces((echo or {}).get("tools"))
        self.response_id = response_id
        self.created = created
        self._seq = 0
        self._started = False
        self._closed = False
        self._output: list[JSONObject] = []
        self._text: list[str] | None = None  # the open message item's text, if one is open
        self._calls: list[ToolCall] = []

    @property
    def closed(self) -> bool:
        """Whether the stream has been finished or ended with an error."""
        return self._closed

    @property
    def _message_id(self) -> str:
        return "msg_" + self.response_id.removeprefix("resp_")

    def _event(self, kind: str, **fields: object) -> str:
        data: JSONObject = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return sse_event(data, event=kind)

    def _snapshot(self, status: str, usage: Usage | None, finish_reason: str = "stop") -> JSONObject:
        return encode_responses_response(
            model=self.model,
            content=None,
            tool_calls=self._calls,
            usage=usage,
            created=self.created,
            response_id=self.response_id,
            finish_reason=finish_reason,
            status=status,
            custom_tools=self.custom_tools,
            echo=self.echo,
        )

    def start(self) -> list[str]:
        """``response.created`` and ``response.in_progress`` (once; later calls return nothing)."""
        self._check_open()
        if self._started:
            return []
        self._started = True
        snapshot = self._snapshot("in_progress", None)
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=snapshot),
        ]

    def text(self, delta: str) -> list[str]:
        """A prose delta (the message item is opened by the first non-empty one)."""
        out = self.start()
        if not delta:
            return out
        if self._calls:
            raise UsageError("prose cannot follow a function call in one response")
        if self._text is None:
            self._text = []
            item = message_item(self._message_id, "", status="in_progress")
            item["content"] = []
            index = len(self._output)
            out.append(self._event("response.output_item.added", output_index=index, item=item))
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=self._message_id,
                    output_index=index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                )
            )
        self._text.append(delta)
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=self._message_id,
                output_index=len(self._output),
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return out

    def _close_message(self, status: str = "completed") -> list[str]:
        if self._text is None:
            return []
        text = "".join(self._text)
        self._text = None
        index = len(self._output)
        item = message_item(self._message_id, text, status)
        self._output.append(item)
        part = item["content"][0]
        return [
            self._event(
                "response.output_text.done",
                item_id=self._message_id,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            ),
            self._event(
                "response.content_part.done",
                item_id=self._message_id,
                output_index=index,
                content_index=0,
                part=part,
            ),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def tool_call(self, call: ToolCall) -> list[str]:
        """A whole ``function_call`` item (``custom_tool_call`` for a custom tool): added,
        its arguments or input (one delta), done."""
        out = self.start() + self._close_message()
        index = len(self._output)
        custom = call.name in self.custom_tools
        namespace = self.namespaces.get(call.name)
        if custom:
            opening = custom_tool_call_item(call, status="in_progress", text="", namespace=namespace)
            item = custom_tool_call_item(call, namespace=namespace)
        else:
            opening = function_call_item(call, status="in_progress", arguments="", namespace=namespace)
            item = function_call_item(call, namespace=namespace)
        item_id = str(item["id"])
        out.append(self._event("response.output_item.added", output_index=index, item=opening))
        if custom:
            text = custom_input(call)
            out += [
                self._event("response.custom_tool_call_input.delta", item_id=item_id, output_index=index, delta=text),
                self._event("response.custom_tool_call_input.done", item_id=item_id, output_index=index, input=text),
            ]
        else:
            arguments = dump_arguments(call)
            out += [
                self._event(
                    "response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=arguments
                ),
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    name=call.name,
                    arguments=arguments,
                ),
            ]
        out.append(self._event("response.output_item.done", output_index=index, item=item))
        self._output.append(item)
        self._calls.append(call)
        return out

    def finish(self, reason: str = "stop", usage: Usage | None = None, stop_sequence: str | None = None) -> list[str]:
        """Close the open item, then ``response.completed`` (or ``.incomplete``, the message
        item too, when the token limit cut the prose) with usage. A stop sequence ends a
        response as ``completed``, which names no sequence."""
        cut = reason == "length" and not self._calls
        out = self.start() + self._close_message("incomplete" if cut else "completed")
        snapshot = self._snapshot_final(reason, usage or Usage())
        kind = "response.incomplete" if snapshot["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, response=snapshot))
        self._closed = True
        return out

    def _snapshot_final(self, reason: str, usage: Usage) -> JSONObject:
        snapshot = self._snapshot("completed", usage, reason)
        if reason == "length" and not self._calls:
            snapshot["status"] = "incomplete"
            snapshot["incomplete_details"] = {"reason": "max_output_tokens"}
        # the items in the order they were streamed (prose first, or after a call)
        snapshot["output"] = list(self._output)
        return snapshot

    def error(self, message: str, type: str = "server_error", code: str | None = None) -> list[str]:
        """End the stream with an ``error`` event and ``response.failed`` (never a clean end)."""
        self._check_open()
        out = self.start()
        out.append(self._event("error", code=code or type, message=message, param=None))
        snapshot = self._snapshot("failed", None)
        snapshot["output"] = list(self._output)
        snapshot["error"] = {"code": "server_error", "message": message}
        out.append(self._event("response.failed", response=snapshot))
        self._closed = True
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the stream has already ended")
