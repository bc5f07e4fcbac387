"""The occurrence index: a search reads it and finds exactly what expanding every series found.

The oracle is ``tests.calendar_expansion.expanded_between``, the search before the index.
Random calendars (series with COUNT, UNTIL or no end, EXDATEs, RDATEs, moved and retitled
occurrences, all-day series, zones with DST) are changed through every write path the store
has, then searched over windows near and far, and each search must equal the oracle's field
for field, wall time for wall time, in the same order.

Where the two may differ by design, the generated calendars stay out: an RDATE before the
series' first start (the old search never found it; the index does, see the test below), times
inside a DST gap or overlap (the old search compared those by wall clock within a zone and by
instant across zones, which is not one order), windows with fractions of a second, and a
one-off event that kept the overrides of the series it was (the old search expanded it again).
"""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.calendar_expansion import expanded_between
from tools.calendar import occurrence_index as index
from tools.calendar import recurrence as rec
from tools.calendar.event_rows import occurrence_of
from tools.calendar.store import CalendarStore, Event, from_utc_text

UTC = timezone.utc
SEOUL, NEW_YORK = ZoneInfo("Asia/Seoul"), ZoneInfo("America/New_York")
ZONES = ("Asia/Seoul", "America/New_York", "Europe/Berlin", "UTC")
PROPERTY_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def shown(events: list[Event]) -> list[tuple[Any, ...]]:
    """Every field, and the wall times as text (``==`` on aware datetimes of one zone ignores fold)."""
    return [(e, e.start.isoformat(), e.end.isoformat(), e.original_start and e.original_start.isoformat())
            for e in events]


def index_rows(store: CalendarStore) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with store._lock:
        return ([tuple(r) for r in store._conn.execute("SELECT * FROM event_occurrences ORDER BY 1, 2")],
                [tuple(r) for r in store._conn.execute("SELECT * FROM occurrence_index ORDER BY 1")])


def assert_index_is_fresh(store: CalendarStore) -> None:
    """The stored index is what rebuilding every series from scratch (to the same horizons) gives."""
    stored = index_rows(store)
    assert {r[0] for r in stored[1]} == {e.id for e in store.all_events() if e.is_series}
    with store.transaction():
        for event_id, until_utc, _ in stored[1]:
            index.reindex(store._conn, event_id, datetime.now(UTC),
                          until=from_utc_text(until_utc) if until_utc else None)
    assert index_rows(store) == stored


# ------------------------------------------------------------------------------- random calendars

RULES = st.sampled_from([
    "FREQ=DAILY", "FREQ=DAILY;INTERVAL=3", "FREQ=WEEKLY", "FREQ=WEEKLY;BYDAY=MO,WE,FR", "FREQ=WEEKLY;INTERVAL=2",
    "FREQ=MONTHLY", "FREQ=MONTHLY;BYDAY=2TU", "FREQ=YEARLY",
])
ENDS = st.one_of(st.none(), st.integers(1, 80).map(lambda n: f"COUNT={n}"),
                 st.integers(20, 1500).map(lambda days: f"UNTIL+{days}"))
