"""The tool contract's approval hooks, domain-free: ``asks_when`` and ``fingerprint``.

A domain's hook can be buggy; a bug must never let a call run unasked or unchecked. A plain
in-memory "shopping list" stands in for any domain.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from pydantic import BaseModel

from agent.approval import ApprovalRequest, Decision
from agent.formats import ToolCall
from agent.gate import TurnLedger, run_call
from agent.records import CallStatus
from agent.tools import TARGET_CHANGED, Registry, Tool, ToolResult


class Item(BaseModel):
    name: str


class Asked:
    def __init__(self, yes: bool) -> None:
        self.yes, self.shown = yes, []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.shown.append(request.description)
        return Decision(self.yes, "user")


def shopping(asks_when: Any = None, fingerprint: Any = None, atomic: Any = None) -> tuple[Registry, list[str]]:
    items: list[str] = []

    def add(args: Item) -> ToolResult:
        items.append(args.name)
        return ToolResult.success({"items": list(items)})

    def remove(args: Item) -> ToolResult:
        items.remove(args.name)
        return ToolResult.success({"items": list(items)})

    return Registry.of([
        Tool("add", "Add an item.", Item, add, mutates=True, asks_when=asks_when),
        Tool("remove", "Remove an item.", Item, remove, destructive=True, fingerprint=fingerprint, atomic=atomic),
    ]), items


def test_asks_when_sees_what_ran_in_this_turn_and_its_words_are_the_question() -> None:
    seen: list[dict[str, int]] = []

    def more_than_two(args: Item, ran: Mapping[str, int]) -> str | None:
        seen.append(dict(ran))
        return f"Add a 3rd item: {args.name}" if ran.get("add", 0) >= 2 else None

    registry, items = shopping(asks_when=more_than_two)
    person, ledger = Asked(yes=False), TurnLedger()
    statuses = [run_call(ToolCall("add", {"name": n}), registry, person, ledger).status for n in ("milk", "eggs", "jam")]
    assert statuses == [CallStatus.OK, CallStatus.OK, CallStatus.DENIED]
    assert seen == [{}, {"add": 1}, {"add": 2}] and person.shown == ["Add a 3rd item: jam"] and items == ["milk", "eggs"]


def test_a_failing_asks_when_asks_instead_of_running_unasked() -> None:
    def broken(args: Item, ran: Mapping[str, int]) -> str | None:
        raise KeyError("bug")

    registry, items = shopping(asks_when=broken)
    person = Asked(yes=False)
    record = run_call(ToolCall("add", {"name": "milk"}), registry, person, TurnLedger())
    assert record.status is CallStatus.DENIED and items == [] and person.shown == ['add({"name": "milk"})']


def test_a_fingerprint_that_fails_at_the_recheck_runs_nothing() -> None:
    reads: list[int] = []

    def flaky(args: Item) -> str:
        reads.append(1)
        if len(reads) > 1:
            raise OSError("disk gone")
        return "v1"

    registry, items = shopping(fingerprint=flaky)
    items.append("milk")
    record = run_call(ToolCall("remove", {"name": "milk"}), registry, Asked(yes=True), TurnLedger())
    assert record.status is CallStatus.FAILED and json.loads(record.result)["error"] == "tool_crashed"
    assert items == ["milk"]


def test_the_recheck_and_the_run_share_the_domains_atomic_context() -> None:
    log: list[str] = []
    version = {"v": "1"}

    @contextmanager
    def atomic() -> Iterator[None]:
        log.append("begin")
        yield
        log.append("commit")

    def fingerprint(args: Item) -> str:
        log.append("check")
        return version["v"]

    registry, items = shopping(fingerprint=fingerprint, atomic=atomic)
    items.append("milk")
    assert run_call(ToolCall("remove", {"name": "milk"}), registry, Asked(yes=True), TurnLedger()).status is CallStatus.OK
    assert log == ["check", "begin", "check", "commit"] and items == []

    class ChangesIt(Asked):
        def decide(self, request: ApprovalRequest) -> Decision:
            version["v"] = "2"
            return super().decide(request)

    items.append("milk")
    record = run_call(ToolCall("remove", {"name": "milk"}), registry, ChangesIt(yes=True), TurnLedger())
    assert json.loads(record.result)["error"] == TARGET_CHANGED and items == ["milk"]
