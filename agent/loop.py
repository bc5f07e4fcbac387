"""The agent loop: model step → parse → the call gate (``agent.gate``) → results back → repeat.

Reads top to bottom like the diagram in DESIGN.md. The message list it appends to is the
conversation itself and, later, the training record; nothing here knows about calendars, nor
about a chat format: replies are read with the backend's (``agent.formats.chat_format.format_of``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from agent.approval import Approver
from agent.backends.base import Backend, Completion
from agent.formats.chat_format import ChatFormat, format_of
from agent.formats.reply import ParsedReply, ToolCall
from agent.gate import TurnLedger, call_key, run_call
from agent.records import StepRecord, StopReason, Turn
from agent.tools import Registry, ToolResult

__all__ = ["Agent", "Budgets", "QUESTION_ENDINGS", "call_key"]  # call_key: re-exported for old imports

QUESTION_ENDINGS = ("?", "？")


@dataclass(frozen=True)
class Budgets:
    max_steps: int = 8  # model steps per turn
    max_tool_calls: int = 16  # tool calls per turn
    max_tokens: int = 512  # generated tokens per step


class Agent:
    def __init__(self, backend: Backend, registry: Registry, budgets: Budgets = Budgets()) -> None:
        self.backend = backend
        self.registry = registry
        self.budgets = budgets

    def run_turn(
        self,
        messages: list[dict[str, Any]],
        approver: Approver,
        *,
        session_id: str | None = None,
        cancel: threading.Event | None = None,
        on_message: Callable[[dict[str, Any]], None] | None = None,
    ) -> Turn:
        """Run one user turn. ``messages`` ends with the user's message and is appended to."""
        log = _TurnLog(messages, on_message, Turn(session_id=session_id, user_text=str(messages[-1].get("content", ""))))
        ledger = TurnLedger(max_tool_calls=self.budgets.max_tool_calls)
        tools = self.registry.schemas()
        fmt = format_of(self.backend)  # the model's format, chosen by the backend when it loaded it
        for index in range(self.budgets.max_steps):
            if cancel is not None and cancel.is_set():
                return log.finish(StopReason.INTERRUPTED)
            completion = self.backend.complete(messages, tools, session_id=session_id, max_tokens=self.budgets.max_tokens)
            if (failure := _backend_failure(completion)) is not None:
                return log.finish(failure[0], error=failure[1])

            parsed = fmt.parse_reply(completion.text)
            step = log.add_step(_step_record(index, completion, parsed))
            ids = [f"call_{index}_{i}" for i in range(len(parsed.tool_calls))]
            log.emit(_assistant_message(completion.text, parsed.tool_calls, ids, completion.native_tool_calls))

            if not parsed.tool_calls:
                if not _unreadable_call(completion.text, parsed, fmt):
                    return log.finish(*_reply_end(completion, parsed))
                stop = ledger.unreadable_call()  # tell the model what went wrong, let it try again
                log.emit(_tool_message("call_unreadable", "invalid_call", _unreadable(parsed.problems, fmt)))
                if stop is not None:
                    return log.finish(stop)
                continue

            tool_started = time.perf_counter()
            ledger.new_reply()
            for call, call_id in zip(parsed.tool_calls, ids):
                record = run_call(call, self.registry, approver, ledger, call_id=call_id,
                                  session_id=session_id, cancel=cancel)
                step.calls.append(record)
                log.emit(_tool_message(call_id, call.name, record.result))
            step.tool_seconds = time.perf_counter() - tool_started
            if ledger.stop is not None:
                return log.finish(ledger.stop, parsed.content)
        return log.finish(StopReason.STEP_BUDGET)


