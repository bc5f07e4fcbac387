""".ics export and import: round trips through real files, zones kept, what cannot be imported is reported."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
import pytest

from tools.calendar.ics import export_ics, ics_bytes, import_bytes, import_ics
from tools.calendar.store import CalendarStore

SEOUL = ZoneInfo("Asia/Seoul")


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=SEOUL)


@pytest.fixture
def source(store: CalendarStore) -> CalendarStore:
    """The shared store (tests/conftest.py) holding three events in three zones, one with every field."""
    s = store
    s.add_event("엄마 생신 저녁", at(5, 18), at(5, 20, 30), location="을지로 3가, 2층", notes="케이크 픽업\n꽃다발",
                attendees=["김민수", "Jane Doe"])
    ny = ZoneInfo("America/New_York")
    s.add_event("NY call", datetime(2026, 12, 1, 9, tzinfo=ny), datetime(2026, 12, 1, 10, tzinfo=ny), tz="America/New_York")
    s.add_event("UTC sync", datetime(2026, 12, 2, 1, tzinfo=timezone.utc), datetime(2026, 12, 2, 2, tzinfo=timezone.utc), tz="UTC")
    return s


def test_round_trip_keeps_titles_times_places_notes_and_attendees(source: CalendarStore, tmp_path: Path) -> None:
    path = tmp_path / "out" / "cal.ics"
    assert export_ics(source, path) == 3
    with CalendarStore(tmp_path / "target.sqlite3") as target:
        report = import_ics(target, path)
        assert (report.count, report.skipped) == (3, [])
        assert target.snapshot() == source.snapshot()
        assert sorted(e.tz for e in target.all_events()) == sorted(e.tz for e in source.all_events())


def test_export_writes_tzid_with_vtimezone_and_utc_as_z(source: CalendarStore, tmp_path: Path) -> None:
    path = tmp_path / "cal.ics"
    export_ics(source, path)
    text = path.read_text(encoding="utf-8")
    assert "DTSTART;TZID=Asia/Seoul:20261205T180000" in text
    assert "DTSTART;TZID=America/New_York:20261201T090000" in text
    assert "DTSTART:20261202T010000Z" in text
    assert "TZID:Asia/Seoul" in text and "BEGIN:VTIMEZONE" in text
    assert "SUMMARY:엄마 생신 저녁" in text


def test_export_range_only_includes_overlapping_events(source: CalendarStore, tmp_path: Path) -> None:
    path = tmp_path / "cal.ics"
    assert export_ics(source, path, start=at(5, 0), end=at(6, 0)) == 1
    [event] = icalendar.Calendar.from_ical(path.read_bytes()).walk("VEVENT")
    assert str(event["summary"]) == "엄마 생신 저녁"


def test_importing_the_same_file_twice_updates_by_uid_instead_of_duplicating(source: CalendarStore, tmp_path: Path) -> None:
    path = tmp_path / "cal.ics"
    export_ics(source, path)
    before = source.snapshot(with_ids=True)
    report = import_ics(source, path)
    assert (report.count, report.updated, report.skipped) == (0, 3, [])
    assert source.snapshot(with_ids=True) == before


def test_an_event_moved_in_another_app_comes_back_as_the_same_event(source: CalendarStore, tmp_path: Path) -> None:
    """Import matches by UID, not by title and time: the moved event replaces the old one."""
    path = tmp_path / "cal.ics"
    export_ics(source, path)
    calendar = icalendar.Calendar.from_ical(path.read_bytes())
    [dinner] = [v for v in calendar.walk("VEVENT") if str(v["summary"]) == "엄마 생신 저녁"]
    dinner["dtstart"].dt = at(6, 19)
    dinner["dtend"].dt = at(6, 21)
    path.write_bytes(calendar.to_ical())
    [kept] = [e for e in source.all_events() if e.title == "엄마 생신 저녁"]
    report = import_ics(source, path)
    assert (report.count, report.updated) == (0, 3)
    [moved] = [e for e in source.all_events() if e.title == "엄마 생신 저녁"]
    assert (moved.id, moved.uid, moved.start, moved.location) == (kept.id, kept.uid, at(6, 19), kept.location)


FOREIGN = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Google Inc//Google Calendar 70.9054//EN
BEGIN:VEVENT
UID:a@google.com
DTSTAMP:20261101T000000Z
DTSTART:20261203T050000Z
DURATION:PT45M
SUMMARY:Standup
ATTENDEE;CN=Jane Doe:mailto:jane@example.com
ATTENDEE:mailto:bob@example.com
END:VEVENT
BEGIN:VEVENT
UID:b@google.com
DTSTAMP:20261101T000000Z
DTSTART;VALUE=DATE:20261224
DTEND;VALUE=DATE:20261225
SUMMARY:Christmas Eve
END:VEVENT
BEGIN:VEVENT
UID:c@google.com
DTSTAMP:20261101T000000Z
DTSTART;TZID=Asia/Seoul:20261207T090000
DTEND;TZID=Asia/Seoul:20261207T100000
RRULE:FREQ=WEEKLY
SUMMARY:Weekly
END:VEVENT
BEGIN:VEVENT
UID:d@google.com
DTSTAMP:20261101T000000Z
DTSTART:20261208T140000
DTEND:20261208T150000
SUMMARY:Floating
END:VEVENT
BEGIN:VEVENT
UID:e@google.com
DTSTAMP:20261101T000000Z
DTSTART:20261209T140000Z
SUMMARY:No end
END:VEVENT
END:VCALENDAR
"""


