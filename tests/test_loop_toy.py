"""The agent loop on a toy registry built here, so the runtime's rules are pinned without the calendar.

A shopping list with two tools: ``add_item`` (refuses a duplicate with a stable code, crashes
on the name "explode") and the destructive ``clear_list``. The registry is made from the
runtime's public API only (``Tool``, ``Registry.of``, ``ToolResult``), the model is the
scripted backend, and each test checks what the list really holds afterwards, what the
approver was asked and what the model was sent back.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from agent.approval import ApprovalRequest, Decision
from agent.backends.scripted import ScriptedBackend
from agent.loop import Agent, Budgets
from agent.formats import format_tool_call
from agent.records import CallStatus, StopReason
from agent.tools import Registry, Tool, ToolResult


class AddArgs(BaseModel):
    name: str


class ClearArgs(BaseModel):
    pass


class ShoppingList:
    """The toy domain's state: what a turn really changed is read from ``items``."""

    def __init__(self, *items: str) -> None:
        self.items = list(items)
        self.runs: list[str] = []  # every tool run, in order: a call the gate stops never shows here

    def add(self, args: AddArgs) -> ToolResult:
        self.runs.append(f"add {args.name}")
        if args.name == "explode":
            raise RuntimeError("the toy tool broke")
        if args.name in self.items:
            return ToolResult.failure("duplicate", f"{args.name!r} is already on the list")
        self.items.append(args.name)
        return ToolResult.success({"items": list(self.items)}, "added")

    def clear(self, _args: ClearArgs) -> ToolResult:
        self.runs.append("clear")
        cleared = len(self.items)
        self.items.clear()
        return ToolResult.success({"cleared": cleared})

    def registry(self) -> Registry:
        return Registry.of([
            Tool("add_item", "Add an item to the shopping list.", AddArgs, self.add),
            Tool("clear_list", "Remove every item from the shopping list.", ClearArgs, self.clear, destructive=True,
                 describe=lambda _a: f"Clear the shopping list ({len(self.items)} items)"),
        ])


