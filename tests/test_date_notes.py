"""Date notes (tools.calendar.date_notes): a day named relative to today reaches the model as its date."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent.eval.suite import Scenario
from agent.prompt import stamp_user_text
from tools.calendar.date_notes import note_days
from tools.calendar.language import CALENDAR_LANGUAGE
from tools.calendar.lab.scenarios import TEMPLATES, generate

THURSDAY = datetime(2026, 12, 3, 9, 0)  # local time, 09:00 on a Thursday


@pytest.mark.parametrize(("text", "noted"), [
    ("Add lunch tomorrow at 3pm (15:00).", "Add lunch tomorrow (2026-12-04) at 3pm (15:00)."),
    ("Book it the day after tomorrow.", "Book it the day after tomorrow (2026-12-05)."),
    ("Book it day after tomorrow", "Book it day after tomorrow (2026-12-05)"),
    ("What do I have today?", "What do I have today (2026-12-03)?"),
    ("Did I miss anything yesterday", "Did I miss anything yesterday (2026-12-02)"),
    ("the day before yesterday", "the day before yesterday (2026-12-01)"),
    ("dinner tonight", "dinner tonight (2026-12-03)"),
    ("Tomorrow works", "Tomorrow (2026-12-04) works"),
    ("Delete my Dentist next Monday.", "Delete my Dentist next Monday (2026-12-07)."),
    ("next Thursday", "next Thursday (2026-12-10)"),
    ("this Saturday", "this Saturday (2026-12-05)"),
    ("this Thursday", "this Thursday (2026-12-03)"),
    ("in 3 days", "in 3 days (2026-12-06)"),
    ("in a week", "in a week (2026-12-10)"),
    ("in two weeks", "in two weeks (2026-12-17)"),
    ("in 2 weeks", "in 2 weeks (2026-12-17)"),
    ("내일 15:00에 치과", "2026-12-04 15:00에 치과"),
    ("모레 팀 회의 잡아줘", "2026-12-05 팀 회의 잡아줘"),
    ("오늘 점심", "2026-12-03 점심"),
    ("어제 뭐 있었어?", "2026-12-02 뭐 있었어?"),
    ("그저께", "2026-12-01"),
    ("그제 회의", "2026-12-01 회의"),
    ("내일은 비어 있어?", "2026-12-04은 비어 있어?"),
    ("내일부터 3일 후", "2026-12-04부터 3일 후"),  # the count is from tomorrow: left to the model
    ("내일3시 치과", "2026-12-04 3시 치과"),  # never glued to a number or a time of day
    ("내일오후3시", "2026-12-04 오후3시"),
    ("this Sunday", "this Sunday (2026-12-06)"),
    ('"오늘의 회고" 일정 내일 추가해줘', '"오늘의 회고" 일정 2026-12-04 추가해줘'),  # a title in quotes is kept
    ("글피에", "2026-12-06에"),
    ("다음 주 화요일에 미용실", "2026-12-08에 미용실"),
    ("다음주 월요일", "2026-12-07"),
    ("담주 금요일", "2026-12-11"),
    ("이번 주 토요일", "2026-12-05"),
    ("이번 주 월요일 회의", "2026-11-30 회의"),
    ("3일 후에 알려줘", "2026-12-06에 알려줘"),
    ("이틀 뒤", "2026-12-05"),
    ("일주일 후", "2026-12-10"),
    ("사흘 뒤", "2026-12-06"),
])
def test_a_day_named_relative_to_today_is_shown_as_its_date(text: str, noted: str) -> None:
    assert note_days(text, THURSDAY) == noted


@pytest.mark.parametrize("text", [
    "next Friday",  # said on a Thursday: tomorrow, or Friday next week?
    "this Monday",  # said on a Thursday: three days ago, or the coming one?
    "on Monday", "every Monday", "Mondays at 7am",  # a bare weekday, a series
    "Tonight at 1am", "tomorrow at 12:30 am", "tomorrow after midnight",  # the night after the day
    "내일 밤 1시", "내일 새벽 3시", "오늘 자정",
    "다음 주 일요일", "이번 주 일요일",  # does the week start on Sunday or Monday?
    "내일모레 보자",  # the day after tomorrow, or "soon"
    "매주 월요일", "월요일에",
    # a month and day needs no counting (noted too, it cost test openings: README)
    "on December 15", "12월 15일 치과", "on January 10", "2027년 2월 3일", "15 December 2027",
    "3일간", "3일 동안",  # lengths, not days
    "12월 15일 뒤에",  # counted from a month and day
    "next Sunday",  # said on a Thursday: in three days, or ten?
    'Delete "Today show prep"',  # a title
    "tomorrow (2026-12-04)", "Tomorrow 2026-12-04", "내일 (2026-12-04)",  # already dated
    "2026-12-04", "12/15",  # written as a date already, or in an order that is not certain
    # counted from another day: the note would read as the whole phrase's date
    "a week from tomorrow", "3 days after tomorrow", "next Monday week", "3 days before December 15",
    "12월 15일 이틀 전", "12월 15일 3일 후", "하루 이틀 뒤에", "내일 다음 날",
    # other words that hold a day word, and idioms
    "그제야 알았어", "그제서야", "오늘날", "어제오늘 일이 아니다", "오늘내일 중으로", "내일배움카드 신청",
    # a year word of its own, a yearly or repeated day, a frequency, an estimate
    "매주 내일", "내일마다", "3 times in a week", "once in a week", "in a day or two", "in 0 days", "0일 후",
    # after-midnight times the time notes would otherwise turn into 01:00
    "내일 오전 1시", "tomorrow at 1 in the morning", "tomorrow night at 1am",
])
def test_a_day_whose_date_is_in_doubt_is_left_as_said(text: str) -> None:
    assert note_days(text, THURSDAY) == text


@pytest.mark.parametrize("day", range(7))
def test_weekdays_of_this_and_next_week_are_counted_in_weeks_from_monday_and_never_on_a_sunday(day: int) -> None:
    now = datetime(2026, 11, 30, 9, 0) + timedelta(days=day)  # Monday 30 November, and the days after it
    monday = date(2026, 11, 30)
    for weekday, (en, ko) in enumerate(zip(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
                                           "월화수목금토")):
        this_week, next_week = monday + timedelta(days=weekday), monday + timedelta(days=7 + weekday)
        said_on_sunday = now.weekday() == 6
        assert note_days(f"다음 주 {ko}요일", now) == (f"다음 주 {ko}요일" if said_on_sunday else next_week.isoformat())
        assert note_days(f"이번 주 {ko}요일", now) == (f"이번 주 {ko}요일" if said_on_sunday else this_week.isoformat())
        ahead_this_week = weekday > now.weekday()
        assert note_days(f"next {en}", now) == (f"next {en}" if said_on_sunday or ahead_this_week
                                                else f"next {en} ({next_week})")
        assert note_days(f"this {en}", now) == (f"this {en}" if said_on_sunday or weekday < now.weekday()
                                                else f"this {en} ({this_week})")


@pytest.mark.parametrize("text", ["tomorrow", "내일", "today", "오늘", "the day after tomorrow", "모레"])
def test_in_the_small_hours_today_and_tomorrow_are_left_as_said(text: str) -> None:
    # At 00:30, "tomorrow" may still mean the day after the evening before.
    assert note_days(text, datetime(2026, 12, 4, 0, 30)) == text
    assert note_days("yesterday", datetime(2026, 12, 4, 0, 30)) == "yesterday (2026-12-03)"
    assert note_days(text, datetime(2026, 12, 4, 5, 0)) != text


def test_days_count_from_the_users_local_day_not_utc() -> None:
    # 08:30 on Monday in Seoul is still Sunday 23:30 UTC: tomorrow is Tuesday there.
    now = datetime(2026, 12, 6, 23, 30, tzinfo=ZoneInfo("UTC"))
    assert stamp_user_text(now, "Asia/Seoul", "dinner tomorrow", date_notes=True, language=CALENDAR_LANGUAGE) == \
        "[08:30] dinner tomorrow (2026-12-08)"
    assert stamp_user_text(now, "Asia/Seoul", "내일 점심", date_notes=True, language=CALENDAR_LANGUAGE) == "[08:30] 2026-12-08 점심"


def test_times_and_days_are_noted_together_and_off_leaves_the_text_alone() -> None:
    now = datetime(2026, 12, 3, 9, 0, tzinfo=ZoneInfo("Asia/Seoul"))
    text = "내일 오후 3시에 치과 예약 추가해줘"
    assert stamp_user_text(now, "Asia/Seoul", text, time_notes=True, date_notes=True, language=CALENDAR_LANGUAGE) == \
        "[09:00] 2026-12-04 15:00에 치과 예약 추가해줘"
    assert stamp_user_text(now, "Asia/Seoul", text, language=CALENDAR_LANGUAGE) == f"[09:00] {text}"
    # Days are noted before times, so an after-midnight time said in words keeps its day unnoted.
    assert stamp_user_text(now, "Asia/Seoul", "내일 새벽 1시에 알람", time_notes=True, date_notes=True, language=CALENDAR_LANGUAGE) == \
        "[09:00] 내일 01:00에 알람"


def _day_of(scenario: Scenario) -> str | None:
    task = scenario.task
    return task.get("date") or (task.get("target") or {}).get("date")


def test_every_generated_opening_that_names_its_day_relatively_is_noted_with_the_scenarios_day() -> None:
    # The generator's own arithmetic (day_words) against this module's, on every phrasing of every template.
    relative = re.compile(r"tomorrow|next [A-Z]|내일|모레|다음 주")
    checked = 0
    for scenario in generate("all", per_template=40):
        day = _day_of(scenario)
        if day is None or not relative.search(scenario.opening) or scenario.template not in TEMPLATES:
            continue
        noted = note_days(scenario.opening, scenario.now_datetime())
        assert day in noted, (scenario.id, scenario.opening, noted)
        assert set(re.findall(r"\d{4}-\d\d-\d\d", noted)) == {day}, (scenario.id, noted)
        checked += 1
    assert checked > 200