def test_import_reads_foreign_files_and_an_event_without_an_end(tmp_path: Path) -> None:
    path = tmp_path / "google.ics"
    path.write_text(FOREIGN.replace("\n", "\r\n"), encoding="utf-8")
    with CalendarStore(tmp_path / "c.sqlite3") as store:
        report = import_ics(store, path)
        assert (report.count, report.skipped) == (5, [])
        standup, weekly, floating, no_end, christmas = store.all_events()
        assert (no_end.title, no_end.start) == ("No end", at(9, 23))  # no length (tests/test_calendar_ics_read.py)
        assert (christmas.title, christmas.all_day, christmas.start, christmas.end) == (
            "Christmas Eve", True, at(24, 0), at(25, 0))
        assert (weekly.recurrence, weekly.uid) == ("RRULE:FREQ=WEEKLY", "c@google.com")
        assert (standup.title, standup.start, standup.end) == ("Standup", at(3, 14), at(3, 14, 45))
        assert standup.attendees == ("bob@example.com", "Jane Doe")  # names sort ignoring case
        assert (floating.start, floating.tz) == (at(8, 14), "Asia/Seoul")  # zone-less time read as local


def test_failed_import_changes_nothing(source: CalendarStore, tmp_path: Path) -> None:
    path = tmp_path / "broken.ics"
    path.write_text("this is not a calendar", encoding="utf-8")
    before = source.snapshot()
    with pytest.raises(ValueError):
        import_ics(source, path)
    assert source.snapshot() == before


