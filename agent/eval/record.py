"""One eval episode as the runner writes it, ``<results>/episodes/<key>.json``, and as the
summary, ``eval compare`` and the exports read it back.

The file is the record's fields at the top level; ``scenario``, ``exchanges[].turn``, ``calls``
and ``verdict`` are the runtime's own dataclasses (``Scenario``, ``Turn``, ``TracedCall``,
``Verdict``) written field by field, enums as their values. That is the format the runner has
written from the start, so results folders written before this model existed load unchanged.

pydantic checks a file against these types, unknown fields included: a file that is not an
episode record is refused with one line naming the file, the line and what is wrong, instead
of surfacing as a ``KeyError`` in a report three modules later.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from agent.backends.sampling import Sampling
from agent.eval.trace import EpisodeTrace, TracedCall
from agent.eval.types import Scenario, Verdict
from agent.history import DEFAULT_HISTORY_TURNS
from agent.records import StopReason, Turn

EPISODES_DIR = "episodes"


class RecordedExchange(BaseModel):
    """One user message (as the model saw it, stamped) and the agent's turn in answer to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str
    script_line: int | None = None  # which line of the scenario's user script it was, if any
    turn: Turn


class EpisodeRecord(BaseModel):
    """Everything one episode left behind: the task, the conversation, each call as placed in the
    dialogue, the final store, the verifier's verdict and who played it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # scenario id + sample: what resumes and what ``eval compare`` pairs on
    scenario_id: str
    template: str
    variant: str
    split: str
    language: str
    sample: int
    scenario: Scenario
    messages: list[dict[str, Any]]  # the whole conversation in the loop's form, system message first
    exchanges: list[RecordedExchange]
    stop_reasons: list[StopReason]  # one per exchange
    calls: list[TracedCall]
    final_snapshot: dict[str, Any]
    verdict: Verdict
    backend: dict[str, Any]  # the backend's identity (model, adapter, ...)
    error: str | None  # the runner itself failed (not the model)
    seconds: float
    # this episode's own temperature/top-p/seed (derived per scenario and sample); None: greedy,
    # which is also what files written before sampling existed mean
    sampling: Sampling | None = None
    # the history window each turn was shown (the runtime's ``history_turns``/``history_block``,
    # ``agent.history``); the defaults are also what files written before these fields mean
    history_turns: int = DEFAULT_HISTORY_TURNS
    history_block: int | None = None

    @classmethod
    def of(cls, key: str, sample: int, trace: EpisodeTrace, verdict: Verdict, backend: dict[str, Any],
           seconds: float, sampling: Sampling | None = None, history_turns: int = DEFAULT_HISTORY_TURNS,
           history_block: int | None = None) -> EpisodeRecord:
        """The record of a finished (or crashed) episode, from its trace and verdict."""
        scenario = trace.scenario
        return cls(
            key=key, scenario_id=scenario.id, template=scenario.template, variant=scenario.variant,
            split=scenario.split, language=scenario.language, sample=sample, scenario=scenario,
            messages=trace.messages,
            exchanges=[RecordedExchange(user=e.user_text, script_line=e.script_line, turn=e.turn)
                       for e in trace.exchanges],
            stop_reasons=[e.turn.stop_reason for e in trace.exchanges],
            calls=trace.calls(), final_snapshot=trace.final, verdict=verdict, backend=backend,
            error=trace.error, seconds=seconds, sampling=sampling, history_turns=history_turns,
            history_block=history_block,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data, in the file's field order. A greedy episode with the default
        history window has no ``sampling`` or ``history_*`` fields (a scenario with a simulated user
        no ``fixed_turns``, one without earlier tasks no ``history``, its verdict no
        ``unasked_changes``), so it is the same shape as files written before those existed."""
        unset = {"sampling": self.sampling is None, "history_turns": self.history_turns == DEFAULT_HISTORY_TURNS,
                 "history_block": self.history_block is None}
        exclude: dict[str, Any] = {k: True for k, default in unset.items() if default}
        # a simulated user and a fresh conversation, as every scenario was before the fields
        fresh = {k for k, default in (("fixed_turns", not self.scenario.fixed_turns),
                                      ("history", not self.scenario.history)) if default}
        if fresh:
            exclude["scenario"] = fresh
        if self.verdict.unasked_changes is None:  # no earlier tasks: as verdicts were before it was counted
            exclude["verdict"] = {"unasked_changes"}
        return self.model_dump(mode="json", exclude=exclude)

    def last_output(self) -> str:
        """The model's last raw output in the episode ("" if it produced none)."""
        for exchange in reversed(self.exchanges):
            if exchange.turn.steps:
                return exchange.turn.steps[-1].raw_output
        return ""

    @model_serializer(mode="wrap")
    def _turns_without_empty_receipts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A turn without a receipt has no ``receipt`` field, as turns were before they had one,
        so such a record is the same shape as the files written then (``to_json``)."""
        data = handler(self)
        for exchange in data.get("exchanges", []):
            turn = exchange.get("turn")
            if isinstance(turn, dict) and turn.get("receipt", "") is None:
                del turn["receipt"]
        return data


class EpisodeFileError(ValueError):
    """A file that does not hold an episode record; the message is one line: ``path:line: what``."""

    def __init__(self, message: str, cut_short: bool = False) -> None:
        super().__init__(message)
        self.cut_short = cut_short  # not even JSON: a write that never finished


def parse_episode(text: str, source: str = "<episode>") -> EpisodeRecord:
    """The record in ``text`` (one episode file's contents), or ``EpisodeFileError``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", 1)
        raise EpisodeFileError(f"{source}:{line}: not valid JSON ({getattr(exc, 'msg', exc)})", cut_short=True) from exc
    try:
        return EpisodeRecord.model_validate(data)
    except ValidationError as exc:
        raise EpisodeFileError(_one_line(exc, text, source)) from exc


def read_episode(path: Path) -> EpisodeRecord:
    """The record in one episode file. ``OSError`` if it cannot be read, ``EpisodeFileError``
    if it is not an episode record."""
    return parse_episode(Path(path).read_text(encoding="utf-8"), str(path))


# -- a one-line error ------------------------------------------------------------------------

_PROBLEM_WORDS = {"missing": "missing", "extra_forbidden": "unexpected field",
                  "unexpected_keyword_argument": "unexpected field"}


def _one_line(exc: ValidationError, text: str, source: str) -> str:
    """``source:line: field.path: problem``, for the first problem pydantic found."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first.get("loc", ()))
    where = ".".join(str(part) for part in loc) or "the file"
    what = _PROBLEM_WORDS.get(first.get("type", ""), first.get("msg", "invalid"))
    if first.get("type") not in _PROBLEM_WORDS and "input" in first:
        what += f" (got {_short(first['input'])})"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    line = text.count("\n", 0, _offset(text, loc)) + 1
    return f"{source}:{line}: {where}: {what}{more}"


def _short(value: Any, limit: int = 40) -> str:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def _offset(text: str, loc: tuple[Any, ...]) -> int:
    """Where the value at ``loc`` (pydantic's error location) starts in the JSON text; where the
    deepest enclosing value starts if ``loc`` goes further than the text (a missing field)."""
    position = _SPACE.match(text).end()  # type: ignore[union-attr]
    for part in loc:
        inner = _child(text, position, part)
        if inner is None:
            break
        position = inner
    return position


def _skip(text: str, position: int, token: str) -> int:
    """Past optional whitespace, ``token`` if it is next, and the whitespace after it."""
    position = _SPACE.match(text, position).end()  # type: ignore[union-attr]
    if text.startswith(token, position):
        position = _SPACE.match(text, position + len(token)).end()  # type: ignore[union-attr]
    return position


def _child(text: str, position: int, part: Any) -> int | None:
    """Start of the member ``part`` (a key of an object, an index of an array) of the value at
    ``position``, or None if there is no such member."""
    try:
        if text.startswith("{", position) and isinstance(part, str):
            position = _skip(text, position, "{")
            while not text.startswith("}", position):
                key, position = _DECODER.raw_decode(text, position)
                position = _skip(text, position, ":")
                if key == part:
                    return position
                _, position = _DECODER.raw_decode(text, position)
                position = _skip(text, position, ",")
        elif text.startswith("[", position) and isinstance(part, int):
            position = _skip(text, position, "[")
            index = 0
            while not text.startswith("]", position):
                if index == part:
                    return position
                _, position = _DECODER.raw_decode(text, position)
                position = _skip(text, position, ",")
                index += 1
    except ValueError:
        return None
    return None
