"""What every calendar scenario template draws on: the seeded context (``_Ctx``: a day, a title,
unrelated events) and the words that say days, times and durations in English and Korean.

Kept apart from the templates (``single_templates``, ``series_templates``) so the drills, which
make their own scenarios, say a day or a time exactly as the templates do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from tools.calendar.lab.scenario_state import at, event_state

WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WEEKDAYS_KO = ("월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일")
_MONTHS_EN = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December")
TITLES = {
    "en": ("Dentist", "Team sync", "Haircut", "Yoga class", "Project review", "Coffee with Mina",
           "Car service", "Piano lesson", "Doctor visit", "Budget meeting"),
    "ko": ("치과", "팀 회의", "미용실", "요가 수업", "프로젝트 리뷰", "민아랑 커피", "자동차 정비",
           "피아노 레슨", "병원 예약", "예산 회의"),
}
PEOPLE = {"en": ("Jane", "Tom", "Alex", "Sara", "Ben"), "ko": ("민수", "지영", "서연", "준호", "하은")}
_DURATIONS_EN = {30: "30 minutes", 60: "an hour", 90: "an hour and a half", 120: "two hours"}
_DURATIONS_KO = {30: "30분", 60: "1시간", 90: "1시간 반", 120: "2시간"}


# -- words ------------------------------------------------------------------------------------


def weekday_words(day: date, lang: str) -> str:
    return (WEEKDAYS_EN if lang == "en" else WEEKDAYS_KO)[day.weekday()]


def month_day_words(day: date, lang: str) -> str:
    return f"{_MONTHS_EN[day.month - 1]} {day.day}" if lang == "en" else f"{day.month}월 {day.day}일"


def occurrence_words(day: date, lang: str) -> str:
    """One occurrence of a series, by weekday and date: "on Friday December 11", "12월 11일 금요일"."""
    if lang == "en":
        return f"on {weekday_words(day, lang)} {month_day_words(day, lang)}"
    return f"{month_day_words(day, lang)} {weekday_words(day, lang)}"


def day_words(kind: str, day: date, lang: str) -> str:
    if kind == "tomorrow":
        return "tomorrow" if lang == "en" else "내일"
    if kind == "day_after":
        return "the day after tomorrow" if lang == "en" else "모레"
    if kind == "next_weekday":
        return f"next {weekday_words(day, lang)}" if lang == "en" else f"다음 주 {weekday_words(day, lang)}"
    return f"on {month_day_words(day, lang)}" if lang == "en" else month_day_words(day, lang)


def time_words(moment: time, lang: str, clock24: bool = False) -> str:
    h, m = moment.hour, moment.minute
    if lang == "en":
        if clock24:
            return f"{h:02d}:{m:02d}"
        suffix = "am" if h < 12 else "pm"
        hour12 = h if h <= 12 else h - 12
        return f"{hour12}{':30' if m else ''}{suffix}"
    part = "오전" if h < 12 else ("낮" if h == 12 else "오후")
    hour12 = h if h <= 12 else h - 12
    return f"{part} {hour12}시{' 반' if m else ''}"


def duration_words(minutes: int, lang: str) -> str:
    return (_DURATIONS_EN if lang == "en" else _DURATIONS_KO)[minutes]


def hhmm(moment: time) -> str:
    return f"{moment.hour:02d}:{moment.minute:02d}"


def first_free(day: date, busy: list[tuple[time, int]], minutes: int, earliest: time = time(9)) -> time:
    """Earliest start from ``earliest`` (09:00 unless given) to 18:00, the slot finders' default
    working hours, where nothing in ``busy`` overlaps ``minutes`` (the generator's own arithmetic)."""
    spans = sorted((at(day, s), at(day, s) + timedelta(minutes=m)) for s, m in busy)
    start = at(day, earliest)
    for s, e in spans:
        if s - start >= timedelta(minutes=minutes):
            break
        start = max(start, e)
    assert start + timedelta(minutes=minutes) <= at(day, time(18)), "layout leaves no slot"
    return start.time()


# -- one template = one function ----------------------------------------------------------------


@dataclass
class _Ctx:
    """What every template function gets: a seeded random source and the scenario's now."""

    rng: random.Random
    lang: str
    phrasing: int  # 0..7 within the language (tools.calendar.lab.wordings; scenarios says which split)
    now: datetime

    def pick_day(self) -> tuple[str, date]:
        today = self.now.date()
        kind = self.rng.choice(("tomorrow", "day_after", "next_weekday", "date"))
        if kind == "tomorrow":
            return kind, today + timedelta(days=1)
        if kind == "day_after":
            return kind, today + timedelta(days=2)
        if kind == "next_weekday":
            weekday = self.rng.choice((0, 1, 2))
            return kind, today + timedelta(days=(weekday - today.weekday()) % 7 or 7)
        return kind, today + timedelta(days=self.rng.randint(3, 12))

    def title(self) -> str:
        return self.rng.choice(TITLES[self.lang])

    def other_title(self, *avoid: str) -> str:
        return self.rng.choice([t for t in TITLES[self.lang] if t not in avoid])

    def noise(self, day: date, *avoid: str, count: int = 2) -> list[dict[str, Any]]:
        """Unrelated events on other days, so a lookup returns something to read."""
        return [
            event_state(self.other_title(*avoid), day + timedelta(days=offset), time(self.rng.randint(9, 16)), 60)
            for offset in self.rng.sample((1, 2, 3, -1), count)
            if day + timedelta(days=offset) > self.now.date()
        ]


Built = dict[str, Any]  # the template-specific fields of a Scenario
