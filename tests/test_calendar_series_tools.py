"""Series and all-day events through the calendar tools, as the agent loop calls them.

"매주 월요일 오전 10시에 팀 회의" is one create_event with ``repeat``; one occurrence is named by its
id and ``occurrence_date`` (what search_events returns); update_event and delete_event act on
``scope`` this | following | all, and the approval text says which and how many occurrences.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.tools import Registry
from tests.calendar_calls import call
from tools.calendar import CalendarStore, build_registry

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=SEOUL)  # a Tuesday
WEEKLY_MEETING = {"title": "팀 회의", "date": "2026-12-01", "start_time": "10:00", "duration_minutes": 60,
                  "repeat": {"freq": "weekly", "by_weekday": ["MO"], "count": 52}}


@pytest.fixture
def registry(store: CalendarStore) -> Registry:
    return build_registry(store, now=lambda: NOW)


def describe(registry: Registry, name: str, **arguments: Any) -> str:
    return registry.describe(name, registry.validate(name, arguments))


def days(store: CalendarStore, first: str, last: str) -> list[tuple[str, str, str]]:
    found = store.events_between(datetime.fromisoformat(first).replace(tzinfo=SEOUL),
                                 datetime.fromisoformat(last).replace(tzinfo=SEOUL))
    return [(e.start.strftime("%m-%d %a"), e.start.strftime("%H:%M"), e.title) for e in found]


def test_a_weekly_series_is_one_call_that_starts_on_its_first_weekday(store: CalendarStore, registry: Registry) -> None:
    result = call(registry, "create_event", **WEEKLY_MEETING)
    assert result.ok, result
    assert (result.data["date"], result.data["weekday"], result.data["occurrences"]) == ("2026-12-07", "Mon", 52)
    assert result.data["repeats"] == "weekly, Mon 10:00"
    assert len(store.all_events()) == 1
    assert days(store, "2026-12-01", "2026-12-22") == [("12-07 Mon", "10:00", "팀 회의"), ("12-14 Mon", "10:00", "팀 회의"),
                                                      ("12-21 Mon", "10:00", "팀 회의")]


def test_search_returns_each_occurrence_with_its_key(store: CalendarStore, registry: Registry) -> None:
    series = call(registry, "create_event", **WEEKLY_MEETING).data["id"]
    found = call(registry, "search_events", start_date="2026-12-07", end_date="2026-12-20").data["events"]
    assert [(e["id"], e["occurrence_date"], e["repeats"]) for e in found] == [
        (series, "2026-12-07", "weekly, Mon 10:00"), (series, "2026-12-14", "weekly, Mon 10:00")]


def test_the_approval_names_the_scope_and_how_many_occurrences(store: CalendarStore, registry: Registry) -> None:
    series = call(registry, "create_event", **WEEKLY_MEETING).data["id"]
    assert describe(registry, "delete_event", event_id=series, scope="all") == (
        f"Delete all 52 occurrences of '팀 회의' (#{series}, weekly, Mon 10:00)")
    assert describe(registry, "delete_event", event_id=series, occurrence_date="2026-12-07") == (
        f"Delete '팀 회의' on Mon 12-07 only (#{series}, one occurrence of weekly, Mon 10:00)")
    assert describe(registry, "delete_event", event_id=series, occurrence_date="2026-12-14", scope="following") == (
        f"Delete '팀 회의' on Mon 12-14 and the 50 after it (#{series}, weekly, Mon 10:00)")
    assert describe(registry, "update_event", event_id=series, scope="all", start_time="11:00").startswith(
        f"Change all 52 occurrences of '팀 회의' (#{series}, weekly, Mon 10:00): time → Mon 2026-12-07 11:00-12:00")


def test_a_series_without_an_occurrence_date_is_not_guessed(store: CalendarStore, registry: Registry) -> None:
    series = call(registry, "create_event", **WEEKLY_MEETING).data["id"]
    before = store.snapshot()
    result = call(registry, "delete_event", event_id=series)
    assert (result.ok, result.error) == (False, "invalid_arguments")
    assert "occurrence_date" in result.message and "scope=all" in result.message
    result = call(registry, "delete_event", event_id=series, occurrence_date="2026-12-08")  # a Tuesday
    assert (result.ok, result.error) == (False, "not_found")
    assert store.snapshot() == before


def test_cancelling_one_occurrence_keeps_the_others(store: CalendarStore, registry: Registry) -> None:
    series = call(registry, "create_event", **WEEKLY_MEETING).data["id"]
    result = call(registry, "delete_event", event_id=series, occurrence_date="2026-12-14", scope="this")
    assert (result.ok, result.data["scope"], result.data["occurrences"]) == (True, "this", 1)
    assert [d for d, _, _ in days(store, "2026-12-01", "2026-12-29")] == ["12-07 Mon", "12-21 Mon", "12-28 Mon"]
    assert store.occurrence_count(series) == 51


def test_moving_one_occurrence_moves_only_it(store: CalendarStore, registry: Registry) -> None:
    series = call(registry, "create_event", **WEEKLY_MEETING).data["id"]
    result = call(registry, "update_event", event_id=series, occurrence_date="2026-12-14", date="2026-12-15",
                  start_time="14:00")
    assert result.ok and result.data["scope"] == "this", result
    assert days(store, "2026-12-07", "2026-12-22") == [("12-07 Mon", "10:00", "팀 회의"), ("12-15 Tue", "14:00", "팀 회의"),
                                                      ("12-21 Mon", "10:00", "팀 회의")]


def test_following_and_all_change_the_rest_of_the_series(store: CalendarStore, registry: Registry) -> None:
    series = call(registry, "create_event", **WEEKLY_MEETING).data["id"]
    result = call(registry, "update_event", event_id=series, occurrence_date="2026-12-21", scope="following",
                  start_time="09:00")
    assert result.ok, result
    assert [t for _, t, _ in days(store, "2026-12-07", "2027-01-05")] == ["10:00", "10:00", "09:00", "09:00", "09:00"]
    assert call(registry, "update_event", event_id=series, scope="all", title="주간 회의").ok
    assert [title for _, _, title in days(store, "2026-12-07", "2027-01-05")] == ["주간 회의"] * 2 + ["팀 회의"] * 3
    assert call(registry, "delete_event", event_id=series, scope="all").data["occurrences"] == 2
    assert len(days(store, "2026-12-07", "2027-01-05")) == 3


def test_a_new_event_over_an_occurrence_is_a_conflict_and_a_new_series_over_an_event_too(
    store: CalendarStore, registry: Registry
) -> None:
    call(registry, "create_event", **WEEKLY_MEETING)
    clash = call(registry, "create_event", title="치과", date="2027-01-11", start_time="10:30", duration_minutes=30)
    assert (clash.ok, clash.error) == (False, "conflict")
    assert clash.data["conflicts"][0]["occurrence_date"] == "2027-01-11"
    yoga = {"title": "요가", "date": "2026-12-01", "start_time": "09:30", "duration_minutes": 60,
            "repeat": {"freq": "weekly", "by_weekday": ["MO"]}}
    assert call(registry, "create_event", **yoga).error == "conflict"
    assert call(registry, "create_event", **{**yoga, "allow_conflict": True}).data["occurrences"] == "no end"


def test_an_all_day_vacation_spans_its_days_and_shows_no_times(store: CalendarStore, registry: Registry) -> None:
    result = call(registry, "create_event", title="휴가", date="2026-12-04", all_day=True, end_date="2026-12-07")
    assert result.ok, result
    assert {k: result.data[k] for k in ("date", "all_day", "end_date")} == {
        "date": "2026-12-04", "all_day": True, "end_date": "2026-12-07"}
    assert "start" not in result.data
    [event] = store.all_events()
    assert (event.all_day, event.start, event.end) == (True, datetime(2026, 12, 4, tzinfo=SEOUL),
                                                      datetime(2026, 12, 8, tzinfo=SEOUL))
    slots = call(registry, "find_free_slots", date="2026-12-07", duration_minutes=60).data
    assert slots["count"] == 0  # an opaque all-day event is busy
    bad = call(registry, "create_event", title="휴가", date="2026-12-04", all_day=True, start_time="09:00")
    assert (bad.ok, bad.error) == (False, "invalid_arguments")


@pytest.mark.parametrize(("repeat", "why"), [
    ({"freq": "hourly"}, "freq"),
    ({"freq": "weekly", "count": 501}, "count"),
    ({"freq": "weekly", "interval": 0}, "interval"),
    ({"freq": "weekly", "until": "2027-01-01", "count": 3}, "until or count"),
    ({"freq": "daily", "by_weekday": ["MO"]}, "weekly"),
    ({"freq": "weekly", "by_weekday": ["Monday"]}, "by_weekday"),
])
def test_a_repeat_outside_its_bounds_is_refused(store: CalendarStore, registry: Registry, repeat: dict, why: str) -> None:
    result = call(registry, "create_event", **{**WEEKLY_MEETING, "repeat": repeat})
    assert (result.ok, result.error) == (False, "invalid_arguments")
    assert why in result.message
    assert store.all_events() == []


def test_until_is_the_last_local_day(store: CalendarStore, registry: Registry) -> None:
    repeat = {"freq": "daily", "until": "2026-12-05"}
    result = call(registry, "create_event", **{**WEEKLY_MEETING, "repeat": repeat, "start_time": "23:30",
                                               "duration_minutes": 30})
    assert result.data["occurrences"] == 5  # 12-01 … 12-05, 23:30 Seoul is 14:30 UTC the same day
    assert store.occurrence_on(result.data["id"], date(2026, 12, 5)) is not None


def test_today_week_and_the_agenda_list_all_day_events_first_and_mark_a_series(store: CalendarStore,
                                                                             registry: Registry) -> None:
    from tools.calendar.domain import agenda, week
    from tools.calendar.reminders import agenda_text

    call(registry, "create_event", **WEEKLY_MEETING)
    call(registry, "create_event", title="치과", date="2026-12-07", start_time="08:00", duration_minutes=30)
    call(registry, "create_event", title="엄마 생일", date="2026-12-07", all_day=True)
    lines = agenda(store, "2026-12-07").splitlines()
    assert [line.split("'")[1] for line in lines[1:]] == ["엄마 생일", "치과", "팀 회의"]
    assert "(all day)" in lines[1] and lines[3].endswith("10:00-11:00 (매주 월 10:00)")
    assert agenda_text(store, date(2026, 12, 7)).splitlines()[1:] == [
        "all day 엄마 생일", "08:00-08:30 치과", "10:00-11:00 팀 회의 (매주 월 10:00)"]
    monday = week(store, "2026-12-07", now=NOW).splitlines()
    assert sum("팀 회의" in line for line in monday) == 1  # one occurrence in the week
    assert "매주" in week(store, "2026-12-14", now=NOW)
