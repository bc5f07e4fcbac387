"""Series, all-day events and exceptions in the store: occurrences are what every reader sees.

Real SQLite files; expansion is ``dateutil``'s, checked here on wall time across DST changes in
America/New_York and Europe/Berlin, and on the reminders each occurrence gets (once, across
restarts).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tools.calendar.reminders import due_reminders, mark_sent
from tools.calendar.store import CalendarStore

NEW_YORK, BERLIN, SEOUL = ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin"), ZoneInfo("Asia/Seoul")
UTC = timezone.utc
WEEKLY_MONDAY = "RRULE:FREQ=WEEKLY;BYDAY=MO"


def store_in(tmp_path: Path, tz: str) -> CalendarStore:
    return CalendarStore(tmp_path / "calendar.sqlite3", tz=tz)


def weekly(store: CalendarStore, zone: ZoneInfo, first: datetime, rule: str = WEEKLY_MONDAY, **extra) -> int:
    start = first.replace(tzinfo=zone)
    return store.add_event("팀 회의", start, start + timedelta(hours=1), recurrence=rule, **extra).id


@pytest.mark.parametrize(("tz", "first", "changes"), [
    ("America/New_York", datetime(2026, 10, 26, 10), "2026-11-01"),  # EDT → EST
    ("Europe/Berlin", datetime(2026, 3, 23, 10), "2026-03-29"),  # CET → CEST
])
def test_a_weekly_series_keeps_its_local_wall_time_across_a_dst_change(tmp_path: Path, tz: str, first: datetime,
                                                                          changes: str) -> None:
    zone = ZoneInfo(tz)
    with store_in(tmp_path, tz) as store:
        series = weekly(store, zone, first)
        found = store.events_between(first.replace(tzinfo=zone), first.replace(tzinfo=zone) + timedelta(days=21))
    assert [e.start.astimezone(zone).strftime("%a %H:%M") for e in found] == ["Mon 10:00"] * 3
    offsets = {e.start.utcoffset() for e in found}
    assert len(offsets) == 2, f"the UTC offset changes on {changes}, the local time does not"
    assert all(e.id == series and e.original_start == e.start for e in found)


def test_a_new_event_gets_a_uid_once_and_keeps_it(tmp_path: Path) -> None:
    with store_in(tmp_path, "Asia/Seoul") as store:
        event = store.add_event("치과", datetime(2026, 12, 1, 15, tzinfo=SEOUL), datetime(2026, 12, 1, 16, tzinfo=SEOUL))
        store.update_event(event.id, title="치과 검진", start=event.start + timedelta(hours=1),
                           end=event.end + timedelta(hours=1))
        assert event.uid.endswith("@iljeong") and len(event.uid) == len("12345678-1234-4234-8234-123456789012@iljeong")
    with store_in(tmp_path, "Asia/Seoul") as store:
        assert store.get_event(event.id).uid == event.uid
        assert store.find_uid(event.uid).title == "치과 검진"


def test_occurrences_are_what_day_searches_conflicts_and_counts_see(tmp_path: Path) -> None:
    with store_in(tmp_path, "Asia/Seoul") as store:
        series = weekly(store, SEOUL, datetime(2026, 12, 7, 10), "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=52")
        day = datetime(2027, 3, 1, tzinfo=SEOUL)  # a Monday, 13 weeks in
        [occurrence] = store.events_between(day, day + timedelta(days=1))
        assert occurrence.start == datetime(2027, 3, 1, 10, tzinfo=SEOUL)
        assert occurrence.key == (series, "2027-03-01T01:00:00Z")
        assert store.events_between(day + timedelta(days=1), day + timedelta(days=7)) == []
        assert [e.key for e in store.conflicts(day + timedelta(hours=10, minutes=30), day + timedelta(hours=11))] == [
            occurrence.key]
        assert store.occurrence_count(series) == 52
        assert store.occurrence_count(series, after=day) == 52 - 12
        after_the_end = datetime(2027, 12, 6, tzinfo=SEOUL)  # the 53rd Monday
        assert store.events_between(after_the_end, after_the_end + timedelta(days=1)) == []
        assert store.occurrence_count(weekly(store, SEOUL, datetime(2026, 12, 8, 9), "RRULE:FREQ=DAILY")) is None


def test_one_occurrence_moved_retitled_or_cancelled_leaves_the_others(tmp_path: Path) -> None:
    with store_in(tmp_path, "Asia/Seoul") as store:
        series = weekly(store, SEOUL, datetime(2026, 12, 7, 10), "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4")
        second = store.occurrence_on(series, date(2026, 12, 14))
        third = store.occurrence_on(series, date(2026, 12, 21))
        assert store.cancel_occurrence(series, second.original_start)
        moved = store.override_occurrence(series, third.original_start, title="팀 회의 (장소 변경)",
                                          start=third.start + timedelta(days=1), end=third.end + timedelta(days=1))
        assert (moved.start, moved.original_start) == (datetime(2026, 12, 22, 10, tzinfo=SEOUL), third.original_start)
        assert not store.cancel_occurrence(series, second.original_start)  # gone already
    with store_in(tmp_path, "Asia/Seoul") as store:  # a restart keeps the exceptions
        found = store.events_between(datetime(2026, 12, 1, tzinfo=SEOUL), datetime(2027, 1, 1, tzinfo=SEOUL))
        assert [(e.start.strftime("%m-%d"), e.title) for e in found] == [
            ("12-07", "팀 회의"), ("12-22", "팀 회의 (장소 변경)"), ("12-28", "팀 회의")]
        # the moved occurrence is found on its new day only, even searching from there alone
        tuesday = datetime(2026, 12, 22, tzinfo=SEOUL)
        assert [e.title for e in store.events_between(tuesday, tuesday + timedelta(days=1))] == ["팀 회의 (장소 변경)"]
        monday = datetime(2026, 12, 21, tzinfo=SEOUL)
        assert store.events_between(monday, monday + timedelta(days=1)) == []
        assert store.occurrence_count(series) == 3


def test_this_and_following_splits_the_series_and_moves_its_exceptions_along(tmp_path: Path) -> None:
    with store_in(tmp_path, "Asia/Seoul") as store:
        series = weekly(store, SEOUL, datetime(2026, 12, 7, 10), "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=6")
        old_uid = store.get_event(series).uid
        cancelled = store.occurrence_on(series, date(2026, 12, 28))
        store.cancel_occurrence(series, cancelled.original_start)
        pivot = store.occurrence_on(series, date(2026, 12, 21))
        tail = store.split_series(series, pivot.original_start)
        store.update_event(tail.id, start=tail.start + timedelta(hours=4), end=tail.end + timedelta(hours=4))
        found = store.events_between(datetime(2026, 12, 1, tzinfo=SEOUL), datetime(2027, 3, 1, tzinfo=SEOUL))
        assert [(e.id, e.start.strftime("%m-%d %H")) for e in found] == [
            (series, "12-07 10"), (series, "12-14 10"), (tail.id, "12-21 14"), (tail.id, "01-04 14"),
            (tail.id, "01-11 14")]
        assert store.get_event(series).uid == old_uid and tail.uid != old_uid
        assert store.end_series_before(tail.id, store.occurrence_on(tail.id, date(2027, 1, 4)).original_start)
        assert store.occurrence_count(tail.id) == 1
        assert store.end_series_before(series, store.get_event(series).start)  # from the first: all of it
        assert store.get_event(series) is None


def test_all_day_and_transparent_events_are_kept_and_only_opaque_ones_are_busy(tmp_path: Path) -> None:
    with store_in(tmp_path, "Asia/Seoul") as store:
        vacation = store.add_event("휴가", datetime(2026, 12, 11, tzinfo=SEOUL), datetime(2026, 12, 14, tzinfo=SEOUL),
                                   all_day=True)
        birthday = store.add_event("엄마 생일", datetime(2026, 12, 12, tzinfo=SEOUL), datetime(2026, 12, 13, tzinfo=SEOUL),
                                   all_day=True, transparent=True, recurrence="RRULE:FREQ=YEARLY")
        noon = datetime(2026, 12, 12, 12, tzinfo=SEOUL)
        assert [e.id for e in store.conflicts(noon, noon + timedelta(hours=1))] == [vacation.id]
        next_year = datetime(2027, 12, 12, 12, tzinfo=SEOUL)
        [again] = store.events_between(next_year, next_year + timedelta(hours=1))
        assert (again.id, again.all_day, again.series_words()) == (birthday.id, True, "yearly")
        assert store.conflicts(next_year, next_year + timedelta(hours=1)) == []


def test_a_recurrence_that_cannot_be_kept_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    with store_in(tmp_path, "Asia/Seoul") as store:
        start = datetime(2026, 12, 7, 10, tzinfo=SEOUL)
        for rule, reason in [("RRULE:FREQ=HOURLY", "FREQ=HOURLY"), ("RRULE:FREQ=WEEKLY;UNTIL=20270101", "UTC"),
                             ("RRULE:FREQ=WEEKLY;BYDAY=XX", "RRULE"), ("FOO:BAR", "not a recurrence")]:
            with pytest.raises(ValueError, match=reason):
                store.add_event("x", start, start + timedelta(hours=1), recurrence=rule)
        assert store.all_events() == []


def test_each_occurrence_is_reminded_once_across_restarts_and_dst(tmp_path: Path) -> None:
    with store_in(tmp_path, "America/New_York") as store:
        series = weekly(store, NEW_YORK, datetime(2026, 10, 26, 10), remind_minutes_before=(10,))
    sent: list[str] = []
    for week in range(3):
        for restart in range(2):
            now = datetime(2026, 10, 26, 9, 50, tzinfo=NEW_YORK) + timedelta(weeks=week, minutes=restart)
            with store_in(tmp_path, "America/New_York") as store:
                for reminder in due_reminders(store, now, timedelta(minutes=30)).send:
                    assert reminder.event.start.astimezone(NEW_YORK).strftime("%H:%M") == "10:00"
                    if mark_sent(store, reminder, now):
                        sent.append(reminder.key)
    assert sent == [f"rem:{series}:10:2026-10-26T13:50:00Z", f"rem:{series}:10:2026-11-02T14:50:00Z",
                    f"rem:{series}:10:2026-11-09T14:50:00Z"]


def test_two_series_of_one_instant_in_two_zones_keep_their_own_wall_times(tmp_path: Path) -> None:
    """Aware datetimes of one instant are equal across zones: the expansion must not mix them up."""
    first = datetime(2026, 10, 26, 10, tzinfo=NEW_YORK)
    with store_in(tmp_path, "America/New_York") as store:
        local = store.add_event("local", first, first + timedelta(hours=1), recurrence="RRULE:FREQ=WEEKLY;COUNT=2")
        in_utc = store.add_event("utc", first, first + timedelta(hours=1), tz="UTC", recurrence="RRULE:FREQ=WEEKLY;COUNT=2")
        second = {e.title: e.start.astimezone(NEW_YORK).strftime("%H:%M")
                  for e in store.events_between(first + timedelta(days=6), first + timedelta(days=8))}
    assert (local.tz, in_utc.tz, second) == ("America/New_York", "UTC", {"local": "10:00", "utc": "09:00"})


def test_the_series_bench_figure_searches_the_same_day_in_both_calendars() -> None:
    """The figure's shape and counts (never its timings): a weekly calendar has n/7 occurrences a day."""
    from tools.calendar.lab.bench import figure

    result = figure(n=70, repeats=2)
    assert result["series_found_per_day"] == 10 and result["singles_found_per_day"] <= 1
    assert result["series_day_search_ms"] > 0 and result["singles_day_search_ms"] > 0 and result["goal"] == 3
    assert result["series_found_mean"] == result["same_events_found_mean"] == 10  # like with like
    assert result["ratio_per_returned_event"] > 0 and result["same_events_ratio"] > 0


def test_a_snoozed_reminder_of_an_occurrence_names_that_occurrence(tmp_path: Path) -> None:
    from tools.calendar.reminders import reminder_text

    with store_in(tmp_path, "Asia/Seoul") as store:
        series = weekly(store, SEOUL, datetime(2026, 11, 2, 10), remind_minutes_before=(10,))
        now = datetime(2026, 11, 23, 9, 55, tzinfo=SEOUL)  # the fourth Monday, after its reminder
        assert store.ledger.add_snooze(series, now + timedelta(minutes=10))
        sent = due_reminders(store, now + timedelta(minutes=10), timedelta(minutes=30)).send
        [snoozed] = [r for r in sent if r.snooze_id is not None]
        assert snoozed.event.start == datetime(2026, 11, 23, 10, tzinfo=SEOUL)
        assert "'팀 회의' at 10:00" in reminder_text(snoozed, store, now + timedelta(minutes=10))
