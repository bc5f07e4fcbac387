"""The trajectory of one eval episode, as the verifier sees it: user messages, agent turns, calls.

Kept apart from the runner so a verifier can be tested on hand-made trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.eval.types import Scenario
from agent.formats.chat_format import DEFAULT_FORMAT, ChatFormat, format_named
from agent.loop import QUESTION_ENDINGS
from agent.records import CallStatus, StopReason, Turn

# A cut-off reply (max_tokens) still hands the turn back to the user, as it did when it was
# recorded as final_reply; the verifier judges its content.
HANDED_BACK = (StopReason.FINAL_REPLY, StopReason.ASKED_USER, StopReason.CUT_OFF)


def asked_question(turn: Turn) -> bool:
    """A turn asked the user something: it stopped as ASKED_USER, or its reply is a question."""
    return turn.stop_reason is StopReason.ASKED_USER or (
        turn.stop_reason in HANDED_BACK and turn.reply.rstrip().endswith(QUESTION_ENDINGS))


@dataclass(frozen=True)
class TracedCall:
    """One tool call, placed in the dialogue: how many user messages had been delivered."""

    user_messages: int
    turn_index: int
    step_index: int
    name: str
    arguments: Any
    status: CallStatus
    result: str
    destructive: bool
    approved: bool | None  # the gate's answer for destructive calls, else None
    raw_output: str  # the model output that contained the call


@dataclass
class Exchange:
    """One user message and the agent's turn in answer to it."""

    user_text: str
    turn: Turn
    script_line: int | None = None  # which line of ``scenario.user_script`` this message was, if any


@dataclass
class EpisodeTrace:
    scenario: Scenario
    exchanges: list[Exchange]
    initial: dict[str, Any]  # store snapshot before the first message
    final: dict[str, Any]  # store snapshot after the last turn
    tool_names: tuple[str, ...]
    error: str | None = None  # the runner itself failed (not the model)
    messages: list[dict[str, Any]] = field(default_factory=list)
    # the format the agent was served with (the backend's); a hand-made trace is in the default one
    chat_format: ChatFormat = field(default_factory=lambda: format_named(DEFAULT_FORMAT))

    def calls(self) -> list[TracedCall]:
        out: list[TracedCall] = []
        for number, exchange in enumerate(self.exchanges, start=1):
            for step in exchange.turn.steps:
                for call in step.calls:
                    approved = None if call.approval is None else bool(call.approval.get("approved"))
                    out.append(
                        TracedCall(
                            user_messages=number,
                            turn_index=number - 1,
                            step_index=step.index,
                            name=call.name,
                            arguments=call.arguments,
                            status=CallStatus(call.status),
                            result=call.result,
                            destructive=call.destructive,
                            approved=approved,
                            raw_output=step.raw_output,
                        )
                    )
        return out

    def unreadable_blocks(self) -> int:
        """Steps whose ``<tool_call>`` could not be read at all: invalid calls with no name."""
        return sum(
            1
            for exchange in self.exchanges
            for step in exchange.turn.steps
            if not step.calls and step.problems and self.chat_format.call_open in step.raw_output
        )

    def final_reply(self) -> str:
        return self.exchanges[-1].turn.reply if self.exchanges else ""

    def asked(self, turn_index: int) -> bool:
        """Did agent turn ``turn_index`` end by asking the user a question?"""
        return asked_question(self.exchanges[turn_index].turn)

    def ended_by_handing_back(self) -> bool:
        return bool(self.exchanges) and self.exchanges[-1].turn.stop_reason in HANDED_BACK
