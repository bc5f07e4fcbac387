"""The reading rules of ``tools/calendar/ics_read.py``, one at a time: a VEVENT other calendar apps
show is kept, read as they read it, and comes back the same through export and import."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
import pytest

from tests.test_calendar_ics import calendar_of
from tools.calendar.domain import import_file
from tools.calendar.ics import ImportReport, ics_bytes, import_bytes
from tools.calendar.ics_read import MARK, STAND_IN
from tools.calendar.store import CalendarStore, Event

SEOUL = ZoneInfo("Asia/Seoul")
UTC = timezone.utc


def imported(*vevents: str) -> tuple[ImportReport, list[Event], bytes]:
    """The report, the stored events and the export of a file holding the given VEVENT bodies."""
    with CalendarStore(":memory:") as store:
        report = import_bytes(store, calendar_of(*vevents))
        return report, store.all_events(), ics_bytes(store)[0]


def exported_vevents(content: bytes) -> list[icalendar.Event]:
    return list(icalendar.Calendar.from_ical(content).walk("VEVENT"))


def round_trips(content: bytes) -> list[tuple[str, datetime, datetime, bool]]:
    """What the export reads back as in a fresh calendar (nothing skipped)."""
    with CalendarStore(":memory:") as again:
        report = import_bytes(again, content)
        assert report.skipped == []
        return [(e.title, e.start, e.end, e.all_day) for e in again.all_events()]


def test_a_time_without_an_end_takes_no_time_and_goes_out_without_dtend() -> None:
    """RFC 5545 §3.6.1: a DTSTART time alone ends when it starts. The store keeps STAND_IN (it
    refuses no length); the export writes no DTEND, so the length read back is none again."""
    report, [event], content = imported("UID:a@x\nSUMMARY:Call Jane\nDTSTART:20261209T050000Z")
    assert (report.count, report.skipped, report.notes) == (1, [], [])
    assert (event.start, event.end - event.start, event.all_day) == (datetime(2026, 12, 9, 5, tzinfo=UTC), STAND_IN, False)
    [vevent] = exported_vevents(content)
    assert "DTEND" not in vevent and MARK not in vevent and "DURATION" not in vevent
    assert round_trips(content) == [("Call Jane", event.start, event.start + STAND_IN, False)]


def test_a_date_without_an_end_and_a_date_end_equal_to_its_start_are_that_one_day() -> None:
    report, events, content = imported(
        "UID:a@x\nSUMMARY:Alone\nDTSTART;VALUE=DATE:20261224",
        "UID:b@x\nSUMMARY:Same day\nDTSTART;VALUE=DATE:20261225\nDTEND;VALUE=DATE:20261225")
    assert (report.count, report.skipped, report.notes) == (2, [], [])
    assert [(e.title, e.start, e.end, e.all_day) for e in events] == [
        ("Alone", datetime(2026, 12, 24, tzinfo=SEOUL), datetime(2026, 12, 25, tzinfo=SEOUL), True),
        ("Same day", datetime(2026, 12, 25, tzinfo=SEOUL), datetime(2026, 12, 26, tzinfo=SEOUL), True)]
    assert round_trips(content) == [(e.title, e.start, e.end, e.all_day) for e in events]


def test_an_end_before_the_start_takes_no_time_at_its_start_and_is_named_in_the_report() -> None:
    report, [timed, dated], content = imported(
        "UID:a@x\nSUMMARY:Swapped\nDTSTART:20261218T144500Z\nDTEND:20261218T143000Z",
        "UID:b@x\nSUMMARY:Backwards\nDTSTART;VALUE=DATE:20261230\nDTEND;VALUE=DATE:20261228")
    assert report.count == 2 and report.skipped == []
    assert report.notes == ["'Swapped' 20261218T144500Z: ends before it starts: read as taking no time, at its start",
                            "'Backwards' 20261230: ends before it starts: read as its first day"]
    assert (timed.start, timed.end - timed.start) == (datetime(2026, 12, 18, 14, 45, tzinfo=UTC), STAND_IN)
    assert (dated.start, dated.end, dated.all_day) == (datetime(2026, 12, 30, tzinfo=SEOUL), datetime(2026, 12, 31, tzinfo=SEOUL), True)
    assert round_trips(content) == [(e.title, e.start, e.end, e.all_day) for e in (timed, dated)]


def test_the_import_command_names_an_event_kept_by_a_rule_its_file_broke(tmp_path: Path) -> None:
    path = tmp_path / "swapped.ics"
    path.write_bytes(calendar_of("UID:a@x\nSUMMARY:Swapped\nDTSTART:20261218T144500Z\nDTEND:20261218T143000Z"))
    with CalendarStore(":memory:") as store:
        first, *named = import_file(store, str(path)).splitlines()
    assert first.startswith("imported 1 event from ")
    assert named == ["  kept 'Swapped' 20261218T144500Z: ends before it starts: read as taking no time, at its start"]


def test_a_negative_duration_reads_as_an_end_before_the_start() -> None:
    report, [event], _ = imported("UID:a@x\nSUMMARY:Back\nDTSTART:20261218T144500Z\nDURATION:-PT1H")
    assert (event.end - event.start, len(report.notes)) == (STAND_IN, 1)


def test_copies_of_one_uid_are_read_by_sequence_then_dtstamp_whatever_their_order() -> None:
    copies = ["UID:u@x\nSUMMARY:First\nSEQUENCE:1\nDTSTAMP:20261130T000000Z\nDTSTART:20261203T030000Z\nDTEND:20261203T040000Z",
              "UID:u@x\nSUMMARY:Edited\nSEQUENCE:2\nDTSTAMP:20261101T000000Z\nDTSTART:20261204T030000Z\nDTEND:20261204T040000Z",
              "UID:u@x\nSUMMARY:Edited again\nSEQUENCE:2\nDTSTAMP:20261102T000000Z\nDTSTART:20261205T030000Z\nDTEND:20261205T040000Z"]
    for order in (copies, copies[::-1], [copies[1], copies[2], copies[0]]):
        report, [event], _ = imported(*order)
        assert (event.title, event.start) == ("Edited again", datetime(2026, 12, 5, 3, tzinfo=UTC))
        assert sorted(line.split(":")[0] for line in report.skipped) == ["'Edited' 20261204T030000Z", "'First' 20261203T030000Z"]
        assert all("an older copy of UID u@x" in line for line in report.skipped)


def test_copies_that_tie_keep_the_first_in_the_file() -> None:
    """recurring-ical-events keeps the first of copies with the same SEQUENCE (no DTSTAMP here)."""
    _, [event], _ = imported("UID:u@x\nSUMMARY:One\nDTSTART:20261203T030000Z\nDTEND:20261203T040000Z",
                             "UID:u@x\nSUMMARY:Two\nDTSTART:20261204T030000Z\nDTEND:20261204T040000Z")
    assert event.title == "One"


def test_copies_of_one_moved_occurrence_are_read_by_sequence_not_by_their_place_in_the_file() -> None:
    """Applied in file order, the older copy written last won."""
    series = "UID:s@x\nSUMMARY:Weekly\nDTSTART:20261201T050000Z\nDTEND:20261201T060000Z\nRRULE:FREQ=WEEKLY;COUNT=3"
    moved = "UID:s@x\nRECURRENCE-ID:20261208T050000Z\nSUMMARY:{}\nSEQUENCE:{}\nDTSTART:20261208T{:02d}0000Z\nDTEND:20261208T{:02d}0000Z"
    report, _, content = imported(series, moved.format("Newer", 3, 7, 8), moved.format("Older", 1, 9, 10))
    assert (report.exceptions, len(report.skipped)) == (1, 1) and report.skipped[0].startswith("'Older'")
    titles = {str(v["summary"]): v.decoded("dtstart").hour for v in exported_vevents(content)}
    assert titles == {"Weekly": 5, "Newer": 7}


def test_a_date_beside_a_time_is_its_midnight_in_that_times_zone_and_named() -> None:
    report, [event], content = imported("UID:a@x\nSUMMARY:Leave\nDTSTART;VALUE=DATE:20230724\nDTEND:20230817T000000Z")
    assert (event.start, event.end, event.all_day) == (datetime(2023, 7, 24, tzinfo=UTC), datetime(2023, 8, 17, tzinfo=UTC), False)
    assert report.notes == ["'Leave' 20230724: DTSTART and DTEND mix a date and a time: read as times, the date as its midnight"]
    assert round_trips(content) == [("Leave", event.start, event.end, False)]


def test_a_floating_start_beside_an_end_with_a_zone_is_in_that_zone() -> None:
    _, [event], _ = imported("UID:a@x\nSUMMARY:Mixed\nDTSTART:20000101T000000\nDTEND:20000103T020000Z")
    assert event.start == datetime(2000, 1, 1, tzinfo=UTC)


def test_an_empty_rrule_states_no_repetition() -> None:
    """A holiday calendar writes ``RRULE:`` on every event; it was "recurrence not kept: FREQ=?"."""
    report, [event], _ = imported("UID:a@x\nSUMMARY:New Year\nDTSTART:20190101\nDTEND:20190101\nRRULE:")
    assert (report.skipped, event.recurrence, event.all_day) == ([], None, True)


def test_a_vevent_without_a_uid_keeps_the_end_its_rdate_period_gives() -> None:
    """The loose path never applied RDATE;VALUE=PERIOD ends (issue_722_missing_timezones.ics:
    10:00-13:00Z where the file says 10:00-12:00Z)."""
    body = ("SUMMARY:Workshop\nDTSTART:20261201T100000Z\nDTEND:20261201T110000Z\n"
            "RDATE;VALUE=PERIOD:20261203T100000Z/20261203T120000Z")
    for vevent in (body, f"UID:w@x\n{body}"):
        with CalendarStore(":memory:") as store:
            import_bytes(store, calendar_of(vevent))
            window = (datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 31, tzinfo=UTC))
            assert [(e.start.hour, e.end.hour) for e in store.events_between(*window)] == [(10, 11), (10, 12)], vevent


def test_an_exception_without_a_start_of_a_series_without_length_keeps_none() -> None:
    report, [series], content = imported(
        "UID:s@x\nSUMMARY:Ping\nDTSTART:20261201T050000Z\nRRULE:FREQ=DAILY;COUNT=3",
        "UID:s@x\nSUMMARY:Ping (renamed)\nRECURRENCE-ID:20261202T050000Z")
    assert (report.exceptions, series.end - series.start) == (1, STAND_IN)
    assert [("DTEND" in v, MARK in v) for v in exported_vevents(content)] == [(False, False), (False, False)]


def test_an_event_without_length_given_one_later_exports_that_length() -> None:
    with CalendarStore(":memory:") as store:
        import_bytes(store, calendar_of("UID:a@x\nSUMMARY:Call\nDTSTART:20261209T050000Z"))
        [event] = store.all_events()
        store.update_event(event.id, end=event.start + timedelta(hours=1))
        [vevent] = exported_vevents(ics_bytes(store)[0])
    assert vevent.decoded("dtend") == datetime(2026, 12, 9, 6, tzinfo=UTC) and MARK not in vevent


# -- attacks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("length", ["PT1S", "PT1H"])
def test_a_file_cannot_forge_the_no_length_mark(length: str) -> None:
    """A file that carries our mark itself does not lose its DTEND: the mark is ours alone."""
    report, [event], content = imported(f"UID:a@x\nSUMMARY:Forged\n{MARK}:PT0S\nDTSTART:20261209T050000Z\nDURATION:{length}")
    assert MARK not in (event.ics_extra or "")
    [vevent] = exported_vevents(content)
    assert vevent.decoded("dtend") - vevent.decoded("dtstart") == icalendar.vDuration.from_ical(length)


def test_hostile_sequence_and_dtstamp_values_choose_one_copy_without_a_traceback() -> None:
    """SEQUENCE as text, negative, 400 digits, or twice; DTSTAMP as garbage or year 1: the copy
    with the largest readable SEQUENCE wins, the others are named, nothing raises."""
    when = "DTSTART:20261203T030000Z\nDTEND:20261203T040000Z"
    copies = [f"UID:u@x\nSUMMARY:Text\nSEQUENCE:abc\n{when}",
              f"UID:u@x\nSUMMARY:Negative\nSEQUENCE:-99999999999999999999\n{when}",
              f"UID:u@x\nSUMMARY:Huge\nSEQUENCE:{'9' * 400}\nDTSTAMP:garbage\n{when}",
              f"UID:u@x\nSUMMARY:Twice\nSEQUENCE:5\nSEQUENCE:7\nDTSTAMP:00010101T000000\n{when}"]
    report, [event], _ = imported(*copies)
    assert event.title == "Huge"
    assert len(report.skipped) == 3 and all("\n" not in line for line in report.skipped)


def test_one_files_custom_zone_does_not_decide_how_another_file_is_read() -> None:
    """icalendar keeps a parsed VTIMEZONE process-wide under its TZID: a file defining
    ``TZID:Office`` at +14:00 made a later file's ``TZID=Office`` 09:00 read as 04:00 in Seoul."""
    zone = ("BEGIN:VTIMEZONE\r\nTZID:Office\r\nBEGIN:STANDARD\r\nDTSTART:19700101T000000\r\n"
            "TZOFFSETFROM:+1400\r\nTZOFFSETTO:+1400\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n").encode()
    poison = calendar_of("UID:p@x\nSUMMARY:Bait\nDTSTART:20261201T000000Z\nDTEND:20261201T010000Z").replace(
        b"BEGIN:VEVENT", zone + b"BEGIN:VEVENT", 1)
    victim = calendar_of("UID:v@x\nSUMMARY:Standup\nDTSTART;TZID=Office:20261207T090000\nDTEND;TZID=Office:20261207T100000")
    starts = []
    for content in (victim, poison, victim):
        with CalendarStore(":memory:") as store:
            import_bytes(store, content)
            starts.append({e.title: e.start for e in store.all_events()})
    assert starts[2]["Standup"] == starts[0]["Standup"] == datetime(2026, 12, 7, 9, tzinfo=SEOUL)


def test_a_servers_objects_are_parsed_under_the_imports_zone_cache_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync's own reads of a server object (the UID cut, the attendee merge) parse it too, and
    icalendar caches its VTIMEZONEs process-wide (first TZID wins): parsed anywhere but through
    ``ics_read.parsed`` (its lock, its fresh cache), a shared calendar's ``TZID:Office`` at +14:00
    could land in the cache an import running at that moment in another thread reads from."""
    from tools.calendar import ics_read
    from tools.calendar.sync import identity, objects

    seen: list[str] = []
    real = ics_read.parsed
    monkeypatch.setattr(ics_read, "parsed", lambda content: seen.append(str(content)[:40]) or real(content))
    text = calendar_of("UID:a@x\nSUMMARY:A\nDTSTART:20261201T000000Z\nATTENDEE;CN=Kim:mailto:k@x").decode()
    identity.vet(text, "a.ics", "a@x")
    objects._attendee_lines(text)
    assert len(seen) == 2
