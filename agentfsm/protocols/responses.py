"""OpenAI Responses API (``POST /v1/responses``): request normalization.

Input items understood: ``message`` (roles user, assistant, system, developer; a bare
``{"role", "content"}`` counts as one), ``function_call`` and ``function_call_output``,
``custom_tool_call`` and ``custom_tool_call_output``; a string ``input`` is one user
message, ``instructions`` a leading system message. ``reasoning`` items (Codex echoes
them back) are dropped and reported as ``input.reasoning``, as Anthropic's ``thinking``
blocks are: another model's private reasoning, never the assistant's answer. What a client sends for its own
bookkeeping is kept, never refused: a ``function_call_output`` without a ``call_id``
(Codex's ``{"name": "goal_objective", "namespace": "agent", "output": ...}`` after
``create_goal``) answers no call, so its text joins the system prompt, labelled with its
name; an item of any other type is passed over and reported as ``input.TYPE``. An image
in a tool output becomes a text placeholder (reported as ``function_call_output.input_image``);
a ``function_call`` whose ``arguments`` are not one JSON object is kept with none
(reported as ``function_call.arguments``).

Tools: ``function`` tools are used; ``custom`` (freeform) tools, such as Codex's
``apply_patch``, are offered as a tool with one string parameter, ``input``, the raw
text, and a call to one comes back as a ``custom_tool_call`` item. The function and
custom tools a ``namespace`` tool groups (Codex's ``multi_agent_v1``) are offered by
their own names beside the others, and a call to one names its ``namespace``
(:func:`~agentfsm.protocols.responses_items.tool_namespaces`; a name offered twice keeps
its first meaning, and the namespace is then reported as ``tools.namespace``). Hosted
and other tool types (``web_search``, ``file_search`` ...) are ignored and reported as
``tools.TYPE`` in :attr:`NormalizedRequest.ignored` (Codex CLI sends some with every
request); a ``tool_choice`` that requires a call of such tools only (forcing one the request
offers, or ``allowed_tools`` naming only them in ``required`` mode) is read as ``none``
and reported as ``tool_choice``. The response object repeats the request's settings as sent (``instructions``,
``tools``, ``tool_choice``, ``temperature`` ...). Nothing is stored:
``previous_response_id`` and ``conversation`` are answered
with a 400 asking for the whole conversation in ``input``. Errors use OpenAI's error shape
(:func:`~agentfsm.protocols.openai.openai_error`). The response and its items are
encoded in :mod:`agentfsm.protocols.responses_items`, streamed in
:mod:`agentfsm.protocols.responses_stream`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.errors import RequestError
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentfsm.protocols._calls import CallLedger
from agentfsm.protocols._fields import (
    opt_bool,
    opt_int,
    opt_str,
    parse_arguments,
    req_list,
    req_mapping,
    req_str,
    text_of_parts,
    tool_spec,
    tool_specs,
)
from agentfsm.protocols.common import NormalizedRequest, tools_or_recovered
from agentfsm.protocols.responses_choice import hosted_types, read_tool_choice, requires_only_hosted
from agentfsm.protocols.responses_items import CUSTOM_INPUT, ECHOED, tool_namespaces
from agentfsm.protocols.sampling import responses_settings

__all__ = ["normalize_responses"]

_INPUT_TEXT = {"input_text": "text", "text": "text"}
#: media inside a tool's output, read as a placeholder naming it
_OUTPUT_MEDIA = {"input_image": "image", "input_file": "file"}
_OUTPUT_TEXT = {"output_text": "text", "refusal": "refusal", "input_text": "text", "text": "text"}
#: fields that need state this proxy does not keep
_STATEFUL = ("previous_response_id", "conversation")


def normalize_responses(body: Mapping[str, Any]) -> NormalizedRequest:
    """A Responses API request body as a :class:`NormalizedRequest` (protocol ``responses``).

    Raises :class:`RequestError` (``param`` set) for a malformed request or one that
    needs stored state, and :class:`UnsupportedContent` for non-text content.
    """
    body = req_mapping(body, "body")
    for key in _STATEFUL:
        if body.get(key) is not None:
            raise RequestError(
                f"{key} is not supported: this proxy stores no responses; "
                "send the whole conversation in 'input' (and store: false)",
                param=key,
            )
    if body.get("background"):
        raise RequestError("background responses are not supported", param="background")
    messages: list[Message] = []
    instructions = body.get("instructions")
    if instructions is not None:
        text = text_of_parts(instructions, "instructions", text_types=_INPUT_TEXT)
        if text:
            messages.append(SystemMessage(content=text))
    passed_over: list[str] = []
    messages += _input(body.get("input"), passed_over)
    if not messages:
        raise RequestError("'input' must hold at least one item", param="input")

    offered = tool_specs(body.get("tools"), _tool)
    grouped, grouped_custom, clashed = _namespaced_tools(body.get("tools"))
    tools, recovered = tools_or_recovered((*offered, *grouped), messages)
    tool_choice, tools = read_tool_choice(body.get("tool_choice"), tools, hosted_types(body.get("tools")))
    if requires_only_hosted(body.get("tool_choice"), tool_choice):
        passed_over.append("tool_choice")  # a call is required, but of hosted tools only
    custom = _custom_names(body.get("tools")) | grouped_custom
    settings = responses_settings(body, _response_format(body.get("text")))
    # custom tools are offered, and so are a namespace's tools unless their names clashed
    honoured = {"tools.custom", *(() if clashed else ("tools.namespace",))}
    settings["ignored"] = tuple(
        name for name in (*settings["ignored"], *dict.fromkeys(passed_over)) if name not in honoured
    )
    return NormalizedRequest(
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,
        parallel=opt_bool(body, "parallel_tool_calls", True),
        tool_mode=bool(tools),
        tools_recovered=recovered,
        stream=opt_bool(body, "stream", False),
        stream_include_usage=True,
        model=opt_str(body, "model"),
        max_tokens=opt_int(body, "max_output_tokens"),
        protocol="responses",
        custom_tools=tuple(t.name for t in tools if t.name in custom),
        response_echo=_echo(body),
        **settings,
    )


def _echo(body: Mapping[str, Any]) -> JSONObject:
    """What the response object repeats of the request (:data:`~agentfsm.protocols.
    responses_items.ECHOED`), as sent (already read and checked above)."""
    echo: JSONObject = {key: body[key] for key in ECHOED if body.get(key) is not None}
    text = body.get("text")
    if isinstance(text, Mapping):  # its format defaults to text, as OpenAI fills it in
        echo["text"] = {"format": {"type": "text"}, **{k: v for k, v in text.items() if v is not None}}
    if not isinstance(body.get("metadata"), Mapping):
        echo.pop("metadata", None)
    if not isinstance(body.get("store"), bool):
        echo.pop("store", None)
    return echo


def _input(raw: Any, passed_over: list[str]) -> list[Message]:
    """The conversation the items make; what is passed over (an unknown item type, an
    image in a tool output) is named in ``passed_over``."""
    if raw is None:
        raise RequestError("'input' is required", param="input")
    if isinstance(raw, str):
        return [UserMessage(content=raw)]
    out: list[Message] = []
    ledger = CallLedger()
    for i, item in enumerate(req_list(raw, "input")):
        where = f"input[{i}]"
        entry = req_mapping(item, where)
        kind = entry.get("type", "message")
        if kind == "message":
            out.append(_message(entry, where))
            ledger.begin_turn()  # an assistant message starts a turn (its calls follow it)
        elif kind in ("function_call", "custom_tool_call"):
            call = _call(entry, where, passed_over, custom=kind == "custom_tool_call")
            last = out[-1] if out else None
            if not isinstance(last, AssistantMessage):
                ledger.begin_turn()
            if not ledger.add(call, f"{where}.call_id"):
                passed_over.append(f"input.repeated_{kind}")  # the same call written twice over
            elif isinstance(last, AssistantMessage):
                # one assistant turn: its text and every call that follows it
                out[-1] = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
            else:
                out.append(AssistantMessage(content=None, tool_calls=(call,)))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if entry.get("call_id") is None and kind == "function_call_output":
                out.append(_note(entry, where, passed_over))  # the client's bookkeeping
            else:
                out.append(_output(entry, where, ledger, str(kind), passed_over))
        elif kind == "item_reference":
            raise RequestError(
                f"{where}: item_reference needs stored items; this proxy stores none",
                param=f"{where}.type",
            )
        else:
            passed_over.append(f"input.{kind}" if isinstance(kind, str) else "input.type")
    return out


def _call(entry: Mapping[str, Any], where: str, passed_over: list[str], *, custom: bool) -> ToolCall:
    """A ``function_call`` item, or a ``custom_tool_call`` one (its raw ``input`` as the
    one argument, :data:`CUSTOM_INPUT`)."""
    call_id = req_str(entry.get("call_id"), f"{where}.call_id")
    name = req_str(entry.get("name"), f"{where}.name")
    if custom:
        text = req_str(entry.get("input", ""), f"{where}.input")
        return ToolCall(id=call_id, name=name, arguments={CUSTOM_INPUT: text})
    arguments = parse_arguments(entry.get("arguments", ""), f"{where}.arguments")
    if arguments is None:  # not a JSON object (cut off ...): kept as a call of no arguments
        passed_over.append("function_call.arguments")
    return ToolCall(id=call_id, name=name, arguments=arguments or {})


def _note(entry: Mapping[str, Any], where: str, passed_over: list[str]) -> SystemMessage:
    """A tool output that answers no call (no ``call_id``): a client's bookkeeping, kept
    as context under its name (Codex: ``goal_objective`` in namespace ``agent``)."""
    label = ".".join(
        req_str(entry[key], f"{where}.{key}") for key in ("namespace", "name") if entry.get(key) is not None
    )
    text = _output_text(entry, where, "function_call_output", passed_over)
    return SystemMessage(content=f"{label or 'note'}: {text}")


def _message(entry: Mapping[str, Any], where: str) -> Message:
    role = entry.get("role")
    content = entry.get("content")
    if role in ("system", "developer"):
        return SystemMessage(content=_text(content, where, _INPUT_TEXT))
    if role == "user":
        return UserMessage(content=_text(content, where, _INPUT_TEXT))
    if role == "assistant":
        return AssistantMessage(content=_text(content, where, _OUTPUT_TEXT) or None)
    raise RequestError(
        f"{where}.role must be one of user, assistant, system, developer; got {role!r}",
        param=f"{where}.role",
    )


def _text(content: Any, where: str, types: Mapping[str, str]) -> str:
    return text_of_parts(content, f"{where}.content", text_types=types) or ""


def _output(
    entry: Mapping[str, Any], where: str, ledger: CallLedger, kind: str, passed_over: list[str]
) -> ToolMessage:
    call_id = req_str(entry.get("call_id"), f"{where}.call_id")
    text = _output_text(entry, where, kind, passed_over)
    answers = "custom_tool_call item" if kind == "custom_tool_call_output" else "function_call item"
    return ledger.answer(call_id, text, where=where, key="call_id", answers=answers)


def _output_text(entry: Mapping[str, Any], where: str, kind: str, passed_over: list[str]) -> str:
    """A tool output's text; an image in it becomes a placeholder (named in ``passed_over``)."""
    media: list[str] = []
    text = text_of_parts(
        entry.get("output"), f"{where}.output", text_types=_INPUT_TEXT, media_types=_OUTPUT_MEDIA, media_seen=media
    ) or ""
    passed_over.extend(f"{kind}.{part}" for part in media)
    return text


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec | None:
    kind = tool.get("type", "function")
    if kind == "custom":
        return _custom_tool(tool, where)
    if kind != "function":
        return None  # hosted tools (web_search, namespace ...): reported by responses_settings
    name = req_str(tool.get("name"), f"{where}.name")
    return ToolSpec.from_any(
        {"name": name, "description": tool.get("description"), "parameters": tool.get("parameters")}
    )


