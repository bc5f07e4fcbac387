"""The approval gate: nothing destructive runs without an explicit yes for that exact call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ApprovalRequest:
    tool: str
    arguments: dict[str, Any]
    description: str  # the exact action in words ("Delete 'Dentist' on 2026-12-01 15:00-16:00")
    session_id: str | None = None


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
