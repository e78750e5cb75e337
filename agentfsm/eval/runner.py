"""Run BFCL cases through the agentfsm runtime, and through BFCL's own prompt mode.

Each case is one deciding turn (:func:`agentfsm.runtime.turn.run_turn`): the model's calls are
scored, never executed. ``tool_choice`` is ``auto`` for every category, so nothing
tells the model whether a call is expected (irrelevance cases need none).

Scoring rules, as BFCL's eval runner applies them:

- a turn that ends in calls is scored on those calls, ``[{name: arguments}]``;
- a turn that ends in a prose answer holds no call (``[]``);
- a turn that ends without an accepted reply (budget spent, loop) is wrong in the AST
  categories; in the relevance categories it counts as a call when its last reply held one.

The baseline row sends BFCL's system prompt and decodes the reply with BFCL's decoder,
on the same backend, with the same generation options minus schema and prefill.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.core._types import DIALECT_NAMES
from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.engine.decide import CallTools, EngineConfig
from agentfsm.prompt.enforcement import choose_level
from agentfsm.core.errors import RunError, UsageError
from agentfsm.eval.baseline import bfcl_prompt_messages, decode_ast_prompting
from agentfsm.eval.bfcl_data import BfclCase, load_cases
from agentfsm.eval.checker import check_case
from agentfsm.core.messages import AssistantMessage, Message, PromptMessage, SystemMessage, UserMessage
from agentfsm.batch.task import transcript_name
from agentfsm.core.events import EvalRunConfig, GuardEvent, ModelOutputEvent, ParseEvent, TranscriptEvent
from agentfsm.eval.runtime_text import CallsSpent, RunTexts
from agentfsm.runtime.recorder import Recorder, run_config_fields
from agentfsm.runtime.turn import recorded_turn

__all__ = [
    "BASELINE",
    "CaseResult",
    "EvalPlan",
    "load_plan_cases",
    "RunSpec",
    "resolve_specs",
    "run_baseline_case",
    "run_eval",
    "run_runtime_case",
    "try_decode",
]

DIALECTS_ALL: tuple[str, ...] = DIALECT_NAMES


@dataclass(frozen=True)
class RunSpec:
    """One row family of the report: a dialect and an enforcement level (or the baseline)."""

    #: a dialect name, or ``bfcl-prompt`` for the baseline
    dialect: str
    #: an enforcement level, or ``baseline``
    enforcement: str

    @property
    def is_baseline(self) -> bool:
        """Whether this is BFCL's own prompt mode."""
        return self.enforcement == "baseline"

    @property
    def label(self) -> str:
        """``dialect / level``, as printed in tables and charts."""
        return "BFCL prompt (baseline)" if self.is_baseline else f"{self.dialect} / {self.enforcement}"


#: BFCL's prompt mode: its system prompt and its decoder
BASELINE = RunSpec("bfcl-prompt", "baseline")