class Recording:
    """An approver that answers ``approve`` and keeps every question it was asked."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return Decision(self.approve, "test")


def add(name: str) -> str:
    return format_tool_call("add_item", {"name": name})


CLEAR = format_tool_call("clear_list", {})


def run(shopping: ShoppingList, outputs: list[str], approver: Recording | None = None, **budgets: int):
    """One turn of "please help" with the scripted ``outputs``; the turn, the backend and the approver."""
    backend = ScriptedBackend(outputs)
    approver = approver or Recording(False)
    agent = Agent(backend, shopping.registry(), Budgets(**budgets))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You keep a shopping list."},
                                      {"role": "user", "content": "please help"}]
    turn = agent.run_turn(messages, approver, session_id="toy")
    return turn, backend, approver


def tool_results(turn) -> list[dict[str, Any]]:
    """The tool messages the turn appended, as the JSON the model reads."""
    return [json.loads(m["content"]) for m in turn.new_messages if m["role"] == "tool"]


# ---- approval ---------------------------------------------------------------------------------


def test_a_destructive_call_asks_with_the_tools_own_words_and_a_no_changes_nothing() -> None:
    shopping = ShoppingList("milk", "eggs")
    turn, backend, approver = run(shopping, [CLEAR, "Fine, I left it."], Recording(False))
    assert [(r.tool, r.arguments, r.description, r.session_id) for r in approver.requests] == [
        ("clear_list", {}, "Clear the shopping list (2 items)", "toy")]
    assert shopping.items == ["milk", "eggs"] and shopping.runs == []
    assert [c.status for c in turn.calls] == [CallStatus.DENIED]
    [denied] = tool_results(turn)
    assert denied["ok"] is False and denied["error"] == "denied"
    assert backend.calls[1][-1]["content"] == turn.new_messages[1]["content"]  # the model read the refusal
    assert turn.stop_reason is StopReason.FINAL_REPLY and turn.reply == "Fine, I left it."


def test_a_yes_runs_the_destructive_call_once() -> None:
    shopping = ShoppingList("milk", "eggs")
    turn, _, approver = run(shopping, [CLEAR, "Cleared."], Recording(True))
    assert len(approver.requests) == 1
    assert shopping.items == [] and shopping.runs == ["clear"]
    assert tool_results(turn) == [{"ok": True, "data": {"cleared": 2}}]
    assert turn.calls[0].approval == {"approved": True, "reason": "test"}


def test_a_harmless_call_never_asks() -> None:
    shopping = ShoppingList()
    turn, _, approver = run(shopping, [add("milk"), "Added."], Recording(False))
    assert approver.requests == []
    assert shopping.items == ["milk"] and turn.calls[0].status is CallStatus.OK and turn.calls[0].approval is None


# ---- repeats and budgets ----------------------------------------------------------------------


def test_an_exact_repeat_is_not_run_again_and_a_second_repeat_ends_the_turn() -> None:
    shopping = ShoppingList()
    turn, backend, _ = run(shopping, [add("milk"), add("milk"), add("milk"), "never read"])
    assert shopping.runs == ["add milk"]  # the repeats were answered from the first result
    assert [c.status for c in turn.calls] == [CallStatus.OK, CallStatus.REPEATED, CallStatus.REPEATED]
    repeat = tool_results(turn)[1]
    assert repeat["ok"] is True and repeat["data"] == {"items": ["milk"]} and "already made this exact call" in repeat["message"]
    assert turn.stop_reason is StopReason.NO_PROGRESS and len(backend.calls) == 3


def test_the_tool_call_budget_skips_the_rest_and_ends_the_turn() -> None:
    shopping = ShoppingList()
    reply = "\n".join(add(name) for name in ("milk", "eggs", "tea"))
    turn, backend, _ = run(shopping, [reply, "never read"], max_tool_calls=2)
    assert shopping.items == ["milk", "eggs"]
    assert [c.status for c in turn.calls] == [CallStatus.OK, CallStatus.OK, CallStatus.SKIPPED]
    assert tool_results(turn)[2]["error"] == "skipped"  # every call gets a result, even the one not run
    assert turn.stop_reason is StopReason.TOOL_CALL_BUDGET and len(backend.calls) == 1


def test_the_step_budget_ends_a_turn_that_keeps_calling() -> None:
    shopping = ShoppingList()
    turn, backend, _ = run(shopping, [add("milk"), add("eggs"), add("tea")], max_steps=2)
    assert turn.stop_reason is StopReason.STEP_BUDGET
    assert len(backend.calls) == 2 and shopping.items == ["milk", "eggs"]


# ---- what the model cannot break --------------------------------------------------------------


def test_an_unreadable_call_is_explained_and_a_second_one_in_a_row_ends_the_turn() -> None:
    shopping = ShoppingList()
    turn, backend, _ = run(shopping, ["<tool_call>just words</tool_call>", "<tool_call>{not json</tool_call>", "never"])
    assert shopping.runs == [] and turn.calls == []
    explained = [m for m in turn.new_messages if m["role"] == "tool"]
    assert [m["name"] for m in explained] == ["invalid_call", "invalid_call"]
    assert json.loads(explained[0]["content"])["error"] == "invalid_call"
    assert backend.calls[1][-1] == explained[0]  # the model was shown why before its second try
    assert turn.stop_reason is StopReason.REPEATED_FAILURE and len(backend.calls) == 2


def test_an_unreadable_call_then_a_good_one_goes_on() -> None:
    shopping = ShoppingList()
    turn, _, _ = run(shopping, ["<tool_call>just words</tool_call>", add("milk"), "Added milk."])
    assert shopping.items == ["milk"] and turn.stop_reason is StopReason.FINAL_REPLY


def test_arguments_that_do_not_validate_are_never_run() -> None:
    shopping = ShoppingList()
    turn, _, _ = run(shopping, [format_tool_call("add_item", {"item": "milk"}), "Sorry."])
    assert shopping.runs == [] and turn.calls[0].status is CallStatus.INVALID
    invalid = tool_results(turn)[0]
    assert invalid["error"] == "invalid_arguments" and "name" in invalid["message"]


# ---- tool failures are results ----------------------------------------------------------------


def test_a_tool_failure_goes_back_with_its_code_and_skips_the_rest_of_the_reply() -> None:
    shopping = ShoppingList("milk")
    turn, backend, _ = run(shopping, [add("milk") + "\n" + add("eggs"), "Milk was already there."])
    assert shopping.runs == ["add milk"] and shopping.items == ["milk"]  # eggs never ran
    assert [c.status for c in turn.calls] == [CallStatus.FAILED, CallStatus.SKIPPED]
    failed, skipped = tool_results(turn)
    assert failed == {"ok": False, "error": "duplicate", "message": "'milk' is already on the list"}
    assert skipped["error"] == "skipped"
    assert turn.stop_reason is StopReason.FINAL_REPLY and len(backend.calls) == 2  # the turn went on


def test_a_crashing_tool_is_a_failure_result_not_an_exception() -> None:
    shopping = ShoppingList()
    turn, _, _ = run(shopping, [add("explode"), add("milk"), "Done."])
    assert [c.status for c in turn.calls] == [CallStatus.FAILED, CallStatus.OK]
    crashed = tool_results(turn)[0]
    assert crashed["error"] == "tool_crashed" and "the toy tool broke" in crashed["message"]
    assert shopping.items == ["milk"] and turn.stop_reason is StopReason.FINAL_REPLY


def test_the_same_failing_call_twice_ends_the_turn() -> None:
    shopping = ShoppingList("milk")
    turn, backend, _ = run(shopping, [add("milk"), add("milk"), "never read"])
    assert [c.status for c in turn.calls] == [CallStatus.FAILED, CallStatus.FAILED]
    assert turn.stop_reason is StopReason.REPEATED_FAILURE and len(backend.calls) == 2
