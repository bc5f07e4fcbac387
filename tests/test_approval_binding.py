"""An approval executes what was shown: a target changed between the question and the answer is
never changed blind.

What an attacker (or an unlucky sync) does: while the question waits, a second connection to the
same SQLite file -- as the CalDAV sync, another chat or another device would -- changes the
event the question named, in a field the question shows or in one it does not. The answer then
arrives as "yes". The call must not run: the model and the person get ``target_changed``, and the
stored event is the changed one. The real calendar store and tools, the one gate, and the REPL
on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.app import build_runtime
from agent.approval import ApprovalRequest, Decision
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.formats import ToolCall, format_tool_call
from agent.gate import TurnLedger, run_call
from agent.records import CallStatus
from agent.repl import CONVERSATION, LiveView, TerminalApprover
from agent.tools import TARGET_CHANGED, Registry
from tests.bot_harness import RECEIPT_DAY, receipt_script
from tests.caldav_servers import DavServer, dav_server  # noqa: F401 (fixture)
from tests.test_calendar_sync_frontends import caldav_env
from tests.test_repl import Terminal
from tools.calendar import CalendarStore, build_registry

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=SEOUL)
START = datetime(2026, 12, 1, 15, tzinfo=SEOUL)


def other_connection_runs(path: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    """A write by a second connection to the same file, committed: what a sync does."""
    with closing(sqlite3.connect(path, timeout=5)) as other:
        other.execute(sql, params)
        other.commit()


class ChangedWhileAsking:
    """The person says yes -- but while the question was open, ``sql`` ran on another connection."""

    def __init__(self, path: Path, sql: str | None, params: tuple[Any, ...] = ()) -> None:
        self.path, self.sql, self.params = path, sql, params
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        if self.sql is not None:
            other_connection_runs(self.path, self.sql, self.params)
        return Decision(True, "user")


def stored(path: Path, event_id: int = 1) -> dict[str, Any] | None:
    with closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM events WHERE id = ?", (event_id,)).fetchone()
        return None if row is None else dict(row)


@pytest.fixture
def registry(store: CalendarStore) -> Registry:
    store.add_event("Dentist", START, START + timedelta(hours=1), notes="bring the x-rays", location="Seoul",
                    attendees=["Minsu"], remind_minutes_before=[10])
    store.ensure_person("Jiyoung")  # known, not invited: another client may add her
    return build_registry(store, now=lambda: NOW)


DELETE = ToolCall("delete_event", {"event_id": 1})
MOVE = ToolCall("update_event", {"event_id": 1, "start_time": "17:00"})

# What another client changes while the question is open: shown in the question or not.
CHANGES = {
    "title": ("UPDATE events SET title = 'Board meeting' WHERE id = 1", ()),
    "notes (not in the question)": ("UPDATE events SET notes = 'wire 5,000,000 won' WHERE id = 1", ()),
    "location (not in the question)": ("UPDATE events SET location = 'Busan' WHERE id = 1", ()),
    "time": ("UPDATE events SET start_utc = '2026-12-01T07:00:00Z', end_utc = '2026-12-01T08:00:00Z' WHERE id = 1", ()),
    "attendees": ("INSERT INTO event_attendees (event_id, person_id) SELECT 1, id FROM people WHERE name = 'Jiyoung'", ()),
    "reminders": ("INSERT INTO reminders (event_id, minutes_before) VALUES (1, 1440)", ()),
}


@pytest.mark.parametrize("call", [DELETE, MOVE], ids=["delete", "update"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_by_another_connection_while_the_question_waits_voids_the_yes(
        registry: Registry, store: CalendarStore, call: ToolCall, change: str) -> None:
    sql, params = CHANGES[change]
    approver = ChangedWhileAsking(store.path, sql, params)
    record = run_call(call, registry, approver, TurnLedger())
    assert len(approver.requests) == 1  # it was asked, and answered yes
    assert record.status is CallStatus.FAILED
    body = json.loads(record.result)
    assert body["error"] == TARGET_CHANGED and "Nothing was changed" in body["message"]
    after = stored(store.path)
    assert after is not None  # not deleted
    if change == "title":
        assert after["title"] == "Board meeting"
    assert after["start_utc"] != "2026-12-01T08:00:00Z"  # not moved to 17:00 either


def test_the_same_yes_without_a_change_runs(registry: Registry, store: CalendarStore) -> None:
    record = run_call(DELETE, registry, ChangedWhileAsking(store.path, None), TurnLedger())
    assert record.status is CallStatus.OK and stored(store.path) is None


def test_an_event_deleted_elsewhere_while_asked_is_not_recreated_by_the_update(
        registry: Registry, store: CalendarStore) -> None:
    approver = ChangedWhileAsking(store.path, "DELETE FROM events WHERE id = 1")
    record = run_call(MOVE, registry, approver, TurnLedger())
    assert json.loads(record.result)["error"] == TARGET_CHANGED
    assert stored(store.path) is None and store.all_events() == []


def test_the_question_carries_the_target_as_shown_and_notices_a_later_change(
        registry: Registry, store: CalendarStore) -> None:
    class Looking:
        seen: list[bool] = []

        def decide(self, request: ApprovalRequest) -> Decision:
            assert request.fingerprint is not None and request.still_current is not None
            self.seen.append(request.still_current())
            other_connection_runs(store.path, "UPDATE events SET notes = 'changed' WHERE id = 1")
            self.seen.append(request.still_current())
            return Decision(False, "user")

    looking = Looking()
    run_call(DELETE, registry, looking, TurnLedger())
    assert looking.seen == [True, False]


def test_no_other_writer_can_come_between_the_recheck_and_the_write(registry: Registry, store: CalendarStore) -> None:
    """Right after the fingerprint is read again, a second connection tries to retitle the event:
    it is locked out until the delete has committed. Were the re-check outside the write's
    transaction, the retitle would land and the delete would remove an event nobody was shown."""
    tool = registry.get("delete_event")
    assert tool is not None and tool.fingerprint is not None
    reads: list[str] = []

    def fingerprint_then_intrude(args: Any) -> str:
        value = tool.fingerprint(args)  # type: ignore[misc]
        reads.append("read")
        if len(reads) == 2:  # the re-check before the write (the first read is the question's)
            try:
                with closing(sqlite3.connect(store.path, timeout=0)) as other:
                    other.execute("UPDATE events SET title = 'Board meeting' WHERE id = 1")
                    other.commit()
                reads.append("intruder wrote")
            except sqlite3.OperationalError as exc:
                reads.append(f"intruder: {exc}")
        return value

    guarded = Registry.of([replace(tool, fingerprint=fingerprint_then_intrude)])
    record = run_call(DELETE, guarded, ChangedWhileAsking(store.path, None), TurnLedger())
    assert reads == ["read", "read", "intruder: database is locked"]
    assert record.status is CallStatus.OK and stored(store.path) is None


# -- a series: the approval covers the occurrences the scope reaches --------------------------


@pytest.fixture
def weekly(store: CalendarStore) -> Registry:
    store.add_event("Standup", START, START + timedelta(minutes=30), recurrence="RRULE:FREQ=WEEKLY;COUNT=5")
    return build_registry(store, now=lambda: NOW)


class OverriddenWhileAsking:
    """Says yes; while asked, another client retitled the occurrence that starts at ``original``
    (a RECURRENCE-ID from a phone, pulled by a sync), through its own connection to the file."""

    def __init__(self, path: Path, original: datetime) -> None:
        self.path, self.original = path, original

    def decide(self, request: ApprovalRequest) -> Decision:
        with CalendarStore(self.path) as other:
            assert other.override_occurrence(1, self.original, title="Standup (on Zoom)") is not None
        return Decision(True, "user")


DELETE_DEC_8 = ToolCall("delete_event", {"event_id": 1, "occurrence_date": "2026-12-08", "scope": "this"})


def test_an_override_of_another_occurrence_leaves_the_yes_for_this_one_standing(
        weekly: Registry, store: CalendarStore) -> None:
    record = run_call(DELETE_DEC_8, weekly, OverriddenWhileAsking(store.path, START + timedelta(weeks=2)), TurnLedger())
    assert record.status is CallStatus.OK, record.result
    assert store.occurrence_count(1) == 4


def test_an_override_of_the_occurrence_asked_about_voids_the_yes(weekly: Registry, store: CalendarStore) -> None:
    record = run_call(DELETE_DEC_8, weekly, OverriddenWhileAsking(store.path, START + timedelta(weeks=1)), TurnLedger())
    assert json.loads(record.result)["error"] == TARGET_CHANGED
    assert store.occurrence_count(1) == 5
    assert store.occurrence_on(1, START.date() + timedelta(weeks=1)).title == "Standup (on Zoom)"  # type: ignore[union-attr]


# -- the REPL ---------------------------------------------------------------------------------


def test_in_the_repl_a_yes_for_a_changed_event_shows_target_changed_and_changes_nothing(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": str(tmp_path / "data")}, environ={})
    runtime = build_runtime(settings, ScriptedBackend([
        format_tool_call("create_event", {"title": "Dentist", "date": RECEIPT_DAY, "start_time": "15:00",
                                          "end_time": "16:00"}), "Booked.",
        format_tool_call("delete_event", {"event_id": 1}), "Deleted it.",
    ]))
    calendar = settings.data_dir / "calendar.sqlite3"
    out = io.StringIO()

    def answer(question: str) -> str:
        out.write(question)
        other_connection_runs(calendar, "UPDATE events SET title = 'Board meeting' WHERE id = 1")
        return "y"

    try:
        runtime.handle(CONVERSATION, "book the dentist", TerminalApprover(ask=answer, out=out))
        live = LiveView(out)
        live.begin_turn()
        turn = runtime.handle(CONVERSATION, "delete it", TerminalApprover(ask=answer, out=out), observe=live.message)
        live.end_turn(turn)
    finally:
        runtime.close()
    screen = out.getvalue()
    assert "⚠ Delete #1 'Dentist'" in screen
    assert "✗ delete_event" in screen and f"→ {TARGET_CHANGED}" in screen
    assert "📅 nothing changed (delete 'Board meeting' not done: it changed after you were asked)" in screen
    assert (stored(calendar) or {}).get("title") == "Board meeting"


def test_on_a_real_terminal_a_yes_after_another_client_changed_the_event_is_refused(tmp_path: Path) -> None:
    """``python -m tests.repl_scripted`` on a pty: the question is on screen, another client
    retitles the event in the calendar file, the person types y."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(receipt_script(), ensure_ascii=False), encoding="utf-8")
    term = Terminal(tmp_path, ["-m", "tests.repl_scripted", str(script)])
    calendar = tmp_path / "data" / "calendar.sqlite3"
    try:
        term.wait_for("you> ")
        term.type(b"book the dentist\r")
        term.wait_for("you> ", count=2)
        term.type(b"drop it\r")
        term.wait_for("Approve? [y/N] ")
        other_connection_runs(calendar, "UPDATE events SET title = 'Board meeting' WHERE id = 1")
        term.type(b"y\r")
        term.wait_for("you> ", count=3)
        term.type(b"\x04")
        assert term.exit_code() == 0
        screen = term.seen.decode(errors="replace")
    finally:
        term.close()
    assert f"→ {TARGET_CHANGED}" in screen and "Nothing was changed" in screen
    assert "📅 nothing changed (delete 'Board meeting' not done: it changed after you were asked)" in screen
    assert "📅 deleted" not in screen and "Traceback" not in screen
    assert (stored(calendar) or {}).get("title") == "Board meeting"


