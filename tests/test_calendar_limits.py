"""Attacks on size and on time: what a hostile .ics or CalDAV server can make the calendar take
in, the model read, and ``dateutil`` walk (``tools.calendar.limits``).

Times are never asserted against the clock: an attack is timed against an ordinary import of the
same size in the same run, and the ratio is bounded generously (the machine is shared).
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable
from zoneinfo import ZoneInfo

import icalendar
import pytest

from tests.calendar_calls import call
from tools.calendar import capped_fields
from tools.calendar import recurrence as rec
from tools.calendar.ics import ics_bytes, import_bytes
from tools.calendar.limits import (IMPORT_ATTENDEES, IMPORT_DATES, IMPORT_NOTES, RESULT_CHARS, VIEW_ATTENDEES,
                                   VIEW_NOTES)
from tools.calendar.result_views import NEVER_MATCHES
from tools.calendar.store import CalendarStore
from tools.calendar.sync.objects import object_bytes
from tools.calendar.tools import build_registry

SEOUL = ZoneInfo("Asia/Seoul")
NEVER = "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30"  # passes every BY check, matches no day: dateutil walks to 9999
MEGABYTE_NOTES = "회의록 " + "x" * (1 << 20)
RATIO = 20  # an attack may cost at most this many ordinary imports of the same size


def calendar(*vevents: list[str]) -> bytes:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//attacker//EN"]
    for body in vevents:
        lines += ["BEGIN:VEVENT", *body, "END:VEVENT"]
    return "\r\n".join([*lines, "END:VCALENDAR"]).encode()


def vevent(uid: str, title: str, start: str = "20261207T010000Z", end: str = "20261207T020000Z", *more: str) -> list[str]:
    return [f"UID:{uid}", "DTSTAMP:20261201T000000Z", f"SUMMARY:{title}", f"DTSTART:{start}", f"DTEND:{end}", *more]


def rules(rule: str, count: int = 30) -> bytes:
    """``count`` series with ``rule``, each starting at another minute (so no two expand alike)."""
    return calendar(*(vevent(f"r{i}@attacker", f"rule {i}", f"20261207T01{i:02d}00Z", f"20261207T02{i:02d}00Z",
                             f"RRULE:{rule}") for i in range(count)))


def flood() -> bytes:
    """One event with a 1 MB DESCRIPTION and 5,000 ATTENDEEs."""
    attendees = [f"ATTENDEE;CN=Guest {i:04d}:mailto:guest{i}@example.com" for i in range(5000)]
    return calendar(vevent("flood@attacker", "Flood", "20261207T010000Z", "20261207T020000Z",
                           f"DESCRIPTION:{MEGABYTE_NOTES}", *attendees))


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def exported_vevent(store: CalendarStore, uid: str) -> icalendar.Event:
    content, _ = ics_bytes(store)
    return next(v for v in icalendar.Calendar.from_ical(content).walk("VEVENT") if str(v["UID"]) == uid)


# -- one event floods the model --------------------------------------------------------------------


def test_a_megabyte_of_notes_and_5000_attendees_reach_the_model_cut_and_said(store: CalendarStore) -> None:
    import_bytes(store, flood())
    result = call(build_registry(store), "search_events", date="2026-12-07")
    text = result.to_text()
    assert result.ok and len(text) < 3_000  # it was 1,069,071 characters before the caps
    (view,) = json.loads(text)["data"]["events"]
    assert len(view["notes"]) == VIEW_NOTES + 1 and view["notes"].startswith("회의록 ")
    assert len(view["attendees"]) == VIEW_ATTENDEES
    assert f"notes cut at {VIEW_NOTES} of {len(MEGABYTE_NOTES):,} characters" in view["cut"]
    assert f"the first {VIEW_ATTENDEES} of 5,000 shown" in view["cut"]


def test_reading_a_flooded_event_parses_its_marks_not_its_kept_megabyte(
        store: CalendarStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The originals stay in the event's unmodelled lines for export; each view reads only the
    marks beside them. Parsing the whole of them cost ~0.8 s per flooded event on every search
    (ten such events on one day: 8 s), counted here in characters handed to the parser."""
    import_bytes(store, flood())
    parsed: list[int] = []
    real = capped_fields.extra_vevent
    monkeypatch.setattr(capped_fields, "extra_vevent", lambda extra: parsed.append(len(extra or "")) or real(extra))
    view = json.loads(call(build_registry(store), "search_events", date="2026-12-07").to_text())["data"]["events"][0]
    assert f"of {len(MEGABYTE_NOTES):,} characters" in view["cut"]  # the whole size is still known
    assert parsed and max(parsed) < 1_000, parsed


