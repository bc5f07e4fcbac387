"""The agent loop with a scripted model against the real calendar tools on a real SQLite file."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from zoneinfo import ZoneInfo

from agent.approval import ApprovalRequest, ApproveAll, Decision, DenyAll
from agent.backends.base import Completion
from agent.backends.scripted import ScriptedBackend
from agent.loop import Agent, Budgets
from agent.formats import format_tool_call
from agent.records import CallStatus, StopReason
from tools.calendar import CalendarStore, build_registry

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=SEOUL)


def add_dentist(store: CalendarStore) -> int:
    event = store.add_event("Dentist", datetime(2026, 12, 1, 15, tzinfo=SEOUL), datetime(2026, 12, 1, 16, tzinfo=SEOUL))
    return event.id


def conversation(text: str) -> list[dict]:
    return [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": text}]


def agent_for(store: CalendarStore, outputs, **budgets) -> Agent:
    return Agent(ScriptedBackend(outputs), build_registry(store, now=lambda: NOW), Budgets(**budgets))


CREATE = format_tool_call(
    "create_event", {"title": "치과", "date": "2026-12-02", "start_time": "15:00", "duration_minutes": 60}
)


class RecordingApprover:
    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return Decision(self.approve, "test")


def test_plain_answer_ends_the_turn_with_a_final_reply(store):
    messages = conversation("hello")
    turn = agent_for(store, ["Hello! How can I help with your calendar?"]).run_turn(messages, DenyAll())
    assert turn.stop_reason is StopReason.ASKED_USER
    assert turn.reply == "Hello! How can I help with your calendar?"
    assert messages[-1] == {"role": "assistant", "content": "Hello! How can I help with your calendar?"}


def test_statement_without_question_is_a_final_reply(store):
    turn = agent_for(store, ["Done."]).run_turn(conversation("thanks"), DenyAll())
    assert turn.stop_reason is StopReason.FINAL_REPLY


def test_create_call_is_executed_and_its_result_goes_back_to_the_model(store):
    backend = ScriptedBackend([CREATE, "Booked the dentist for Wed 15:00."])
    agent = Agent(backend, build_registry(store, now=lambda: NOW))
    messages = conversation("내일 모레 오후 3시에 치과 예약 잡아줘")
    turn = agent.run_turn(messages, DenyAll())

    assert turn.stop_reason is StopReason.FINAL_REPLY
    assert [c.status for c in turn.calls] == [CallStatus.OK]
    assert [e.title for e in store.all_events()] == ["치과"]
    assistant, tool = messages[2], messages[3]
    assert assistant["content"] == CREATE  # the exact text, for byte-identical re-rendering
    assert assistant["tool_calls"][0]["function"]["name"] == "create_event"
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert json.loads(tool["content"])["ok"] is True
    # the second model step saw the tool result
    assert backend.calls[1][-1]["role"] == "tool"


def test_delete_without_approval_changes_nothing(store):
    event_id = add_dentist(store)
    delete = format_tool_call("delete_event", {"event_id": event_id})
    turn = agent_for(store, [delete, "I did not delete it."]).run_turn(conversation("delete the dentist"), DenyAll())
    assert turn.calls[0].status is CallStatus.DENIED
    assert "did not approve" in turn.calls[0].result
    assert store.get_event(event_id) is not None


def test_approver_sees_the_exact_action_and_approval_executes_it(store):
    event_id = add_dentist(store)
    approver = RecordingApprover(approve=True)
    delete = format_tool_call("delete_event", {"event_id": event_id})
    turn = agent_for(store, [delete, "Deleted."]).run_turn(conversation("delete it"), approver)
    assert turn.calls[0].status is CallStatus.OK
    assert store.get_event(event_id) is None
    (request,) = approver.requests
    # the validated arguments, defaults filled in: what will run, not only what the model wrote
    assert request.tool == "delete_event" and request.arguments == {"event_id": event_id, "scope": "this"}
    assert "Dentist" in request.description and "15:00" in request.description
    assert turn.calls[0].approval == {"approved": True, "reason": "test"}


def test_non_destructive_calls_never_ask(store):
    approver = RecordingApprover(approve=False)
    search = format_tool_call("search_events", {"date": "2026-12-01"})
    agent_for(store, [search, "Nothing."]).run_turn(conversation("what's on?"), approver)
    assert approver.requests == []


def test_after_a_failed_call_the_rest_of_the_reply_is_skipped(store):
    bad = format_tool_call("create_event", {"title": "x", "date": "tomorrow", "start_time": "15:00", "duration_minutes": 30})
    reply = bad + "\n" + CREATE
    turn = agent_for(store, [reply, "Sorry."]).run_turn(conversation("book"), DenyAll())
    assert [c.status for c in turn.calls] == [CallStatus.INVALID, CallStatus.SKIPPED]
    assert store.all_events() == []
    assert "earlier call" in turn.calls[1].result


def test_invalid_arguments_name_the_problem_and_are_not_executed(store):
    bad = format_tool_call("create_event", {"date": "2026-12-02", "start_time": "15:00", "duration_minutes": 30})
    turn = agent_for(store, [bad, "Which title?"]).run_turn(conversation("book"), DenyAll())
    call = turn.calls[0]
    assert call.status is CallStatus.INVALID
    assert "title" in call.result and "invalid_arguments" in call.result
    assert store.all_events() == []


def test_unknown_tool_is_reported_with_the_available_tools(store):
    turn = agent_for(store, [format_tool_call("send_email", {"to": "x"}), "ok."]).run_turn(conversation("mail"), DenyAll())
    assert turn.calls[0].status is CallStatus.INVALID
    assert "unknown_tool" in turn.calls[0].result and "search_events" in turn.calls[0].result


def test_the_same_failing_call_twice_stops_the_turn(store):
    bad = format_tool_call("delete_event", {"event_id": 999})
    turn = agent_for(store, [bad, bad, "never reached"]).run_turn(conversation("delete 999"), ApproveAll())
    assert turn.stop_reason is StopReason.REPEATED_FAILURE
    assert len(turn.steps) == 2


def test_a_repeated_successful_call_gets_a_reminder_then_stops(store):
    search = format_tool_call("search_events", {"date": "2026-12-01"})
    turn = agent_for(store, [search, search, search, "x"]).run_turn(conversation("what's on?"), DenyAll())
    statuses = [c.status for c in turn.calls]
    assert statuses == [CallStatus.OK, CallStatus.REPEATED, CallStatus.REPEATED]
    assert "already made this exact call" in turn.calls[1].result
    assert turn.stop_reason is StopReason.NO_PROGRESS


def test_step_budget_stops_the_turn(store):
    outputs = [format_tool_call("search_events", {"date": f"2026-12-0{i}"}) for i in range(1, 9)]
    turn = agent_for(store, outputs, max_steps=3).run_turn(conversation("look"), DenyAll())
    assert turn.stop_reason is StopReason.STEP_BUDGET
    assert len(turn.steps) == 3


def test_tool_call_budget_stops_the_turn_and_every_call_gets_a_result(store):
    calls = "\n".join(format_tool_call("search_events", {"date": f"2026-12-0{i}"}) for i in range(1, 5))
    messages = conversation("look")
    turn = agent_for(store, [calls], max_tool_calls=2).run_turn(messages, DenyAll())
    assert turn.stop_reason is StopReason.TOOL_CALL_BUDGET
    assert [c.status for c in turn.calls] == [CallStatus.OK, CallStatus.OK, CallStatus.SKIPPED, CallStatus.SKIPPED]
    assert sum(1 for m in messages if m["role"] == "tool") == 4


def test_a_failing_backend_is_a_model_error_not_a_crash(store):
    turn = agent_for(store, []).run_turn(conversation("hi"), DenyAll())
    assert turn.stop_reason is StopReason.MODEL_ERROR
    assert "exhausted" in (turn.error or "")


def test_context_limit_is_its_own_stop_reason(store):
    class Full:
        name = "full"

        def complete(self, messages, tools, **kw):
            return Completion(text="", finish_reason="context_limit", error="prompt of 9000 tokens exceeds 8192")

        def identity(self):
            return {}

    turn = Agent(Full(), build_registry(store)).run_turn(conversation("hi"), DenyAll())
    assert turn.stop_reason is StopReason.CONTEXT_LIMIT


def test_cancel_interrupts_before_the_next_step(store):
    cancel = threading.Event()

    def script(messages):
        cancel.set()  # the user hits /cancel while the model is working
        return format_tool_call("search_events", {"date": "2026-12-01"})

    turn = agent_for(store, script).run_turn(conversation("look"), DenyAll(), cancel=cancel)
    assert turn.stop_reason is StopReason.INTERRUPTED
    assert [c.status for c in turn.calls] == [CallStatus.SKIPPED]


def test_an_unreadable_call_is_explained_to_the_model(store):
    turn = agent_for(store, ["<tool_call>{not json at all</tool_call>", "Sorry, done."]).run_turn(conversation("x"), DenyAll())
    assert turn.stop_reason is StopReason.FINAL_REPLY
    assert len(turn.steps) == 2 and turn.steps[0].problems


def test_an_empty_reply_is_no_progress(store):
    turn = agent_for(store, ["   "]).run_turn(conversation("x"), DenyAll())
    assert turn.stop_reason is StopReason.NO_PROGRESS


def test_reasoning_is_kept_apart_from_the_reply(store):
    turn = agent_for(store, ["<think>The user greets me.</think>Hi there."]).run_turn(conversation("hi"), DenyAll())
    assert turn.reply == "Hi there."
    assert turn.steps[0].reasoning == "The user greets me."


def test_turn_serialises_to_json(store):
    turn = agent_for(store, [CREATE, "ok."]).run_turn(conversation("book"), DenyAll())
    data = json.loads(json.dumps(turn.to_dict()))
    assert data["stop_reason"] == "final_reply"
    assert data["steps"][0]["calls"][0]["status"] == "ok"