def test_a_phone_edit_pulled_by_the_background_sync_while_the_question_is_open_voids_the_yes(
        dav_server: DavServer, tmp_path: Path) -> None:
    """The real CalDAV sync (Radicale, Xandikos): while the REPL's question is open, the phone
    adds a note to the event on the server and the sync thread pulls it into the store; the
    person then says yes to deleting what they were shown."""
    env = caldav_env(tmp_path, dav_server)
    settings = load_settings({"data_dir": env["AGENT_DATA_DIR"], "caldav_refresh_wait_s": 60}, environ=env)
    runtime = build_runtime(settings, ScriptedBackend([
        format_tool_call("create_event", {"title": "Dentist", "date": RECEIPT_DAY, "start_time": "15:00",
                                          "end_time": "16:00"}), "Booked.",
        format_tool_call("delete_event", {"event_id": 1}), "Deleted it.",
    ]))
    pulled: list[str] = []

    def phone_edits_then_yes(question: str) -> str:
        [obj] = dav_server.phone().events()
        obj.icalendar_component.add("description", "moved to the new clinic, 3rd floor")
        obj.save(increase_seqno=False)
        pulled.append(runtime.domain.commands["sync"](""))  # the REPL's sync thread does the pull
        return "y"

    try:
        runtime.handle(CONVERSATION, "book the dentist", TerminalApprover(ask=lambda q: "n"))
        turn = runtime.handle(CONVERSATION, "delete it", TerminalApprover(ask=phone_edits_then_yes))
    finally:
        runtime.close()
    assert pulled and pulled[0].startswith("pulled 1"), pulled
    assert [json.loads(c.result)["error"] for c in turn.calls] == [TARGET_CHANGED]
    assert turn.receipt is not None and "not done: it changed after you were asked" in turn.receipt
    [kept] = dav_server.phone().events()
    assert str(kept.icalendar_component["description"]) == "moved to the new clinic, 3rd floor"
    assert (stored(settings.data_dir / "calendar.sqlite3") or {}).get("notes") == "moved to the new clinic, 3rd floor"