@dataclass(frozen=True)
class CaseResult:
    """How one case went under one spec."""

    case_id: str
    category: str
    dialect: str
    enforcement: str
    valid: bool
    error_type: str | None
    replies: int
    parsed_replies: int
    repaired_replies: int
    protocol_valid: bool
    corrections: dict[str, int] = field(default_factory=dict)
    refusals: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    decoded: Any = None
    last_reply: str = ""
    #: model calls made (every completion, extensions included; ``replies`` leaves those out)
    model_calls: int = 0
    #: the final answer, when the turn ended in one
    answer: str | None = None
    #: the runtime text that answer copied, if any (:mod:`agentfsm.eval.runtime_text`)
    runtime_text: str | None = None
    #: that answer repeats the request (:func:`~agentfsm.eval.runtime_text.echoes`)
    echo: bool = False
    #: model calls spent on extensions, consensus candidates and corrections
    spent: CallsSpent = CallsSpent()

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the JSON report."""
        return {
            "id": self.case_id,
            "category": self.category,
            "dialect": self.dialect,
            "enforcement": self.enforcement,
            "valid": self.valid,
            "error_type": self.error_type,
            "replies": self.replies,
            "parsed_replies": self.parsed_replies,
            "repaired_replies": self.repaired_replies,
            "protocol_valid": self.protocol_valid,
            "corrections": dict(self.corrections),
            "refusals": self.refusals,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
            # as repr; one read back from a report (eval bfcl --resume) is that text already
            "decoded": self.decoded if self.decoded is None or isinstance(self.decoded, str) else repr(self.decoded),
            "last_reply": self.last_reply[:2000],
            "model_calls": self.model_calls,
            "answer": self.answer,
            "runtime_text": self.runtime_text,
            "echo": self.echo,
            "spent": {"extensions": self.spent.extensions, "candidates": self.spent.candidates,
                      "corrections": self.spent.corrections},
        }


@dataclass(frozen=True)
class EvalPlan:
    """What to run: categories, how many cases each, and the specs (baseline included)."""

    categories: tuple[str, ...]
    specs: tuple[RunSpec, ...]
    limit: int | None = None
    data_dir: Path | None = None
    #: the run configuration; each spec sets its dialect, BFCL's ``tool_choice`` is
    #: ``auto`` and its parallel categories need ``parallel``
    config: RunConfig = DEFAULTS
    #: write one transcript per case and spec here (replayable with ``agentfsm replay``)
    transcripts_dir: Path | None = None


def resolve_specs(backend: Backend, dialects: str, enforcement: str, baseline: bool = True) -> tuple[RunSpec, ...]:
    """Expand ``all`` / comma lists into specs; levels the backend cannot do are refused.

    ``all`` levels are ``prompt`` and, where the backend constrains decoding,
    ``constrained``: ``prefill`` only acts when a call is required, and BFCL's
    ``tool_choice`` is ``auto``, so it would repeat the ``prompt`` row.
    """
    names = DIALECTS_ALL if dialects.strip() == "all" else tuple(d.strip() for d in dialects.split(",") if d.strip())
    for name in names:
        if name not in DIALECTS_ALL:
            raise UsageError(f"unknown dialect {name!r}; known: {', '.join(DIALECTS_ALL)}")
    caps = backend.capabilities
    if enforcement.strip() == "all":
        levels: tuple[str, ...] = ("prompt", "constrained") if caps.json_schema else ("prompt",)
    else:
        requested = tuple(e.strip() for e in enforcement.split(",") if e.strip())
        levels = tuple(dict.fromkeys(choose_level(e, caps, ToolChoice.AUTO) if e == "auto" else e for e in requested))
        for level in levels:
            choose_level(level, caps, ToolChoice.AUTO)  # raises UsageError for a level the backend lacks
    if not names or not levels:
        raise UsageError("no dialect or enforcement level to run")
    specs = tuple(RunSpec(d, lvl) for d in names for lvl in levels)
    return ((BASELINE,) if baseline else ()) + specs


def _history(case: BfclCase) -> list[Message]:
    out: list[Message] = []
    for m in case.messages:
        if m["role"] == "system":
            out.append(SystemMessage(content=m["content"]))
        elif m["role"] == "assistant":
            out.append(AssistantMessage(content=m["content"]))
        else:
            out.append(UserMessage(content=m["content"]))
    return out


class _Recorder:
    """Collects the turn's events: parses, guard verdicts, raw replies."""

    def __init__(self) -> None:
        self.replies = 0
        self.parsed = 0
        self.repaired = 0
        self.corrections: Counter[str] = Counter()
        self.last_text = ""
        self.last_calls: list[dict[str, Any]] = []
        self.texts = RunTexts()

    def __call__(self, event: TranscriptEvent) -> None:
        self.texts(event)
        match event:
            case ModelOutputEvent():
                # an extension step continues the reply before it: one reply, two calls
                self.replies += 0 if event.extension else 1
                self.last_text = event.text
            case ParseEvent(problems=problems):
                if not any(p.rejected for p in problems) and not event.truncated:
                    self.parsed += 1
                if any(not p.rejected for p in problems):
                    self.repaired += 1
                self.last_calls = [{c.name: dict(c.arguments)} for c in event.tool_calls]
            case GuardEvent(verdict="correct"):
                self.corrections[event.guard] += 1


def _recorder(transcripts_dir: Path | None, backend: Backend, case: BfclCase, spec: RunSpec, run: RunConfig,
              config: EngineConfig, history: Sequence[Message], on_event: _Recorder) -> Recorder:
    """The case's recorder (a file only with a directory), its run_start and request written."""
    path = None
    if transcripts_dir is not None:
        path = Path(transcripts_dir) / transcript_name(f"{case.id}.{spec.dialect}.{spec.enforcement}")
        path.unlink(missing_ok=True)  # a re-run replaces the case's transcript
    recorder = Recorder(path, on_event=on_event)
    recorder.start(
        lambda: EvalRunConfig(
            **run_config_fields(config, run.enforcement, backend), case=case.id, category=case.category
        ),
        config,
        history,
    )
    return recorder