KEPT = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Apple Inc.//macOS 15//EN
BEGIN:VEVENT
UID:weekly-1@example.com
DTSTAMP:20261101T000000Z
DTSTART;TZID=Asia/Seoul:20261207T100000
DTEND;TZID=Asia/Seoul:20261207T110000
RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=6
EXDATE;TZID=Asia/Seoul:20261214T100000
SUMMARY:팀 회의
CATEGORIES:WORK,WEEKLY
ORGANIZER;CN=Jane:mailto:jane@example.com
X-APPLE-TRAVEL-ADVISORY-BEHAVIOR:AUTOMATIC
BEGIN:VALARM
ACTION:DISPLAY
DESCRIPTION:Reminder
TRIGGER:-PT15M
END:VALARM
END:VEVENT
END:VCALENDAR
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Google Inc//Google Calendar 70.9054//EN
BEGIN:VEVENT
UID:weekly-1@example.com
DTSTAMP:20261101T000000Z
RECURRENCE-ID;TZID=Asia/Seoul:20261221T100000
DTSTART;TZID=Asia/Seoul:20261222T150000
DTEND;TZID=Asia/Seoul:20261222T160000
SUMMARY:팀 회의 (moved)
END:VEVENT
BEGIN:VEVENT
UID:birthday@example.com
DTSTAMP:20261101T000000Z
DTSTART;VALUE=DATE:20261212
DTEND;VALUE=DATE:20261213
RRULE:FREQ=YEARLY
TRANSP:TRANSPARENT
SUMMARY:엄마 생신
END:VEVENT
END:VCALENDAR
"""


def test_a_series_with_its_exceptions_and_unknown_properties_survives_a_round_trip(tmp_path: Path) -> None:
    """Two VCALENDARs in one file, the exception before nothing and after its series' calendar,
    VALARM/CATEGORIES/ORGANIZER/X- kept; export then import into a fresh calendar gives the same
    occurrences and the same properties."""
    path = tmp_path / "apple.ics"
    path.write_text(KEPT.replace("\n", "\r\n"), encoding="utf-8")
    with CalendarStore(tmp_path / "a.sqlite3") as store:
        report = import_ics(store, path)
        assert (report.count, report.exceptions, report.skipped) == (2, 1, [])
        window = (at(1, 0), datetime(2027, 1, 31, tzinfo=SEOUL))
        first = [(e.title, e.start, e.transparent) for e in store.events_between(*window)]
        assert [(t, s.strftime("%m-%d %H:%M")) for t, s, _ in first] == [
            ("팀 회의", "12-07 10:00"), ("엄마 생신", "12-12 00:00"), ("팀 회의 (moved)", "12-22 15:00"),
            ("팀 회의", "12-28 10:00"), ("팀 회의", "01-04 10:00"), ("팀 회의", "01-11 10:00")]
        out = tmp_path / "out.ics"
        export_ics(store, out)
    text = out.read_text(encoding="utf-8")
    for kept in ("UID:weekly-1@example.com", "CATEGORIES:WORK,WEEKLY", "ORGANIZER;CN=Jane:mailto:jane@example.com",
                 "X-APPLE-TRAVEL-ADVISORY-BEHAVIOR:AUTOMATIC", "BEGIN:VALARM", "TRIGGER:-PT15M", "TRANSP:TRANSPARENT",
                 "RECURRENCE-ID;TZID=Asia/Seoul:20261221T100000", "DTSTART;VALUE=DATE:20261212"):
        assert kept in text, kept
    with CalendarStore(tmp_path / "b.sqlite3") as again:
        assert import_ics(again, out).count == 2
        assert [(e.title, e.start, e.transparent) for e in again.events_between(*window)] == first
        assert {e.uid for e in again.all_events()} == {"weekly-1@example.com", "birthday@example.com"}


def test_a_broken_vevent_is_named_and_the_rest_of_the_file_is_imported(tmp_path: Path) -> None:
    broken = FOREIGN.replace("DURATION:PT45M", "DURATION:soon")
    path = tmp_path / "broken.ics"
    path.write_text(broken.replace("\n", "\r\n"), encoding="utf-8")
    with CalendarStore(tmp_path / "c.sqlite3") as store:
        report = import_ics(store, path)
        assert report.count == 4
        assert any(line.startswith("'Standup'") and "DURATION" in line for line in report.skipped), report.skipped
        assert "Standup" not in {e.title for e in store.all_events()}


def calendar_of(*vevents: str) -> bytes:
    """A one-VCALENDAR file holding the given VEVENT bodies (content lines joined by newlines)."""
    body = "".join(f"BEGIN:VEVENT\n{v.strip()}\nEND:VEVENT\n" for v in vevents)
    return f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//EN\n{body}END:VCALENDAR\n".replace("\n", "\r\n").encode()


LUNCH = "DTSTART:20261203T030000Z\nDTEND:20261203T040000Z"


def test_a_property_given_twice_keeps_its_first_value_instead_of_a_python_repr() -> None:
    """icalendar turns a repeated property into a list; its str was the title "[vText(b'Lunch'), ...]"."""
    content = calendar_of(f"UID:a@x\nUID:b@x\nSUMMARY:Lunch\nSUMMARY:Dinner\nLOCATION:Here\nLOCATION:There\n"
                          f"DESCRIPTION:Notes\nDESCRIPTION:More\nTRANSP:TRANSPARENT\nTRANSP:OPAQUE\n{LUNCH}",
                          f"UID:c@x\nSTATUS:CANCELLED\nSTATUS:CONFIRMED\nSUMMARY:Gone\n{LUNCH}")
    with CalendarStore(":memory:") as store:
        report = import_bytes(store, content)
        assert report.count == 1 and report.skipped == ["'Gone' 20261203T030000Z: cancelled"]
        [lunch] = store.all_events()
        assert (lunch.uid, lunch.title, lunch.location, lunch.notes, lunch.transparent) == (
            "a@x", "Lunch", "Here", "Notes", True)


def test_a_vevent_that_gives_its_start_twice_is_skipped_with_that_reason() -> None:
    content = calendar_of(f"UID:a@x\nSUMMARY:Twice\nDTSTART:20261204T030000Z\n{LUNCH}", f"UID:b@x\nSUMMARY:Once\n{LUNCH}")
    with CalendarStore(":memory:") as store:
        report = import_bytes(store, content)
        assert report.count == 1 and report.skipped == ["'Twice' 20261204T030000Z: DTSTART appears 2 times"]


def test_a_vevent_nested_by_a_missing_end_is_imported_once_and_exported_once() -> None:
    """A file whose END:VEVENT slipped below the next VEVENT nests that one in the one before; both
    are events of their own, and the inner one is not also kept (and exported) inside the outer one."""
    content = calendar_of(f"UID:outer@x\nSUMMARY:Outer\n{LUNCH}\nBEGIN:VEVENT\nUID:inner@x\nSUMMARY:Inner\n{LUNCH}\n"
                          "END:VEVENT")
    with CalendarStore(":memory:") as store:
        assert import_bytes(store, content).count == 2
        exported, count = ics_bytes(store)
    assert count == 2 and exported.count(b"BEGIN:VEVENT") == 2
    with CalendarStore(":memory:") as again:
        report = import_bytes(again, exported)
        assert (report.count, report.skipped) == (2, [])
        assert sorted(e.title for e in again.all_events()) == ["Inner", "Outer"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("rule, reason", [
    ("FREQ=DAILY;INTERVAL=0", "INTERVAL=0"),  # dateutil never yields a second start: the import hung
    ("FREQ=WEEKLY;INTERVAL=-1", "INTERVAL=-1"),
    ("FREQ=WEEKLY;BYHOUR=9,10,11;BYMINUTE=0,30", "several occurrences a day"),
])
def test_an_rrule_that_cannot_run_is_skipped_with_its_reason_instead_of_hanging_the_import(rule: str, reason: str) -> None:
    later = "RECURRENCE-ID:20271203T030000Z\nDTSTART:20271203T050000Z\nDTEND:20271203T060000Z"
    content = calendar_of(f"UID:s@x\nSUMMARY:Series\nRRULE:{rule}\n{LUNCH}", f"UID:s@x\nSUMMARY:Moved\n{later}")
    with CalendarStore(":memory:") as store:
        report = import_bytes(store, content)
        assert report.count == 0 and store.all_events() == []
        series, moved = report.skipped
        assert series.startswith("'Series' 20261203T030000Z: recurrence not kept: ") and reason in series, series
        assert moved.endswith("an exception of a series that was not imported")


def test_a_text_property_with_a_value_type_keeps_its_text_instead_of_a_python_repr() -> None:
    """icalendar reads ``UID;VALUE=DURATION:123456`` as a time; its str was "vDDDTypes(12:34:56, ...)"."""
    content = calendar_of(f"UID;VALUE=DURATION:123456\nSUMMARY;VALUE=DATE:20240101\nLOCATION;VALUE=INTEGER:7\n"
                          f"ATTENDEE;VALUE=DATE-TIME:20240101T000000Z\n{LUNCH}")
    with CalendarStore(":memory:") as store:
        assert import_bytes(store, content).count == 1
        [event] = store.all_events()
        assert (event.uid, event.title, event.location, event.attendees) == ("123456", "20240101", "7", ("20240101T000000Z",))


def test_a_time_in_an_all_day_series_counts_as_its_day_so_the_export_reads_back_the_same() -> None:
    """RDATE;VALUE=PERIOD:…T000000Z/PT1H in an all-day series made an occurrence at 09:00 (Seoul) lasting
    an hour; exported as dates it became a zero-length day that the next import skipped."""
    content = calendar_of("UID:s@x\nSUMMARY:Holiday\nDTSTART;VALUE=DATE:20261207\nRRULE:FREQ=WEEKLY;COUNT=2\n"
                          "RDATE;VALUE=PERIOD:20261201T000000Z/PT1H\nEXDATE:20261214T050000Z")
    with CalendarStore(":memory:") as store:
        assert import_bytes(store, content).count == 1
        window = (at(1, 0), at(31, 0))
        first = [(e.start, e.end, e.all_day) for e in store.events_between(*window)]
        assert first == [(at(1, 0), at(2, 0), True), (at(7, 0), at(8, 0), True)]
        exported, _ = ics_bytes(store)
    with CalendarStore(":memory:") as again:
        report = import_bytes(again, exported)
        assert (report.count, report.skipped) == (1, [])
        assert [(e.start, e.end, e.all_day) for e in again.events_between(*window)] == first
