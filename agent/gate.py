"""The one call gate: validate → repeat / skip-after-failure / budget rules → approval → execute.

A destructive tool always asks; another tool asks when its ``asks_when`` says so for this turn
(a bulk change). An approval is bound to its target: the tool's fingerprint is taken when the
question is put and checked again in the same transaction as the write (``Registry.execute``),
so a target changed by a sync or another chat before the tap is never changed blind.

Every place that executes a model's tool call goes through ``run_call``: the agent loop, the GRPO
environment (so rollouts are judged under the rules the runtime enforces) and the bench's client
loop. What a turn has done so far lives in a ``TurnLedger``; its named methods return the
``StopReason`` a rule imposes (or None), and the ledger keeps the latest one in ``stop`` so the
caller can end the turn after the current reply's calls.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from agent.approval import STALE, ApprovalRequest, Approver
from agent.formats import ToolCall
from agent.records import CallRecord, CallStatus, StopReason
from agent.tools import TARGET_CHANGED, TARGET_CHANGED_MESSAGE, Registry, ToolResult

FAILED_STATUSES = (CallStatus.FAILED, CallStatus.INVALID, CallStatus.DENIED)
REPEAT_REMINDER = (
    "Reminder: you already made this exact call in this turn; the result is the same. Use it instead of calling again."
)


def call_key(name: str, arguments: Any) -> str:
    """Identity of a call for the repeat rules: the name and the arguments, key order ignored."""
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class TurnLedger:
    """Book-keeping across the steps of one turn: the call budget, repeats and failure streaks."""

    max_tool_calls: int = 16
    calls_made: int = 0
    repeats: int = 0
    failures_in_a_row: int = 0
    failed_in_reply: bool = False
    stop: StopReason | None = None
    failed_keys: set[str] = field(default_factory=set)
    succeeded: dict[str, ToolResult] = field(default_factory=dict)
    # Calls that ran (ok) in this turn, by tool: a tool's ``asks_when`` reads it (bulk changes).
    ran: Counter[str] = field(default_factory=Counter)

    def _stop(self, reason: StopReason | None) -> StopReason | None:
        if reason is not None:
            self.stop = reason
        return reason

    def new_reply(self) -> None:
        """A new model reply: the skip-after-failure rule starts afresh."""
        self.failed_in_reply = False

    def unreadable_call(self) -> StopReason | None:
        """A ``<tool_call>`` the parser could not read: one more failure in a row; two end the turn."""
        self.failures_in_a_row += 1
        return self._stop(StopReason.REPEATED_FAILURE if self.failures_in_a_row >= 2 else None)

    def interrupted(self) -> StopReason:
        reason = StopReason.INTERRUPTED
        self._stop(reason)
        return reason

    def budget_exhausted(self) -> StopReason | None:
        """TOOL_CALL_BUDGET once ``max_tool_calls`` calls have run in this turn."""
        return self._stop(StopReason.TOOL_CALL_BUDGET if self.calls_made >= self.max_tool_calls else None)

    def previous_success(self, key: str) -> ToolResult | None:
        return self.succeeded.get(key)

    def repeated(self) -> StopReason | None:
        """An exact repeat of a successful call: the second one ends the turn as NO_PROGRESS."""
        self.repeats += 1
        return self._stop(StopReason.NO_PROGRESS if self.repeats >= 2 else None)

    def count_call(self) -> None:
        self.calls_made += 1

    def remember(self, key: str, result: ToolResult, changed_state: bool) -> None:
        """Keep a successful call's result for the repeat rule. A call that changed the domain's
        state forgets the earlier ones: a search repeated after a create must run again, not be
        answered with what the store held before (the model would be told "same result")."""
        if changed_state:
            self.succeeded.clear()
        self.succeeded[key] = result

    def settle(self, key: str, status: CallStatus) -> StopReason | None:
        """Book a finished call: failures build a streak (the same failing call twice ends the turn)."""
        if status in FAILED_STATUSES:
            self.failed_in_reply = True
            self.failures_in_a_row += 1
            repeated_failure = key in self.failed_keys
            self.failed_keys.add(key)
            return self._stop(StopReason.REPEATED_FAILURE if repeated_failure else None)
        if status is CallStatus.OK:
            self.failures_in_a_row = 0
        return None


def plain(model: BaseModel) -> dict[str, Any]:
    """The validated arguments as JSON data (what the approval gate shows the human)."""
    return model.model_dump(mode="json", exclude_none=True)


def run_call(
    call: ToolCall,
    registry: Registry,
    approver: Approver,
    ledger: TurnLedger,
    *,
    call_id: str = "",
    session_id: str | None = None,
    cancel: threading.Event | None = None,
) -> CallRecord:
    """One call through the gates. Every call gets a record and a result text; nothing raises."""
    started = time.perf_counter()
    key = call_key(call.name, call.arguments)
    destructive = registry.is_destructive(call.name)

    def record(status: CallStatus, result: ToolResult, approval: dict[str, Any] | None = None) -> CallRecord:
        ledger.settle(key, status)
        if status is CallStatus.OK:
            ledger.remember(key, result, registry.mutates(call.name))
            ledger.ran[call.name] += 1
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
        ledger.interrupted()
        return record(CallStatus.SKIPPED, ToolResult.failure("skipped", "Interrupted by the user."))
    if ledger.failed_in_reply:
        return record(
            CallStatus.SKIPPED,
            ToolResult.failure("skipped", "Not run: an earlier call in the same reply failed."),
        )
    if ledger.budget_exhausted() is not None:
        return record(
            CallStatus.SKIPPED,
            ToolResult.failure("skipped", f"Not run: the budget of {ledger.max_tool_calls} tool calls per turn is used up."),
        )
    previous = ledger.previous_success(key)
    if previous is not None:
        ledger.repeated()
        return record(CallStatus.REPEATED, ToolResult(ok=True, data=previous.data, message=REPEAT_REMINDER))

    ledger.count_call()
    validated = registry.validate(call.name, call.arguments)
    if isinstance(validated, ToolResult):
        return record(CallStatus.INVALID, validated)
    approval = None
    # The fingerprint before the words: a change in between then voids the approval instead of
    # binding it to a state the question did not show.
    fingerprint = registry.fingerprint(call.name, validated)
    question = registry.describe(call.name, validated) if destructive else registry.asks_first(
        call.name, validated, ledger.ran)
    if question is None:
        fingerprint = None  # nothing was asked, so there is nothing to hold the call to
    else:
        decision = approver.decide(_request(call, registry, validated, question, fingerprint, session_id))
        approval = {"approved": decision.approved, "reason": decision.reason}
        if not decision.approved and decision.reason == STALE:
            return record(CallStatus.FAILED, ToolResult.failure(TARGET_CHANGED, TARGET_CHANGED_MESSAGE), approval)
        if not decision.approved:
            denied = ToolResult.failure(
                "denied",
                f"The user did not approve {call.name} ({decision.reason}). Nothing was changed. Do not retry; ask the user what they want instead.",
            )
            return record(CallStatus.DENIED, denied, approval)
    # the approved call runs only on the target the user was shown (re-read in its transaction)
    result = registry.execute(call.name, validated, expected=fingerprint)
    return record(CallStatus.OK if result.ok else CallStatus.FAILED, result, approval)


def _request(call: ToolCall, registry: Registry, validated: BaseModel, question: str, fingerprint: str | None,
             session_id: str | None) -> ApprovalRequest:
    """The question for the human, bound to the target as it is now (``fingerprint``)."""
    still_current = None
    if fingerprint is not None:
        still_current = lambda: registry.fingerprint(call.name, validated) == fingerprint  # noqa: E731
    return ApprovalRequest(tool=call.name, arguments=plain(validated), description=question, session_id=session_id,
                           fingerprint=fingerprint, still_current=still_current)
