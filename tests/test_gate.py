"""The one call gate (agent.gate) on the real calendar tools: every caller gets the same rules."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from agent.approval import ApprovalRequest, Decision
from agent.gate import TurnLedger, run_call
from agent.formats import ToolCall
from agent.records import CallStatus, StopReason
from tools.calendar import CalendarStore, build_registry
from tools.calendar.lab.grpo_env import CalendarGRPOEnv
from tools.calendar.lab.scenarios import build_scenario

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=SEOUL)


class Recording:
    def __init__(self, approve: bool) -> None:
        self.approve, self.requests = approve, []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return Decision(self.approve, "test")


@pytest.fixture
def registry(store: CalendarStore):
    store.add_event("Dentist", datetime(2026, 12, 1, 15, tzinfo=SEOUL), datetime(2026, 12, 1, 16, tzinfo=SEOUL))
    return build_registry(store, now=lambda: NOW)


def test_the_approval_sees_the_validated_arguments_not_the_raw_ones(registry) -> None:
    approver = Recording(True)
    record = run_call(ToolCall("update_event", {"event_id": "1", "start_time": "16:00"}), registry, approver, TurnLedger())
    assert record.status is CallStatus.OK
    assert approver.requests[0].arguments["event_id"] == 1  # coerced by the argument model


def test_a_search_after_a_change_runs_again_instead_of_repeating_the_stale_result(registry) -> None:
    search = ToolCall("search_events", {"date": "2026-12-01"})
    create = ToolCall("create_event", {"title": "Lunch", "date": "2026-12-01", "start_time": "12:00",
                                       "duration_minutes": 60})
    ledger = TurnLedger()
    before = run_call(search, registry, Recording(True), ledger)
    assert run_call(create, registry, Recording(True), ledger).status is CallStatus.OK
    after = run_call(search, registry, Recording(True), ledger)
    assert after.status is CallStatus.OK  # ran again: the create changed what it returns
    assert "Lunch" in after.result and "Lunch" not in before.result
    # nothing changed since: an exact repeat is still answered from the ledger
    assert run_call(search, registry, Recording(True), ledger).status is CallStatus.REPEATED


def test_repeats_failures_and_the_budget_each_name_their_stop_reason(registry) -> None:
    search = ToolCall("search_events", {"date": "2026-12-01"})
    ledger = TurnLedger(max_tool_calls=3)
    assert run_call(search, registry, Recording(True), ledger).status is CallStatus.OK and ledger.stop is None
    assert run_call(search, registry, Recording(True), ledger).status is CallStatus.REPEATED and ledger.stop is None
    assert run_call(search, registry, Recording(True), ledger).status is CallStatus.REPEATED
    assert ledger.stop is StopReason.NO_PROGRESS

    ledger = TurnLedger()
    bad = ToolCall("delete_event", {"event_id": 99})
    assert run_call(bad, registry, Recording(True), ledger).status is CallStatus.FAILED
    skipped = run_call(search, registry, Recording(True), ledger)  # same reply, after a failure
    assert skipped.status is CallStatus.SKIPPED and json.loads(skipped.result)["error"] == "skipped"
    ledger.new_reply()
    assert run_call(bad, registry, Recording(True), ledger).status is CallStatus.FAILED
    assert ledger.stop is StopReason.REPEATED_FAILURE

    ledger = TurnLedger(max_tool_calls=1)
    run_call(search, registry, Recording(True), ledger)
    over = run_call(ToolCall("search_events", {"date": "2026-12-02"}), registry, Recording(True), ledger)
    assert over.status is CallStatus.SKIPPED and ledger.stop is StopReason.TOOL_CALL_BUDGET


def test_the_grpo_environment_applies_the_runtime_rules() -> None:
    scenario = build_scenario("delete_after_approval", 0)
    row = {"scenario_id": scenario.id, "template": scenario.template, "index": 0, "seed": 0}
    environment = CalendarGRPOEnv()
    environment.reset(**row)
    environment.search_events(date=scenario.task["target"]["date"])
    repeat = environment.search_events(date=scenario.task["target"]["date"])
    assert "already made this exact call" in json.loads(repeat)["message"]
    environment.search_events(date=scenario.task["target"]["date"])  # the second repeat ends the turn
    after = json.loads(environment.search_events(query="x"))
    assert after["error"] == "skipped"
    environment._finish("Done.")
    assert environment._turn.stop_reason is StopReason.NO_PROGRESS