def test_the_store_keeps_the_flood_cut_and_the_export_gives_it_back_whole(store: CalendarStore) -> None:
    report = import_bytes(store, flood())
    assert report.notes == [f"'Flood' 20261207T010000Z: kept cut (exported whole): notes characters "
                            f"{IMPORT_NOTES:,} of {len(MEGABYTE_NOTES):,}, attendees {IMPORT_ATTENDEES} of 5,000"]
    (event,) = store.all_events()
    assert len(event.notes or "") == IMPORT_NOTES and len(event.attendees) == IMPORT_ATTENDEES
    out = exported_vevent(store, "flood@attacker")
    assert str(out["DESCRIPTION"]) == MEGABYTE_NOTES
    assert len(out["ATTENDEE"]) == 5000 and str(out["ATTENDEE"][4999]) == "mailto:guest4999@example.com"
    assert capped_fields.CUT not in out  # the store's mark never leaves


def test_a_sync_push_carries_the_whole_originals_too(store: CalendarStore) -> None:
    import_bytes(store, flood())
    (event,) = store.all_events()
    pushed = icalendar.Calendar.from_ical(object_bytes(store, event))
    (out,) = pushed.walk("VEVENT")
    assert str(out["DESCRIPTION"]) == MEGABYTE_NOTES and len(out["ATTENDEE"]) == 5000


def test_notes_edited_here_are_exported_as_edited_not_as_the_old_original(store: CalendarStore) -> None:
    import_bytes(store, flood())
    (event,) = store.all_events()
    store.update_event(event.id, notes="짧은 메모")
    out = exported_vevent(store, "flood@attacker")
    assert str(out["DESCRIPTION"]) == "짧은 메모"
    assert len(out["ATTENDEE"]) == 5000  # the attendees were not touched: still the server's whole list


def test_a_files_own_cut_mark_cannot_make_the_export_drop_its_title(store: CalendarStore) -> None:
    forged = f"{capped_fields.CUT}:SUMMARY 3 {'0' * 24} 999999"
    import_bytes(store, calendar(vevent("forged@attacker", "Dentist", "20261207T010000Z", "20261207T020000Z", forged)))
    out = exported_vevent(store, "forged@attacker")
    assert str(out["SUMMARY"]) == "Dentist" and capped_fields.CUT not in out
    view = json.loads(call(build_registry(store), "search_events", date="2026-12-07").to_text())["data"]["events"][0]
    assert "cut" not in view


def test_5000_exdates_are_kept_to_the_cap_in_the_store_and_whole_in_the_export(store: CalendarStore) -> None:
    days = [f"2027{m:02d}{d:02d}T010000Z" for m in range(1, 13) for d in range(1, 29)]
    stamps = [f"{2027 + y}{s[4:]}" for y in range(15) for s in days][:5000]
    exdates = [f"EXDATE:{','.join(stamps[i:i + 50])}" for i in range(0, len(stamps), 50)]
    import_bytes(store, calendar(vevent("daily@attacker", "Standup", "20261207T010000Z", "20261207T011500Z",
                                        "RRULE:FREQ=DAILY", *exdates)))
    (event,) = store.all_events()
    assert len(rec.parse(event.recurrence).exdates) == IMPORT_DATES
    out = exported_vevent(store, "daily@attacker")
    assert sum(len(prop.dts) for prop in out["EXDATE"]) == 5000


def test_a_crowded_day_says_how_many_events_it_left_out_and_what_to_ask(store: CalendarStore) -> None:
    for minute in range(45):
        start = datetime(2026, 12, 7, 9, minute, tzinfo=SEOUL)
        store.add_event(f"slot {minute}", start, start.replace(hour=10), notes="n" * 400)
    data = call(build_registry(store), "search_events", date="2026-12-07").data
    shown = len(data["events"])
    assert 0 < shown < 45 and data["truncated"] is True
    assert data["more"] == f"… {45 - shown} more events not listed: search a narrower date range or add a query"
    assert len(json.dumps(data["events"], ensure_ascii=False)) <= RESULT_CHARS + 100


