"""The approval gate: nothing destructive runs without an explicit yes for that exact call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from agent.tools import TARGET_CHANGED

# A Decision's reason when the approver saw, after the answer, that the target is no longer what
# was shown: the gate then answers the call with the ``TARGET_CHANGED`` result, not "denied".
STALE = TARGET_CHANGED


@dataclass(frozen=True)
class ApprovalRequest:
    tool: str
    arguments: dict[str, Any]
    description: str  # the exact action in words ("Delete 'Dentist' on 2026-12-01 15:00-16:00")
    session_id: str | None = None
    # The target as it was when the question was put (``Registry.fingerprint``); None: unbound.
    fingerprint: str | None = None
    # Is the target still what was shown? An approver that waits (chat buttons) asks this
    # after the answer so that it can tell the person at once; the binding check that counts is
    # the one the gate makes in the same transaction as the write. None: cannot tell.
    still_current: Callable[[], bool] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Decision:
    approved: bool
    reason: str = ""  # "user", "timeout", "non-interactive", "scenario", ...


class Approver(Protocol):
    def decide(self, request: ApprovalRequest) -> Decision: ...


class DenyAll:
    """The non-interactive default: no human, no destruction."""

    def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(False, "non-interactive: no one to ask")


class ApproveAll:
    """Only for explicit ``--yes`` runs and tests."""

    def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(True, "pre-approved (--yes)")
