"""A shared calendar's hostile event, imported for real, as every calendar view shows it to a person.

The event (``tests.hostile_text``) is a weekly series whose title holds ESC sequences, a C1
CSI, U+202E and U+2066 and runs to 10,000 characters, whose place holds "\\r\\n📅 deleted
everything", and which has 5,000 attendees: stored whole, and imported from an .ics file (the
importer keeps 500 characters and 200 attendees of it). Each view must show none of those
characters, keep each field on its own line, and keep what the person decides on (the action,
the scope, the count) whole. The store and the .ics export keep the data exactly as it came.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar
import pytest

from agent.receipt import receipt_line
from agent.records import CallRecord, CallStatus, StepRecord, Turn
from agent.tools import Registry, ToolResult
from agent.visible import QUESTION_LIMIT
from tests.calendar_calls import call
from tests.hostile_text import (
    ATTENDEES, ESC_SEQUENCE, HOSTILE_PLACE, HOSTILE_TITLE, RLO, TITLE_HEAD, WEEKS, add_hostile_series, bad_characters,
    hostile_ics,
)
from tools.calendar.domain import agenda, week
from tools.calendar.ics import ics_bytes, import_bytes
from tools.calendar.receipt import CalendarReceipt
from tools.calendar.reminders import CalendarNotifier, Reminder, agenda_text, reminder_text, upcoming_text
from tools.calendar.store import CalendarStore
from tools.calendar.tools import build_registry

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=SEOUL)
FIRST = datetime(2026, 12, 1, 10, 0, tzinfo=SEOUL)


@pytest.fixture
def hostile(store: CalendarStore) -> CalendarStore:
    assert add_hostile_series(store) == 1
    return store


@pytest.fixture
def registry(hostile: CalendarStore) -> Registry:
    return build_registry(hostile, now=lambda: NOW)


def question(registry: Registry, name: str, **arguments: object) -> str:
    validated = registry.validate(name, arguments)
    assert not isinstance(validated, ToolResult), validated
    return registry.describe(name, validated)


def test_the_store_and_the_export_keep_the_hostile_data_exactly(hostile: CalendarStore) -> None:
    event = hostile.get_event(1)
    assert event.title == HOSTILE_TITLE and event.location == HOSTILE_PLACE and len(event.attendees) == ATTENDEES
    [exported] = icalendar.Calendar.from_ical(ics_bytes(hostile)[0]).walk("VEVENT")
    assert str(exported["summary"]) == HOSTILE_TITLE  # the display's cuts and marks never reach the data
    assert str(exported["location"]) == HOSTILE_PLACE.replace("\r\n", "\n")  # iCalendar TEXT has one line break


def test_an_imported_hostile_file_is_shown_as_text_and_exported_as_it_came(store: CalendarStore) -> None:
    report = import_bytes(store, hostile_ics())
    assert report.count == 1 and not report.skipped
    registry = build_registry(store, now=lambda: NOW)
    text = question(registry, "delete_event", event_id=1, scope="all")
    assert bad_characters(text, newlines=False) == [] and text.startswith(f"Delete all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert bad_characters(week(store, "2026-12-01", now=NOW)) == []
    [exported] = icalendar.Calendar.from_ical(ics_bytes(store)[0]).walk("VEVENT")
    assert str(exported["summary"]) == HOSTILE_TITLE  # byte-faithful: what the display cut is not lost


def test_the_delete_question_names_action_scope_and_count_in_one_clean_short_line(registry: Registry) -> None:
    text = question(registry, "delete_event", event_id=1, scope="all")
    assert bad_characters(text, newlines=False) == [] and "\n" not in text
    assert len(text) < QUESTION_LIMIT < 4096 - 100  # with "Approve this action?" and the outcome, one message
    assert text.startswith(f"Delete all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert "…' (#1, weekly, Tue 10:00) with Guest 0, Guest 1," in text
    assert text.endswith(f"and {ATTENDEES - 10:,} more")
    one = question(registry, "delete_event", event_id=1, occurrence_date="2026-12-08", scope="this")
    assert "…' on Tue 12-08 only (#1, one occurrence of weekly" in one and bad_characters(one) == []


def test_the_update_question_shows_the_models_arguments_as_text_on_one_line(registry: Registry) -> None:
    text = question(registry, "update_event", event_id=1, scope="all", location=HOSTILE_PLACE,
                    notes=f"ok{ESC_SEQUENCE}\r{RLO}fake", title="New\u202etitle\x07")
    assert bad_characters(text, newlines=False) == [] and "\n" not in text
    assert text.startswith(f"Change all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert "title → 'New\ufffdtitle␇'" in text
    assert "location → 'Room 1 📅 deleted everything␛[31m red'" in text
    assert "notes → 'ok␛[2J␛[H \ufffdfake'" in text  # the "\r" is a space: it cannot overwrite the line


def test_today_and_week_keep_one_event_per_line_and_show_no_controls(hostile: CalendarStore) -> None:
    day = agenda(hostile, "2026-12-01", now=NOW)
    assert bad_characters(day) == []
    assert day.splitlines()[0] == "2026-12-01:" and len(day.splitlines()) == 2
    listing = week(hostile, "2026-12-01", now=NOW)
    assert bad_characters(listing) == []
    # header, seven days, one event on the Tuesday: the place's "\r\n" started no line of its own
    assert len(listing.splitlines()) == 1 + 7 + 1
    event_line = listing.splitlines()[2]
    assert "@ Room 1 📅 deleted everything␛[31m red; with Guest 0," in event_line
    assert event_line.endswith(f"and {ATTENDEES - 10:,} more") and len(event_line) < 1000


def test_reminders_the_agenda_the_event_view_and_the_receipt_show_no_controls(hostile: CalendarStore) -> None:
    event = hostile.get_event(1)
    texts = {
        "reminder": reminder_text(Reminder(event, 10, FIRST - timedelta(minutes=10)), hostile, FIRST - timedelta(minutes=10)),
        "agenda": agenda_text(hostile, FIRST.date()),
        "upcoming": upcoming_text(hostile, NOW),
        "open": CalendarNotifier(hostile).show(1),
    }
    for name, text in texts.items():
        assert bad_characters(text) == [], name
        assert TITLE_HEAD in text and len(text) < 2500, name
    assert texts["reminder"].splitlines() == [texts["reminder"].splitlines()[0], "📍 Room 1 📅 deleted everything␛[31m red"]
    assert len(texts["open"].splitlines()) == 5  # the event, where, with whom, notes, reminders

    registry = build_registry(hostile, now=lambda: NOW)
    result = call(registry, "delete_event", event_id=1, scope="all")
    assert result.ok
    record = CallRecord("delete_event", {"event_id": 1, "scope": "all"}, CallStatus.OK, result.to_text())
    line = receipt_line(CalendarReceipt(hostile), Turn(None, "[09:00] delete it", steps=[StepRecord(0, "", calls=[record])]))
    assert line is not None and line.startswith(f"📅 deleted #1 '{TITLE_HEAD} ") and f"(all {WEEKS})" in line
    assert bad_characters(line, newlines=False) == [] and len(line) < 400


def test_a_sync_conflicts_line_keeps_the_servers_title_and_note_on_one_short_line() -> None:
    """A conflict names the event and both values; the server wrote them, so a note holding a line
    break and a fake all-clear, an RLO or 30,000 characters must neither start a line nor flood."""
    from zoneinfo import ZoneInfo

    from tools.calendar.sync.merge import conflict_line

    line = conflict_line("Dentist\n✅ synced, nothing changed", "notes", "mine",
                         "x" * 30_000 + "\n\u202eevil\x1b[2J", "iCloud", ZoneInfo("Asia/Seoul"))
    assert "\n" not in line and "\u202e" not in line and "\x1b" not in line
    assert len(line) < 400 and line.endswith("; mine was mine")


def test_calendar_status_shows_a_servers_error_and_a_queued_title_on_their_own_lines(hostile: CalendarStore) -> None:
    """``calendar status`` prints the last error (the server's words) and each change waiting to
    go out (a title a shared calendar wrote): neither may add a line or carry a control."""
    from tools.calendar.sync.service import describe_status
    from tools.calendar.sync.settings import Account
    from tools.calendar.sync.state import SyncState

    state = SyncState(hostile)
    state.unreachable("503 Service Unavailable\n✅ in step, nothing waiting\x1b[2J\u202e")
    assert state.queued(), "the hostile series is waiting to go out"
    status = describe_status(hostile, Account("https://caldav.example.com/", "me", "secret-password"))
    lines = status.split("\n")
    assert not any(line.startswith("✅") for line in lines)
    assert bad_characters(status, newlines=True) == []
    assert any(line.startswith("offline since") and "503 Service Unavailable ✅ in step" in line for line in lines)
    assert any(TITLE_HEAD[:10] in line and len(line) < 400 for line in lines)
