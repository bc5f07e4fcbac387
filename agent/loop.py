"""The agent loop: model step → parse → validate → approve → execute → results back → repeat.

Reads top to bottom like the diagram in DESIGN.md. The message list it appends to is the
conversation itself and, later, the training record; nothing here knows about calendars.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from agent.approval import ApprovalRequest, Approver
from agent.backends.base import Backend
from agent.parsing import ToolCall, parse_reply
from agent.records import CallRecord, CallStatus, StepRecord, StopReason, Turn
from tools.registry import Registry, ToolResult

QUESTION_ENDINGS = ("?", "？")


@dataclass(frozen=True)
class Budgets:
    max_steps: int = 8  # model steps per turn
    max_tool_calls: int = 16  # tool calls per turn
    max_tokens: int = 512  # generated tokens per step


def call_key(name: str, arguments: Any) -> str:
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


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
        started = time.perf_counter()
        turn = Turn(session_id=session_id, user_text=str(messages[-1].get("content", "")))
        state = _TurnState()

        def emit(message: dict[str, Any]) -> None:
            messages.append(message)
            turn.new_messages.append(message)
            if on_message is not None:
                on_message(message)

        def finish(reason: StopReason, reply: str = "") -> Turn:
            turn.stop_reason = reason
            turn.reply = reply
            turn.seconds = time.perf_counter() - started
            return turn

        tools = self.registry.schemas()
        for index in range(self.budgets.max_steps):
            if cancel is not None and cancel.is_set():
                return finish(StopReason.INTERRUPTED)
            completion = self.backend.complete(
                messages, tools, session_id=session_id, max_tokens=self.budgets.max_tokens
            )
            if completion.finish_reason == "context_limit":
                turn.error = completion.error
                return finish(StopReason.CONTEXT_LIMIT)
            if completion.error is not None or completion.finish_reason == "error":
                turn.error = completion.error or "the model backend failed"
                return finish(StopReason.MODEL_ERROR)

            parsed = parse_reply(completion.text)
            step = StepRecord(
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
            turn.steps.append(step)
            ids = [f"call_{index}_{i}" for i in range(len(parsed.tool_calls))]
            emit(_assistant_message(completion.text, parsed.tool_calls, ids))

            if not parsed.tool_calls:
                if parsed.problems and "<tool_call>" in completion.text:
                    # A call the parser could not read: tell the model, let it try again.
                    state.failures_in_a_row += 1
                    emit(_tool_message("call_unreadable", "invalid_call", _unreadable(parsed.problems)))
                    if state.failures_in_a_row >= 2:
                        return finish(StopReason.REPEATED_FAILURE)
                    continue
                if completion.finish_reason == "length":  # cut off by max_tokens: not a finished answer
                    return finish(StopReason.CUT_OFF, parsed.content)
                if not parsed.content.strip():
                    return finish(StopReason.NO_PROGRESS)
                reason = StopReason.ASKED_USER if parsed.content.rstrip().endswith(QUESTION_ENDINGS) else StopReason.FINAL_REPLY
                return finish(reason, parsed.content)

            tool_started = time.perf_counter()
            state.failed_in_reply = False
            for call, call_id in zip(parsed.tool_calls, ids):
                record = self._run_call(call, call_id, state, approver, session_id, cancel)
                step.calls.append(record)
                emit(_tool_message(call_id, call.name, record.result))
            step.tool_seconds = time.perf_counter() - tool_started

            if state.stop is not None:
                return finish(state.stop, parsed.content)
        return finish(StopReason.STEP_BUDGET)

    def _run_call(
        self,
        call: ToolCall,
        call_id: str,
        state: _TurnState,
        approver: Approver,
        session_id: str | None,
        cancel: threading.Event | None,
    ) -> CallRecord:
        """One call through the gates. Every call gets a record and a result text."""
        started = time.perf_counter()
        key = call_key(call.name, call.arguments)
        destructive = self.registry.is_destructive(call.name)

        def record(status: CallStatus, result: ToolResult, approval: dict[str, Any] | None = None) -> CallRecord:
            if status in (CallStatus.FAILED, CallStatus.INVALID, CallStatus.DENIED):
                state.failed_in_reply = True
                state.failures_in_a_row += 1
                if key in state.failed_keys:
                    state.stop = StopReason.REPEATED_FAILURE
                state.failed_keys.add(key)
            elif status is CallStatus.OK:
                state.failures_in_a_row = 0
                state.succeeded[key] = result
            return CallRecord(
                name=call.name,
                arguments=call.arguments,
                status=status,
                result=result.to_text(),
                call_id=call_id,
                destructive=destructive,
                approval=approval,
                seconds=time.perf_counter() - started,
            )

        if cancel is not None and cancel.is_set():
            state.stop = StopReason.INTERRUPTED
            return record(CallStatus.SKIPPED, ToolResult.failure("skipped", "Interrupted by the user."))
        if state.failed_in_reply:
            return record(
                CallStatus.SKIPPED,
                ToolResult.failure("skipped", "Not run: an earlier call in the same reply failed."),
            )
        if state.calls_made >= self.budgets.max_tool_calls:
            state.stop = StopReason.TOOL_CALL_BUDGET
            return record(
                CallStatus.SKIPPED,
                ToolResult.failure("skipped", f"Not run: the budget of {self.budgets.max_tool_calls} tool calls per turn is used up."),
            )
        if key in state.succeeded:
            state.repeats += 1
            if state.repeats >= 2:
                state.stop = StopReason.NO_PROGRESS
            previous = state.succeeded[key]
            reminder = "Reminder: you already made this exact call in this turn; the result is the same. Use it instead of calling again."
            return record(CallStatus.REPEATED, ToolResult(ok=True, data=previous.data, message=reminder))

        state.calls_made += 1
        validated = self.registry.validate(call.name, call.arguments)
        if isinstance(validated, ToolResult):
            return record(CallStatus.INVALID, validated)
        approval = None
        if destructive:
            decision = approver.decide(
                ApprovalRequest(
                    tool=call.name,
                    arguments=_plain(validated),
                    description=self.registry.describe(call.name, validated),
                    session_id=session_id,
                )
            )
            approval = {"approved": decision.approved, "reason": decision.reason}
            if not decision.approved:
                denied = ToolResult.failure(
                    "denied",
                    f"The user did not approve {call.name} ({decision.reason}). Nothing was changed. Do not retry; ask the user what they want instead.",
                )
                return record(CallStatus.DENIED, denied, approval)
        result = self.registry.execute(call.name, validated)
        return record(CallStatus.OK if result.ok else CallStatus.FAILED, result, approval)


@dataclass
class _TurnState:
    """Book-keeping across the steps of one turn."""

    calls_made: int = 0
    repeats: int = 0
    failures_in_a_row: int = 0
    failed_in_reply: bool = False
    stop: StopReason | None = None
    failed_keys: set[str] = field(default_factory=set)
    succeeded: dict[str, ToolResult] = field(default_factory=dict)


def _plain(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


def _assistant_message(text: str, calls: list[ToolCall], ids: list[str]) -> dict[str, Any]:
    """The exact text stays in ``content``; ``tool_calls`` is the parsed view for exports/APIs."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
            }
            for call, call_id in zip(calls, ids)
        ]
    return message


def _tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _unreadable(problems: list[str]) -> str:
    return ToolResult.failure(
        "invalid_call",
        "Your tool call could not be read: " + "; ".join(problems)
        + '. Write <tool_call>{"name": ..., "arguments": {...}}</tool_call> with valid JSON.',
    ).to_text()