class _TurnLog:
    """What a turn has produced so far: the messages it appended and its ``Turn`` record."""

    def __init__(self, messages: list[dict[str, Any]], on_message: Callable[[dict[str, Any]], None] | None,
                 turn: Turn) -> None:
        self.messages = messages
        self.on_message = on_message
        self.turn = turn
        self.started = time.perf_counter()

    def emit(self, message: dict[str, Any]) -> None:
        """Append to the conversation (and the turn's new messages), and tell the listener."""
        self.messages.append(message)
        self.turn.new_messages.append(message)
        if self.on_message is not None:
            self.on_message(message)

    def add_step(self, step: StepRecord) -> StepRecord:
        self.turn.steps.append(step)
        return step

    def finish(self, reason: StopReason, reply: str = "", error: str | None = None) -> Turn:
        if error is not None:
            self.turn.error = error
        self.turn.stop_reason = reason
        self.turn.reply = reply
        self.turn.seconds = time.perf_counter() - self.started
        return self.turn


def _backend_failure(completion: Completion) -> tuple[StopReason, str | None] | None:
    """Why the backend could not give a reply (the context is full, or it failed), or None."""
    if completion.finish_reason == "context_limit":
        return StopReason.CONTEXT_LIMIT, completion.error
    if completion.error is not None or completion.finish_reason == "error":
        return StopReason.MODEL_ERROR, completion.error or "the model backend failed"
    return None


def _step_record(index: int, completion: Completion, parsed: ParsedReply) -> StepRecord:
    """The trajectory's view of one model step; the calls and tool time are added as they run."""
    return StepRecord(
        index=index,
        raw_output=completion.text,
        reasoning=parsed.reasoning,
        content=parsed.content,
        problems=list(parsed.problems),
        prompt_tokens=completion.prompt_tokens,
        evaluated_tokens=completion.evaluated_tokens,
        reused_tokens=completion.reused_tokens,
        generated_tokens=completion.generated_tokens,
        finish_reason=completion.finish_reason,
        model_seconds=completion.seconds,
        timings=dict(completion.timings),
    )


def _unreadable_call(text: str, parsed: ParsedReply, fmt: ChatFormat) -> bool:
    """The model wrote a call tag, but the parser could read no call from it."""
    return not parsed.tool_calls and bool(parsed.problems) and fmt.call_open in text


def _reply_end(completion: Completion, parsed: ParsedReply) -> tuple[StopReason, str]:
    """How a reply without calls ends the turn, and the reply text the user gets."""
    if completion.finish_reason == "length":  # cut off by max_tokens: not a finished answer
        return StopReason.CUT_OFF, parsed.content
    if not parsed.content.strip():
        return StopReason.NO_PROGRESS, ""
    if parsed.content.rstrip().endswith(QUESTION_ENDINGS):
        return StopReason.ASKED_USER, parsed.content
    return StopReason.FINAL_REPLY, parsed.content


def _assistant_message(text: str, calls: list[ToolCall], ids: list[str],
                       native: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The exact text stays in ``content``; ``tool_calls`` is the parsed view for exports/APIs.

    ``arguments`` is the server's own text when the calls came back natively (the same calls,
    in order), else one fixed dump: what is sent back must be the same bytes every turn, so
    server-side prefix caches stay valid.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        served: list[str | None] = [None] * len(calls)
        if native is not None and [c.get("name") for c in native] == [c.name for c in calls]:
            served = [_same_json(c.get("arguments_text"), call.arguments) for c, call in zip(native, calls)]
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name,
                             "arguments": exact if isinstance(exact, str) else json.dumps(call.arguments, ensure_ascii=False)},
            }
            for call, call_id, exact in zip(calls, ids, served)
        ]
    return message


def _same_json(text: Any, arguments: dict[str, Any]) -> str | None:
    """The server's arguments text if it is valid JSON for exactly these arguments, else None.

    A repaired call (truncated or otherwise broken JSON the parser mended) must not be stored
    as sent: strict APIs refuse invalid ``arguments`` with 400 on every later turn of the chat.
    """
    if not isinstance(text, str):
        return None
    try:
        return text if json.loads(text) == arguments else None
    except ValueError:
        return None


def _tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _unreadable(problems: list[str], fmt: ChatFormat) -> str:
    return ToolResult.failure(
        "invalid_call",
        "Your tool call could not be read: " + "; ".join(problems)
        + f". Write {fmt.call_example} with valid JSON.",
    ).to_text()