CLOCK = st.integers(6 * 4, 22 * 4).map(lambda quarter: time(quarter // 4, quarter % 4 * 15))  # no DST gap or overlap
FIRST_DAY = st.dates(date(2025, 6, 1), date(2028, 6, 1))


@st.composite
def series_spec(draw: st.DrawFn) -> dict[str, Any]:
    all_day = draw(st.booleans()) and draw(st.booleans())
    rule, ending = draw(RULES), draw(ENDS)
    return {
        "all_day": all_day, "day": draw(FIRST_DAY), "clock": time(0) if all_day else draw(CLOCK),
        "minutes": draw(st.sampled_from([1440, 2880])) if all_day else draw(st.integers(15, 300)),
        "rule": rule, "ending": ending, "rdates": draw(st.lists(st.integers(1, 900), max_size=2)),
        "title": draw(st.sampled_from(["팀 회의", "Standup", "gym", "birthday"])),
        "attendees": draw(st.lists(st.sampled_from(["Mina", "민수", "jane"]), max_size=2, unique=True)),
        "reminders": draw(st.lists(st.sampled_from([0, 10, 60]), max_size=2, unique=True)),
    }


CHANGES = st.lists(st.tuples(
    st.sampled_from(["cancel", "move", "retitle", "shift_series", "clear", "end_before", "split", "retime", "delete",
                     "to_one_off", "retitle_series"]),
    st.integers(0, 10_000), st.integers(-3 * 24 * 4, 3 * 24 * 4),
), max_size=8)


def make_calendar(store: CalendarStore, zone_name: str, specs: list[dict[str, Any]], singles: list[tuple[date, time, int]]) -> None:
    zone = ZoneInfo(zone_name)
    for spec in specs:
        first = datetime.combine(spec["day"], spec["clock"], tzinfo=zone)
        rule = spec["rule"]
        if spec["ending"] and spec["ending"].startswith("UNTIL+"):
            rule += ";UNTIL=" + rec.utc_stamp(first + timedelta(days=int(spec["ending"][6:])))
        elif spec["ending"]:
            rule += ";" + spec["ending"]
        text = f"RRULE:{rule}"
        if spec["rdates"]:
            later = timedelta(hours=0 if spec["all_day"] else 1)  # off the rule, out of DST gaps and overlaps
            text += "\nRDATE:" + ",".join(rec.utc_stamp(first + timedelta(days=d) + later) for d in spec["rdates"])
        store.add_event(spec["title"], first, first + timedelta(minutes=spec["minutes"]), tz=zone_name,
                        recurrence=text, all_day=spec["all_day"], attendees=spec["attendees"],
                        remind_minutes_before=spec["reminders"])
    for day, clock, minutes in singles:
        first = datetime.combine(day, clock, tzinfo=zone)
        store.add_event("one-off", first, first + timedelta(minutes=minutes), tz=zone_name, attendees=["Mina"])


def quarter_hours(moment: datetime, quarters: int) -> datetime:
    """``moment`` moved by whole quarter hours, on the wall clock, kept out of DST gaps and overlaps."""
    moved = moment + timedelta(minutes=15 * quarters)
    return moved.replace(hour=min(max(moved.hour, 6), 22))


def apply_changes(store: CalendarStore, changes: list[tuple[str, int, int]]) -> None:
    """Each change picks a series and one of its occurrences in its first 400 days by number."""
    for kind, pick, quarters in changes:
        series = [e for e in store.all_events() if e.is_series]
        if not series:
            return
        target = series[pick % len(series)]
        found = store.occurrences(target.id, target.start, target.start + timedelta(days=400))
        if not found:
            continue
        occurrence = found[pick % len(found)]
        original = occurrence.original_start
        assert original is not None
        if kind == "cancel":
            store.cancel_occurrence(target.id, original)
        elif kind == "move" and not target.all_day:
            start = quarter_hours(occurrence.start, quarters)
            store.override_occurrence(target.id, original, start=start, end=start + (occurrence.end - occurrence.start))
        elif kind == "retitle":
            store.override_occurrence(target.id, original, title="moved " + str(quarters), location="room 2")
        elif kind == "shift_series" and not target.all_day:
            start = quarter_hours(target.start, quarters)
            store.update_event(target.id, start=start, end=start + (target.end - target.start))
        elif kind == "retime" and not target.all_day:
            store.update_event(target.id, end=target.end + timedelta(minutes=15 * (abs(quarters) % 8 + 1)))
        elif kind == "clear":
            store.clear_overrides(target.id)
        elif kind == "end_before":
            store.end_series_before(target.id, original)
        elif kind == "split":
            store.split_series(target.id, original)
        elif kind == "delete":
            store.delete_event(target.id)
        elif kind == "to_one_off":  # its overrides first: the old search still expanded a one-off that kept some
            store.clear_overrides(target.id)
            store.update_event(target.id, recurrence=None)
        elif kind == "retitle_series":
            store.update_event(target.id, title="renamed", attendees=["jane"])


def windows(zone_name: str, days: list[int]) -> list[tuple[datetime, datetime]]:
    """Local days from 2025-01-01 on, a week, and far ones (before every series, decades out)."""
    zone = ZoneInfo(zone_name)
    origin = datetime(2025, 1, 1, tzinfo=zone)
    found = [(origin + timedelta(days=d), origin + timedelta(days=d + 1)) for d in days]
    found.append((origin + timedelta(days=days[0]), origin + timedelta(days=days[0] + 7)))
    found += [(datetime(1999, 3, 1, tzinfo=UTC), datetime(1999, 3, 8, tzinfo=UTC)),
              (datetime(2041, 3, 4, tzinfo=zone), datetime(2041, 3, 12, tzinfo=zone)),  # extends the index
              (datetime(2071, 7, 1, 9, 15, tzinfo=UTC), datetime(2071, 7, 9, tzinfo=UTC))]  # past its reach
    return found


# ------------------------------------------------------------------------------- the property


@PROPERTY_SETTINGS
@given(
    zone_name=st.sampled_from(ZONES),
    specs=st.lists(series_spec(), min_size=1, max_size=5),
    singles=st.lists(st.tuples(FIRST_DAY, CLOCK, st.integers(15, 600)), max_size=3),
    changes=CHANGES,
    days=st.lists(st.integers(0, 5 * 366), min_size=1, max_size=6),
)
def test_a_search_finds_exactly_what_expanding_every_series_found(
    tmp_path_factory: pytest.TempPathFactory, zone_name: str, specs: list[dict[str, Any]],
    singles: list[tuple[date, time, int]], changes: list[tuple[str, int, int]], days: list[int],
) -> None:
    path = tmp_path_factory.mktemp("index") / "calendar.sqlite3"
    with CalendarStore(path, tz=zone_name) as store:
        make_calendar(store, zone_name, specs, singles)
        apply_changes(store, changes)
        assert_index_is_fresh(store)
        for start, end in windows(zone_name, days):
            assert shown(store.events_between(start, end)) == shown(expanded_between(store, start, end)), (start, end)
        assert_index_is_fresh(store)  # searches that extended it left it as a rebuild would
    with CalendarStore(path, tz=zone_name) as reopened:
        start, end = windows(zone_name, days)[0]
        assert shown(reopened.events_between(start, end)) == shown(expanded_between(reopened, start, end))


# ------------------------------------------------------------------------------- one behaviour each


def weekly_in_new_york(store: CalendarStore, first: datetime, rule: str = "RRULE:FREQ=WEEKLY") -> Event:
    return store.add_event("팀 회의", first, first + timedelta(hours=1), tz="America/New_York", recurrence=rule)


def test_an_occurrence_in_a_dst_gap_keeps_the_wall_time_the_expansion_gives_it(store: CalendarStore) -> None:
    """New York skips 02:00-03:00 on 2027-03-14; dateutil yields 02:30 that Sunday, and so did
    every search before the index (the index keeps that wall time beside the UTC instant)."""
    series = weekly_in_new_york(store, datetime(2027, 3, 7, 2, 30, tzinfo=NEW_YORK))
    day = datetime(2027, 3, 14, tzinfo=NEW_YORK)
    [found] = store.events_between(day, day + timedelta(days=1))
    assert shown([found]) == shown(expanded_between(store, day, day + timedelta(days=1)))
    assert found.start.strftime("%H:%M") == "02:30" and found.key == (series.id, "2027-03-14T07:30:00Z")


def test_an_occurrence_in_the_repeated_hour_of_a_dst_change_keeps_its_fold(store: CalendarStore) -> None:
    """New York repeats 01:00-02:00 on 2027-11-07; an RDATE at the second 01:30 (EST) is that
    instant, not the first 01:30 (EDT) that its wall time alone would mean."""
    second = datetime(2027, 11, 7, 6, 30, tzinfo=UTC)
    weekly_in_new_york(store, datetime(2027, 11, 1, 10, tzinfo=NEW_YORK),
                       f"RRULE:FREQ=WEEKLY;COUNT=3\nRDATE:{rec.utc_stamp(second)}")
    start, end = datetime(2027, 11, 7, 5, tzinfo=UTC), datetime(2027, 11, 7, 8, tzinfo=UTC)
    [found] = store.events_between(start, end)
    assert shown([found]) == shown(expanded_between(store, start, end))
    assert found.start.fold == 1 and found.start.isoformat() == "2027-11-07T01:30:00-05:00"


def test_a_moved_occurrence_is_found_at_its_new_time_and_not_at_its_old_one(store: CalendarStore) -> None:
    series = weekly_in_new_york(store, datetime(2026, 12, 7, 10, tzinfo=NEW_YORK), "RRULE:FREQ=WEEKLY;COUNT=10")
    original = datetime(2026, 12, 14, 10, tzinfo=NEW_YORK)
    moved = datetime(2026, 12, 30, 18, tzinfo=NEW_YORK)  # into another week, past the next occurrence
    store.override_occurrence(series.id, original, start=moved, end=moved + timedelta(hours=1), title="moved")
    old_day, new_day = datetime(2026, 12, 14, tzinfo=NEW_YORK), datetime(2026, 12, 30, tzinfo=NEW_YORK)
    assert store.events_between(old_day, old_day + timedelta(days=1)) == []
    [found] = store.events_between(new_day, new_day + timedelta(days=1))
    assert (found.title, found.start, found.original_start) == ("moved", moved, original)


def test_an_endless_series_is_indexed_ahead_extended_by_a_later_search_and_expanded_past_the_reach(
    store: CalendarStore,
) -> None:
    now = datetime.now(UTC)
    first = (now - timedelta(days=30)).astimezone(SEOUL).replace(hour=9, minute=0, second=0, microsecond=0)
    series = store.add_event("daily", first, first + timedelta(minutes=30), recurrence="RRULE:FREQ=DAILY")

    def until() -> datetime:
        [(_, until_utc, _)] = index_rows(store)[1]
        return from_utc_text(until_utc)

    assert now + index.INDEX_AHEAD - timedelta(days=1) < until() <= now + index.INDEX_AHEAD + timedelta(days=1)
    later = first + timedelta(days=10 * 366)
    [occurrence] = store.events_between(later, later + timedelta(days=1) - timedelta(hours=1))
    assert occurrence.id == series.id and until() >= later + index.INDEX_AHEAD
    rows = len(index_rows(store)[0])
    far = first + index.INDEX_REACH + timedelta(days=5 * 366)
    found = store.events_between(far, far + timedelta(days=3))
    assert shown(found) == shown(expanded_between(store, far, far + timedelta(days=3))) and len(found) == 3
    assert len(index_rows(store)[0]) == rows  # a century of a daily series is not stored for one search


def test_a_moved_occurrence_far_past_the_horizon_is_indexed_anyway(store: CalendarStore) -> None:
    first = datetime.now(SEOUL).replace(hour=9, minute=0, second=0, microsecond=0)
    series = store.add_event("weekly", first, first + timedelta(hours=1), recurrence="RRULE:FREQ=WEEKLY")
    original = first + timedelta(weeks=52 * 5)
    moved = first + timedelta(days=3, hours=2)
    assert store.override_occurrence(series.id, original, start=moved, end=moved + timedelta(hours=1))
    day = moved.replace(hour=0)
    found = store.events_between(day, day + timedelta(days=1))
    assert [(e.start, e.original_start) for e in found] == [(moved, original)]
    assert shown(found) == shown(expanded_between(store, day, day + timedelta(days=1)))


def test_a_failed_change_leaves_the_index_as_it_was(store: CalendarStore) -> None:
    series = weekly_in_new_york(store, datetime(2026, 12, 7, 10, tzinfo=NEW_YORK), "RRULE:FREQ=WEEKLY;COUNT=10")
    before = index_rows(store)
    with pytest.raises(ValueError):
        store.update_event(series.id, recurrence="RRULE:FREQ=HOURLY")
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.cancel_occurrence(series.id, datetime(2026, 12, 14, 10, tzinfo=NEW_YORK))
            raise RuntimeError("the tool call fails after the change")
    assert index_rows(store) == before


def test_deleting_a_series_deletes_its_index_rows(store: CalendarStore) -> None:
    series = weekly_in_new_york(store, datetime(2026, 12, 7, 10, tzinfo=NEW_YORK))
    assert index_rows(store)[0]
    assert store.delete_event(series.id)
    assert index_rows(store) == ([], [])


def test_an_rdate_before_the_series_start_is_found_as_every_other_reader_finds_it(store: CalendarStore) -> None:
    """An imported series may list an RDATE before its DTSTART; ``occurrence`` and the export
    always counted it, but the search before the index skipped series starting after the window."""
    first = datetime(2026, 12, 7, 10, tzinfo=SEOUL)
    early = datetime(2026, 12, 1, 10, tzinfo=SEOUL)
    series = store.add_event("팀 회의", first, first + timedelta(hours=1),
                             recurrence=f"RRULE:FREQ=WEEKLY;COUNT=3\nRDATE:{rec.utc_stamp(early)}")
    day = early.replace(hour=0)
    [found] = store.events_between(day, day + timedelta(days=1))
    assert found.original_start == early and store.occurrence(series.id, early) is not None
    assert expanded_between(store, day, day + timedelta(days=1)) == []  # the old search missed it


def test_an_occurrence_built_from_the_index_is_the_event_replace_builds() -> None:
    """``occurrence_of`` fills ``__dict__`` instead of running the frozen ``__init__``; that is
    only the same object while Event has no ``__post_init__`` and no slots."""
    assert not hasattr(Event, "__post_init__") and not hasattr(Event, "__slots__")
    start = datetime(2026, 12, 7, 10, tzinfo=SEOUL)
    series = Event(id=3, title="팀 회의", start=start, end=start + timedelta(hours=1), tz="Asia/Seoul",
                   attendees=("Mina",), remind_minutes_before=(10,), recurrence="RRULE:FREQ=WEEKLY", uid="u@iljeong")
    later = start + timedelta(weeks=2)
    made = occurrence_of({f.name: getattr(series, f.name) for f in fields(Event)}, later, later + timedelta(hours=1), later)
    expected = replace(series, start=later, end=later + timedelta(hours=1), original_start=later)
    assert made == expected and vars(made) == vars(expected) and repr(made) == repr(expected)
    assert hash(made.key) == hash(expected.key)