async def run_runtime_case(
    backend: Backend,
    case: BfclCase,
    spec: RunSpec,
    options: GenerationOptions,
    config: RunConfig = DEFAULTS,
    transcripts_dir: Path | None = None,
) -> CaseResult:
    """One case through :func:`~agentfsm.runtime.turn.recorded_turn` with ``spec``'s dialect and level; with
    ``transcripts_dir``, its transcript is written there (``CASE.DIALECT.LEVEL.jsonl``)."""
    history = _history(case)
    run = config.replace(dialect=spec.dialect, enforcement=spec.enforcement)  # checked: a UsageError for the baseline
    engine = EngineConfig.of(run, case.tools, tool_choice=ToolChoice.AUTO, parallel=True, capabilities=backend.capabilities)
    rec = _Recorder()
    start = time.perf_counter()
    prompt_tokens = completion_tokens = 0
    decoded: Any
    recorder = _recorder(transcripts_dir, backend, case, spec, run, engine, history, rec)
    try:
        outcome = await recorded_turn(backend, history, engine, run.enforcement, options, recorder)
    finally:
        recorder.close()
    if isinstance(outcome, RunError):
        protocol_valid = False
        decoded = None if case.ground_truth is not None else (rec.last_calls or None)
    else:
        prompt_tokens, completion_tokens = outcome.usage.prompt_tokens, outcome.usage.completion_tokens
        calls = outcome.decision.calls if isinstance(outcome.decision, CallTools) else ()
        decoded = [{c.name: dict(c.arguments)} for c in calls]
        protocol_valid = True
        if outcome.exhausted:  # the budget ran out: scored as before, as no valid reply
            protocol_valid = False
            decoded = None if case.ground_truth is not None else (rec.last_calls or None)
    seconds = time.perf_counter() - start
    verdict = check_case(case.category, list(case.functions), _truth(case), decoded)
    answer = None if isinstance(outcome, RunError) or isinstance(outcome.decision, CallTools) else outcome.decision.content
    return CaseResult(
        case_id=case.id,
        category=case.category,
        dialect=spec.dialect,
        enforcement=spec.enforcement,
        valid=bool(verdict["valid"]),
        error_type=verdict.get("error_type") if not verdict["valid"] else None,
        replies=rec.replies,
        parsed_replies=rec.parsed,
        repaired_replies=rec.repaired,
        protocol_valid=protocol_valid,
        corrections=dict(rec.corrections),
        refusals=rec.corrections.get("refusal", 0),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        seconds=seconds,
        decoded=decoded,
        last_reply=rec.last_text,
        model_calls=rec.texts.model_calls,
        spent=rec.texts.spent,
        answer=answer,
        runtime_text=rec.texts.finding(answer) if answer is not None else None,
        echo=answer is not None and rec.texts.echo(answer),
    )


def _truth(case: BfclCase) -> list[dict[str, Any]] | None:
    return list(case.ground_truth) if case.ground_truth is not None else None


def try_decode(text: str) -> list[dict[str, Any]] | None:
    """BFCL's decoder on ``text``; ``None`` where it fails (any exception, as BFCL counts it)."""
    try:
        return decode_ast_prompting(text)
    except Exception:  # noqa: BLE001 - BFCL scores every decoder exception as "did not decode"
        return None


async def run_baseline_case(backend: Backend, case: BfclCase, options: GenerationOptions) -> CaseResult:
    """One case in BFCL's prompt mode: its system prompt, plain generation, its decoder."""
    messages = bfcl_prompt_messages(list(case.messages), list(case.offered))
    prompt = [PromptMessage.model_validate(m) for m in messages]
    plain = options.model_copy(update={"json_schema": None, "prefill": None})
    start = time.perf_counter()
    completion = await backend.acomplete(prompt, plain)
    seconds = time.perf_counter() - start
    decoded = try_decode(completion.text)
    verdict = check_case(case.category, list(case.functions), _truth(case), decoded)
    return CaseResult(
        case_id=case.id,
        category=case.category,
        dialect=BASELINE.dialect,
        enforcement=BASELINE.enforcement,
        valid=bool(verdict["valid"]),
        error_type=verdict.get("error_type") if not verdict["valid"] else None,
        replies=1,
        parsed_replies=1 if decoded is not None else 0,
        repaired_replies=0,
        protocol_valid=decoded is not None,
        prompt_tokens=completion.usage.prompt_tokens,
        completion_tokens=completion.usage.completion_tokens,
        seconds=seconds,
        decoded=decoded,
        last_reply=completion.text,
        model_calls=1,
    )


async def run_eval(
    backend: Backend,
    plan: EvalPlan,
    options: GenerationOptions | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    cases: Sequence[BfclCase] | None = None,
) -> list[CaseResult]:
    """Every case of the plan under every spec, case by case (specs interleaved, so a
    slow stretch of the machine hits all rows alike)."""
    options = options or GenerationOptions()
    todo = list(cases) if cases is not None else [
        c for cat in plan.categories for c in load_cases(cat, plan.limit, plan.data_dir)
    ]
    results: list[CaseResult] = []
    for case in todo:
        for spec in plan.specs:
            if spec.is_baseline:
                result = await run_baseline_case(backend, case, options)
            else:
                result = await run_runtime_case(
                    backend, case, spec, options, plan.config, plan.transcripts_dir
                )
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def load_plan_cases(plan: EvalPlan) -> list[BfclCase]:
    """The cases a plan runs, in order (for progress totals)."""
    return [c for cat in plan.categories for c in load_cases(cat, plan.limit, plan.data_dir)]
