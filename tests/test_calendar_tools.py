"""The calendar tools through the registry, as the agent loop calls them, on a real store."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tools.calendar import CALENDAR_TOOL_NAMES, DOMAIN_PROMPT, CalendarStore, build_registry
from agent.tools import Registry, ToolResult
from tests.calendar_calls import call

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=SEOUL)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=SEOUL)


@pytest.fixture
def registry(store: CalendarStore) -> Registry:
    return build_registry(store, now=lambda: NOW)


def fails_without_change(store: CalendarStore, registry: Registry, code: str, name: str, **arguments: Any) -> ToolResult:
    before = store.snapshot()
    result = call(registry, name, **arguments)
    assert not result.ok, result
    assert result.error == code, result
    assert result.message
    assert store.snapshot() == before
    return result


# -- registry shape ----------------------------------------------------------------------------


def test_registry_has_all_tools_and_marks_only_changes_of_existing_data_destructive(registry: Registry) -> None:
    assert tuple(registry.names) == CALENDAR_TOOL_NAMES
    assert {n for n in registry.names if registry.is_destructive(n)} == {"update_event", "delete_event"}


def test_registry_marks_every_tool_that_changes_the_store_as_mutating(registry: Registry) -> None:
    assert {n for n in registry.names if registry.mutates(n)} == {"create_event", "update_event", "delete_event"}
    assert not registry.mutates("no_such_tool")


def test_schemas_are_small_plain_json_without_null_unions(registry: Registry) -> None:
    for schema in registry.schemas():
        text = json.dumps(schema, ensure_ascii=False)
        assert "anyOf" not in text and "$defs" not in text and '"null"' not in text
        # create_event carries the repeat object and all_day, update_event the occurrence and scope
        budget = {"create_event": 2700, "update_event": 2100}.get(schema["function"]["name"], 1800)
        assert len(text) < budget, schema["function"]["name"]
    create = registry.get("create_event").schema()["function"]["parameters"]
    assert create["required"] == ["title", "date"]  # start_time is not needed by an all_day event
    assert "내일" in create["properties"]["date"]["description"]


def test_domain_prompt_mentions_asking_and_has_a_korean_line() -> None:
    assert "ask" in DOMAIN_PROMPT and "물어보세요" in DOMAIN_PROMPT


# -- create_event ------------------------------------------------------------------------------


def test_create_event_stores_local_time_and_attendees(store: CalendarStore, registry: Registry) -> None:
    result = call(registry, "create_event", title="치과", date="2026-12-01", start_time="15:00", duration_minutes=60,
                  attendees=["민수", "Jane"], location="강남역", notes="스케일링")
    assert result.ok, result
    assert result.data == {"id": 1, "title": "치과", "date": "2026-12-01", "weekday": "Tue", "start": "15:00",
                           "end": "16:00", "attendees": ["Jane", "민수"], "location": "강남역", "notes": "스케일링"}
    event = store.get_event(1)
    assert (event.start, event.end, event.tz) == (at(1, 15), at(1, 16), "Asia/Seoul")


def test_create_event_accepts_end_time_and_seconds(store: CalendarStore, registry: Registry) -> None:
    result = call(registry, "create_event", title="Sync", date="2026-12-01", start_time="09:30:00", end_time="10:15")
    assert result.ok and (result.data["start"], result.data["end"]) == ("09:30", "10:15")


def test_create_event_refuses_overlap_and_names_the_conflicting_event(store: CalendarStore, registry: Registry) -> None:
    call(registry, "create_event", title="회의", date="2026-12-01", start_time="15:00", duration_minutes=60)
    result = fails_without_change(store, registry, "conflict", "create_event",
                                  title="점심", date="2026-12-01", start_time="15:30", duration_minutes=30)
    assert "#1" in result.message and "회의" in result.message and "15:00-16:00" in result.message
    assert result.data["conflicts"][0]["id"] == 1


def test_create_event_with_allow_conflict_overlaps(store: CalendarStore, registry: Registry) -> None:
    call(registry, "create_event", title="회의", date="2026-12-01", start_time="15:00", duration_minutes=60)
    result = call(registry, "create_event", title="점심", date="2026-12-01", start_time="15:30", duration_minutes=30,
                  allow_conflict=True)
    assert result.ok and len(store.all_events()) == 2


def test_back_to_back_events_do_not_conflict(registry: Registry) -> None:
    assert call(registry, "create_event", title="A", date="2026-12-01", start_time="09:00", end_time="10:00").ok
    assert call(registry, "create_event", title="B", date="2026-12-01", start_time="10:00", end_time="11:00").ok


def test_create_event_may_cross_midnight_with_a_duration(registry: Registry) -> None:
    result = call(registry, "create_event", title="야간 작업", date="2026-12-01", start_time="23:00", duration_minutes=120)
    assert result.ok and result.data["end"] == "01:00" and result.data["end_date"] == "2026-12-02"


@pytest.mark.parametrize("bad", ["3pm", "15시", "3:00", "25:00", "15:60", "1500", "오후 3시", ""])
def test_ambiguous_or_malformed_times_are_rejected_with_the_expected_form(store, registry, bad: str) -> None:
    result = fails_without_change(store, registry, "invalid_arguments", "create_event",
                                  title="x", date="2026-12-01", start_time=bad, duration_minutes=30)
    assert "HH:MM" in result.message


@pytest.mark.parametrize("bad", ["tomorrow", "내일", "12/01", "2026-12-1", "2026-13-01", "2026-02-30", "20261201"])
def test_ambiguous_or_malformed_dates_are_rejected_with_the_expected_form(store, registry, bad: str) -> None:
    result = fails_without_change(store, registry, "invalid_arguments", "create_event",
                                  title="x", date=bad, start_time="10:00", duration_minutes=30)
    assert "YYYY-MM-DD" in result.message


@pytest.mark.parametrize(
    "extra, words",
    [
        ({}, "duration_minutes or end_time"),
        ({"duration_minutes": 30, "end_time": "11:00"}, "not both"),
        ({"end_time": "09:00"}, "after start_time"),
        ({"end_time": "10:00"}, "after start_time"),
        ({"duration_minutes": 0}, "duration_minutes"),
        ({"duration_minutes": -30}, "duration_minutes"),
        ({"duration_minutes": 1441}, "duration_minutes"),
    ],
)
def test_bad_lengths_are_invalid_arguments(store, registry, extra: dict[str, Any], words: str) -> None:
    result = fails_without_change(store, registry, "invalid_arguments", "create_event",
                                  title="x", date="2026-12-01", start_time="10:00", **extra)
    assert words in result.message


def test_empty_title_missing_fields_and_unknown_fields_are_invalid(store, registry) -> None:
    fails_without_change(store, registry, "invalid_arguments", "create_event",
                         title="  ", date="2026-12-01", start_time="10:00", duration_minutes=30)
    result = fails_without_change(store, registry, "invalid_arguments", "create_event", title="x", duration_minutes=30)
    assert "date" in result.message
    result = fails_without_change(store, registry, "invalid_arguments", "create_event", title="x", date="2026-12-01",
                                  duration_minutes=30)
    assert "start_time" in result.message and "all_day" in result.message
    result = fails_without_change(store, registry, "invalid_arguments", "create_event",
                                  title="x", date="2026-12-01", start_time="10:00", duration_minutes=30, priority="high")
    assert "priority" in result.message


# -- search_events -----------------------------------------------------------------------------


@pytest.fixture
def three_events(registry: Registry) -> Registry:
    call(registry, "create_event", title="치과", date="2026-12-01", start_time="15:00", duration_minutes=60)
    call(registry, "create_event", title="Team sync", date="2026-12-02", start_time="10:00", duration_minutes=30, attendees=["민수"])
    call(registry, "create_event", title="저녁", date="2026-12-05", start_time="19:00", duration_minutes=90, location="을지로")
    return registry


def test_search_by_day_returns_that_days_events(three_events: Registry) -> None:
    result = call(three_events, "search_events", date="2026-12-02")
    assert result.ok and [e["title"] for e in result.data["events"]] == ["Team sync"]
    assert result.data["events"][0]["attendees"] == ["민수"]


def test_search_by_inclusive_range(three_events: Registry) -> None:
    result = call(three_events, "search_events", start_date="2026-12-01", end_date="2026-12-02")
    assert [e["id"] for e in result.data["events"]] == [1, 2] and result.data["count"] == 2


def test_search_by_query_alone_searches_everything(three_events: Registry) -> None:
    assert [e["title"] for e in call(three_events, "search_events", query="을지로").data["events"]] == ["저녁"]
    assert [e["title"] for e in call(three_events, "search_events", query="TEAM").data["events"]] == ["Team sync"]


def test_search_with_nothing_found_is_an_empty_success(three_events: Registry) -> None:
    result = call(three_events, "search_events", date="2026-12-03")
    assert result.ok and result.data == {"count": 0, "events": []}


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({}, "give date"),
        ({"date": "2026-12-01", "start_date": "2026-12-01", "end_date": "2026-12-02"}, "not both"),
        ({"start_date": "2026-12-01"}, "together"),
        ({"start_date": "2026-12-03", "end_date": "2026-12-01"}, "before start_date"),
        ({"start_date": "2026-01-01", "end_date": "2026-12-31"}, "too long"),
    ],
)
def test_search_period_errors_say_what_to_give(store, three_events: Registry, arguments, words: str) -> None:
    result = fails_without_change(store, three_events, "invalid_arguments", "search_events", **arguments)
    assert words in result.message


# -- update_event ------------------------------------------------------------------------------


def test_update_moves_time_keeping_length(store: CalendarStore, three_events: Registry) -> None:
    result = call(three_events, "update_event", event_id=1, start_time="10:00")
    assert result.ok and (result.data["start"], result.data["end"]) == ("10:00", "11:00")
    assert store.get_event(1).start == at(1, 10)


def test_update_date_only_keeps_the_time(store: CalendarStore, three_events: Registry) -> None:
    assert call(three_events, "update_event", event_id=1, date="2026-12-03").ok
    assert (store.get_event(1).start, store.get_event(1).end) == (at(3, 15), at(3, 16))


def test_update_fields_and_clear_location(store: CalendarStore, three_events: Registry) -> None:
    assert call(three_events, "update_event", event_id=3, title="가족 저녁", location="", attendees=["엄마", "아빠"], end_time="21:00").ok
    event = store.get_event(3)
    assert (event.title, event.location, event.attendees, event.end) == ("가족 저녁", None, ("아빠", "엄마"), at(5, 21))


def test_update_unknown_id_is_not_found(store, three_events: Registry) -> None:
    result = fails_without_change(store, three_events, "not_found", "update_event", event_id=42, title="x")
    assert "search_events" in result.message


def test_update_into_another_event_conflicts_unless_allowed(store, three_events: Registry) -> None:
    result = fails_without_change(store, three_events, "conflict", "update_event",
                                  event_id=2, date="2026-12-01", start_time="15:15")
    assert "치과" in result.message
    assert call(three_events, "update_event", event_id=2, date="2026-12-01", start_time="15:15", allow_conflict=True).ok


def test_update_does_not_conflict_with_itself(three_events: Registry) -> None:
    assert call(three_events, "update_event", event_id=1, start_time="15:30").ok


def test_update_end_before_start_is_invalid(store, three_events: Registry) -> None:
    fails_without_change(store, three_events, "invalid_arguments", "update_event", event_id=1, end_time="14:00")


def test_update_with_nothing_to_change_is_invalid(store, three_events: Registry) -> None:
    result = fails_without_change(store, three_events, "invalid_arguments", "update_event", event_id=1)
    assert "nothing to change" in result.message


def test_update_description_states_the_exact_change(three_events: Registry) -> None:
    args = three_events.validate("update_event", {"event_id": 1, "start_time": "10:00", "location": "강남역"})
    text = three_events.describe("update_event", args)
    assert text == "Change #1 '치과' Tue 2026-12-01 15:00-16:00: time → Tue 2026-12-01 10:00-11:00; location → '강남역'"


def test_update_description_of_missing_event_says_so(three_events: Registry) -> None:
    args = three_events.validate("update_event", {"event_id": 9, "title": "x"})
    assert "no such event" in three_events.describe("update_event", args)


# -- delete_event ------------------------------------------------------------------------------


def test_delete_removes_the_event_and_reports_it(store: CalendarStore, three_events: Registry) -> None:
    result = call(three_events, "delete_event", event_id=2)
    assert result.ok and result.data["deleted"]["title"] == "Team sync"
    assert store.get_event(2) is None and len(store.all_events()) == 2


def test_delete_unknown_id_is_not_found(store, three_events: Registry) -> None:
    fails_without_change(store, three_events, "not_found", "delete_event", event_id=99)


def test_delete_description_names_title_time_and_people(three_events: Registry) -> None:
    args = three_events.validate("delete_event", {"event_id": 2})
    assert three_events.describe("delete_event", args) == "Delete #2 'Team sync' Wed 2026-12-02 10:00-10:30 with 민수"


# -- find_free_slots ---------------------------------------------------------------------------


def slots(result: ToolResult) -> list[tuple[str, str, str]]:
    assert result.ok, result
    return [(s["date"], s["start"], s["end"]) for s in result.data["slots"]]


def test_free_slots_are_the_gaps_between_events_in_working_hours(three_events: Registry) -> None:
    result = call(three_events, "find_free_slots", date="2026-12-01", duration_minutes=60)
    assert slots(result) == [("2026-12-01", "09:00", "15:00"), ("2026-12-01", "16:00", "18:00")]
    assert result.data["slots"][0]["minutes"] == 360


def test_free_slots_skip_gaps_shorter_than_the_duration(registry: Registry) -> None:
    call(registry, "create_event", title="A", date="2026-12-01", start_time="09:30", end_time="17:00")
    assert slots(call(registry, "find_free_slots", date="2026-12-01", duration_minutes=45)) == [("2026-12-01", "17:00", "18:00")]


def test_free_slots_respect_custom_working_hours_and_ranges(three_events: Registry) -> None:
    result = call(three_events, "find_free_slots", start_date="2026-12-01", end_date="2026-12-02", duration_minutes=30,
                  working_hours_start="08:00", working_hours_end="12:00")
    assert slots(result) == [("2026-12-01", "08:00", "12:00"), ("2026-12-02", "08:00", "10:00"), ("2026-12-02", "10:30", "12:00")]


def test_free_slots_never_offer_the_past(store: CalendarStore) -> None:
    registry = build_registry(store, now=lambda: at(1, 13, 20))
    assert slots(call(registry, "find_free_slots", date="2026-12-01", duration_minutes=30)) == [("2026-12-01", "13:20", "18:00")]
    assert slots(call(registry, "find_free_slots", date="2026-11-30", duration_minutes=30)) == []


def test_free_slots_bad_working_hours_and_duration_are_invalid(store, registry: Registry) -> None:
    fails_without_change(store, registry, "invalid_arguments", "find_free_slots", date="2026-12-01", duration_minutes=30,
                         working_hours_start="18:00", working_hours_end="09:00")
    fails_without_change(store, registry, "invalid_arguments", "find_free_slots", date="2026-12-01", duration_minutes=0)
    fails_without_change(store, registry, "invalid_arguments", "find_free_slots", duration_minutes=30)


# -- find_common_free_time ---------------------------------------------------------------------


def test_common_free_time_avoids_everyones_busy_times_and_my_events(store: CalendarStore, registry: Registry) -> None:
    store.add_busy("민수", at(1, 9), at(1, 11), "수업")
    store.add_busy("지영", at(1, 13), at(1, 14))
    store.add_busy("철수", at(1, 9), at(1, 18))  # not asked about: must not matter
    call(registry, "create_event", title="내 일정", date="2026-12-01", start_time="16:00", duration_minutes=60)
    result = call(registry, "find_common_free_time", attendees=["민수", "지영"], date="2026-12-01", duration_minutes=60)
    assert slots(result) == [("2026-12-01", "11:00", "13:00"), ("2026-12-01", "14:00", "16:00"), ("2026-12-01", "17:00", "18:00")]
    assert result.data["attendees"] == ["민수", "지영"]


def test_common_free_time_counts_events_an_attendee_attends(store: CalendarStore, registry: Registry) -> None:
    store.add_busy("민수", at(2, 9), at(2, 9, 30))
    call(registry, "create_event", title="점심", date="2026-12-01", start_time="12:00", duration_minutes=60, attendees=["민수"])
    result = call(registry, "find_common_free_time", attendees=["민수"], date="2026-12-01", duration_minutes=30)
    assert slots(result) == [("2026-12-01", "09:00", "12:00"), ("2026-12-01", "13:00", "18:00")]


def test_common_free_time_with_unknown_person_is_not_found(store: CalendarStore, registry: Registry) -> None:
    store.ensure_person("민수")
    result = fails_without_change(store, registry, "not_found", "find_common_free_time",
                                  attendees=["민수", "Bob"], date="2026-12-01", duration_minutes=30)
    assert "Bob" in result.message and "민수" in result.message


def test_common_free_time_needs_at_least_one_attendee(store, registry: Registry) -> None:
    fails_without_change(store, registry, "invalid_arguments", "find_common_free_time",
                         attendees=[], date="2026-12-01", duration_minutes=30)