# -- a rule that never matches stalls the store ------------------------------------------------


def test_thirty_rules_that_never_match_are_refused_and_named_at_ordinary_speed(tmp_path: Path) -> None:
    with CalendarStore(tmp_path / "ordinary.sqlite3") as ordinary, CalendarStore(tmp_path / "attack.sqlite3") as attacked:
        reports = {}
        ordinary_s = timed(lambda: reports.setdefault("ordinary", import_bytes(ordinary, rules("FREQ=DAILY"))))
        attack_s = timed(lambda: reports.setdefault("attack", import_bytes(attacked, rules(NEVER))))
        assert reports["ordinary"].count == 30 and reports["attack"].count == 0
        assert len(reports["attack"].skipped) == 30
        assert all("RRULE:" in line and "no occurrence in the 50 years after 2026-12-07" in line
                   for line in reports["attack"].skipped)
        assert attack_s <= RATIO * ordinary_s, (attack_s, ordinary_s)  # before the bound: ~371x per rule
        assert attacked.all_events() == []  # nothing kept that a later search would have to walk


def test_rules_stored_before_the_check_cost_a_search_past_the_horizon_no_more_than_ordinary_ones(tmp_path: Path) -> None:
    """A calendar file written by an older version holds the thirty rules (its check let them
    through): the first search past the index's horizon extends every series."""
    paths = {name: tmp_path / f"{name}.sqlite3" for name in ("ordinary", "old")}
    for path in paths.values():
        with CalendarStore(path) as store:
            import_bytes(store, rules("FREQ=DAILY"))
    with sqlite3.connect(paths["old"]) as conn:
        conn.execute("UPDATE events SET recurrence = ?", (f"RRULE:{NEVER}",))
    spent = {}
    for name, path in paths.items():
        with CalendarStore(path) as store:
            day = datetime(2030, 2, 4, tzinfo=SEOUL)
            found: list = []
            spent[name] = timed(lambda: found.extend(store.events_between(day, day.replace(day=5))))
            assert len(found) == (30 if name == "ordinary" else 0)
    assert spent["old"] <= RATIO * spent["ordinary"], spent  # before the bound: ~118 s


@pytest.mark.parametrize("rule, first, then", [
    ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", date(2028, 2, 29), [date(2032, 2, 29), date(2104, 2, 29)]),
    ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29", date(2028, 2, 29), [date(2032, 2, 29), date(2104, 2, 29)]),
    ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", date(2072, 2, 29), [date(2112, 2, 29)]),  # 40 years apart
    ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", date(2072, 2, 29), [date(2112, 2, 29)]),  # 480 months of days
])
def test_sparse_rules_that_do_match_still_expand(store: CalendarStore, rule: str, first: date, then: list[date]) -> None:
    start = datetime.combine(first, datetime.min.time(), tzinfo=timezone.utc).replace(hour=1)
    stamp = start.strftime("%Y%m%dT%H%M%SZ")
    report = import_bytes(store, calendar(vevent("leap@x", "Leap", stamp, stamp.replace("T01", "T02"), f"RRULE:{rule}")))
    assert (report.count, report.skipped) == (1, [])
    (series,) = store.all_events()
    for day in then:
        moment = datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc)
        found = store.occurrences(series.id, moment, moment.replace(hour=23))
        assert [o.start.astimezone(timezone.utc).date() for o in found] == [day]


def test_moving_a_series_where_its_rule_never_falls_is_a_tool_error_with_a_stable_code(store: CalendarStore) -> None:
    """FREQ=YEARLY;BYMONTH=2 takes its day from DTSTART: moved to Jan 30 it means Feb 30."""
    import_bytes(store, calendar(vevent("feb@x", "Seollal call", "20270210T010000Z", "20270210T020000Z",
                                        "RRULE:FREQ=YEARLY;BYMONTH=2")))
    (series,) = store.all_events()
    result = call(build_registry(store), "update_event", event_id=series.id, date="2027-01-30", scope="all")
    assert not result.ok and result.error == NEVER_MATCHES
    assert "RRULE:FREQ=YEARLY;BYMONTH=2" in result.message and "Nothing was changed" in result.message
    assert store.get_event(series.id) == series