#: how long a custom tool's grammar may be, as shown to the model in its parameter's description
_GRAMMAR_CHARS = 2000


def _custom_tool(tool: Mapping[str, Any], where: str) -> ToolSpec:
    """A custom (freeform) tool as a tool of one string parameter: its raw text input.
    A grammar or regex format is described in that parameter (the model writes the text;
    the call is checked as a string)."""
    name = req_str(tool.get("name"), f"{where}.name")
    about = "The tool's whole raw text input, as one JSON string (its text is not JSON)."
    fmt = tool.get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        definition = fmt["definition"]
        if len(definition) > _GRAMMAR_CHARS:
            definition = definition[:_GRAMMAR_CHARS] + "..."
        syntax = fmt.get("syntax")
        kind = f"{syntax} grammar" if isinstance(syntax, str) and syntax else "grammar"
        about += f" It follows this {kind}:\n{definition}"
    description = tool.get("description")
    return ToolSpec(
        name=name,
        description=req_str(description, f"{where}.description") if description is not None else "",
        parameters={
            "type": "object",
            "properties": {CUSTOM_INPUT: {"type": "string", "description": about}},
            "required": [CUSTOM_INPUT],
        },
    )


def _namespaced_tools(raw: Any) -> tuple[tuple[ToolSpec, ...], frozenset[str], bool]:
    """The tools that ``namespace`` entries of ``raw`` group (already checked as a list),
    offered beside the others; the custom ones among them; and whether a name among them
    was left out because it is offered already (the model sees one flat list of tools)."""
    offered = tool_namespaces(raw)
    specs: list[ToolSpec] = []
    custom: set[str] = set()
    clashed = False
    for i, entry in enumerate(raw if isinstance(raw, list) else ()):
        if not isinstance(entry, Mapping) or entry.get("type") != "namespace":
            continue
        where = f"tools[{i}]"
        space = req_str(entry.get("name"), f"{where}.name")
        for j, item in enumerate(req_list(entry.get("tools"), f"{where}.tools")):
            spec = tool_spec(item, f"{where}.tools[{j}]", _tool)
            if spec is None:
                continue
            if offered.get(spec.name) != space:
                clashed = True
                continue
            del offered[spec.name]  # offered once, as its first namespace has it
            specs.append(spec)
            if item.get("type") == "custom":
                custom.add(spec.name)
    return tuple(specs), frozenset(custom), clashed


def _custom_names(raw: Any) -> frozenset[str]:
    """The names of the custom (freeform) tools among ``raw`` (already validated)."""
    if not isinstance(raw, list):
        return frozenset()
    return frozenset(
        t["name"] for t in raw if isinstance(t, Mapping) and t.get("type") == "custom" and isinstance(t.get("name"), str)
    )


def _response_format(raw: Any) -> JSONObject | None:
    """``text.format`` as a chat-completions ``response_format`` (None for plain text)."""
    if raw is None:
        return None
    fmt = req_mapping(raw, "text").get("format")
    if fmt is None:
        return None
    fmt = req_mapping(fmt, "text.format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema: JSONObject = {
            "name": req_str(fmt.get("name", "output"), "text.format.name"),
            "schema": dict(req_mapping(fmt.get("schema"), "text.format.schema")),
        }
        if fmt.get("strict") is not None:
            schema["strict"] = bool(fmt["strict"])
        return {"type": "json_schema", "json_schema": schema}
    raise RequestError(f"text.format type {kind!r} is not supported", param="text.format.type")
