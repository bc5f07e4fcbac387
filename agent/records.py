"""What one turn produced, as plain data: the trajectory log, eval and export all read these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class StopReason(str, Enum):
    FINAL_REPLY = "final_reply"  # the model answered without calling a tool
    ASKED_USER = "asked_user"  # ... and the answer is a question for the user
    STEP_BUDGET = "step_budget"
    TOOL_CALL_BUDGET = "tool_call_budget"
    REPEATED_FAILURE = "repeated_failure"  # the same failing call again, or failures only
    NO_PROGRESS = "no_progress"  # empty replies, or the same successful call over and over
    MODEL_ERROR = "model_error"  # the backend failed
    INTERRUPTED = "interrupted"  # /cancel, Ctrl-C
    CONTEXT_LIMIT = "context_limit"
    CUT_OFF = "cut_off"  # the reply reached max_tokens (backend finish_reason "length") before it ended


class CallStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"  # the tool ran and returned a failure result
    INVALID = "invalid"  # unknown tool or arguments that do not validate: never executed
    DENIED = "denied"  # the approval gate said no
    SKIPPED = "skipped"  # an earlier call in the same reply failed, or a budget ran out
    REPEATED = "repeated"  # identical to an earlier successful call in this turn: not run again


@dataclass
class CallRecord:
    name: str
    arguments: Any
    status: CallStatus
    result: str  # the exact text the model sees
    call_id: str = ""
    destructive: bool = False
    approval: dict[str, Any] | None = None  # {"approved": bool, "reason": str, "description": str}
    seconds: float = 0.0


@dataclass
class StepRecord:
    index: int
    raw_output: str
    reasoning: str = ""
    content: str = ""
    problems: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    evaluated_tokens: int = 0
    reused_tokens: int = 0
    generated_tokens: int = 0
    finish_reason: str = "stop"
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class Turn:
    session_id: str | None
    user_text: str  # the user's message as the model saw it: stamped by the runtime, "[HH:MM] text"
    reply: str = ""
    stop_reason: StopReason = StopReason.FINAL_REPLY
    steps: list[StepRecord] = field(default_factory=list)
    new_messages: list[dict[str, Any]] = field(default_factory=list)  # assistant + tool messages
    error: str | None = None
    seconds: float = 0.0
    # What the turn really did, in one line from its calls and the domain's state (``agent.receipt``),
    # beside the reply so eval and export can compare the two; None: no line (read-only, or off).
    receipt: str | None = None

    @property
    def calls(self) -> list[CallRecord]:
        return [c for s in self.steps for c in s.calls]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop_reason"] = self.stop_reason.value
        for step in data["steps"]:
            for call in step["calls"]:
                call["status"] = CallStatus(call["status"]).value
        return data
