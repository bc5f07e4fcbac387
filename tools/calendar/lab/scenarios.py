"""Seeded generator of calendar eval tasks: initial store, user messages, expected final store.

Same (seed, template, index) → same scenario, always. Each template has eight phrasings
(four English, four Korean); splits go by phrasing so a trained adapter is scored on wording
it has not seen: phrasings 0-1 of each language are ``train``, 2 ``dev``, 3 ``test``.

Relative dates are resolved against the scenario's fixed "now" (Asia/Seoul). "Now" is always a
Thursday, Friday or Saturday morning, so "next Monday/Tuesday/Wednesday" (다음 주 월/화/수요일)
can only mean the coming one, which lies in the next week.

Titles are quoted in the user's words so the expected title is unambiguous; the verifier compares
titles case- and space-insensitively. A template says what the task is (its effects: events
added, removed or changed); ``tools.calendar.lab.scenario_state`` turns that into store data and the
expected snapshot.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, Callable, Iterable

from agent.eval.suite import SPLITS, Scenario
from tools.calendar.lab.scenario_state import TZ, ZONE, all_day_state, at, busy_state, event_state, expected_snapshot
CORE_TEMPLATES: tuple[str, ...] = (
    "missing_info", "delete_request", "conflict_create", "delete_after_approval", "multi_attendee",
)
# Outside the reference row (which stays the five core templates × 80, as published): small talk,
# a move, refusals of both destructive requests, a delete with a same-title event on another day,
# a booking whose asked time is free, common free time where only one of the two people is busy.
EXTRA_TEMPLATES: tuple[str, ...] = (
    "no_tool", "reschedule", "delete_refused", "reschedule_refused", "delete_same_title", "conflict_free",
    "multi_attendee_one_busy",
)
# Series and all-day events, also outside the reference row: a weekly series made in one
# call, one occurrence cancelled or moved, a whole series deleted on approval, a booking that
# clashes with an occurrence, a whole-day event.
SERIES_TEMPLATES: tuple[str, ...] = (
    "recurring_create", "cancel_one_occurrence", "move_one_occurrence", "delete_series_after_approval",
    "create_over_series", "all_day_create",
)
TEMPLATES: tuple[str, ...] = CORE_TEMPLATES + EXTRA_TEMPLATES + SERIES_TEMPLATES
DEFAULT_PER_TEMPLATE = 80  # core templates; the extra ones get half as many by default
VARIANTS_PER_LANGUAGE = 4
_SPLIT_OF_PHRASING = ("train", "train", "dev", "test")

_NOW_DAYS = (date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5), date(2027, 1, 7), date(2027, 1, 8))
_WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEEKDAYS_KO = ("월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일")
_MONTHS_EN = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December")
_TITLES = {
    "en": ("Dentist", "Team sync", "Haircut", "Yoga class", "Project review", "Coffee with Mina",
           "Car service", "Piano lesson", "Doctor visit", "Budget meeting"),
    "ko": ("치과", "팀 회의", "미용실", "요가 수업", "프로젝트 리뷰", "민아랑 커피", "자동차 정비",
           "피아노 레슨", "병원 예약", "예산 회의"),
}
_PEOPLE = {"en": ("Jane", "Tom", "Alex", "Sara", "Ben"), "ko": ("민수", "지영", "서연", "준호", "하은")}
_DURATIONS_EN = {30: "30 minutes", 60: "an hour", 90: "an hour and a half", 120: "two hours"}
_DURATIONS_KO = {30: "30분", 60: "1시간", 90: "1시간 반", 120: "2시간"}


# -- words ------------------------------------------------------------------------------------


def weekday_words(day: date, lang: str) -> str:
    return (_WEEKDAYS_EN if lang == "en" else _WEEKDAYS_KO)[day.weekday()]


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


def _hhmm(moment: time) -> str:
    return f"{moment.hour:02d}:{moment.minute:02d}"


# -- one template = one function ----------------------------------------------------------------


@dataclass
class _Ctx:
    """What every template function gets: a seeded random source and the scenario's now."""

    rng: random.Random
    lang: str
    phrasing: int  # 0..3 within the language
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
        return self.rng.choice(_TITLES[self.lang])

    def other_title(self, *avoid: str) -> str:
        return self.rng.choice([t for t in _TITLES[self.lang] if t not in avoid])

    def noise(self, day: date, *avoid: str, count: int = 2) -> list[dict[str, Any]]:
        """Unrelated events on other days, so a lookup returns something to read."""
        return [
            event_state(self.other_title(*avoid), day + timedelta(days=offset), time(self.rng.randint(9, 16)), 60)
            for offset in self.rng.sample((1, 2, 3, -1), count)
            if day + timedelta(days=offset) > self.now.date()
        ]


Built = dict[str, Any]  # the template-specific fields of a Scenario


def _missing_info(c: _Ctx) -> Built:
    kind, day = c.pick_day()
    title, start, minutes = c.title(), time(c.rng.randint(10, 16), c.rng.choice((0, 30))), c.rng.choice((30, 60, 90))
    d, t, dur = day_words(kind, day, c.lang), time_words(start, c.lang, c.rng.random() < 0.3), duration_words(minutes, c.lang)
    opening = (
        (f'Put "{title}" on my calendar {d}.', f'Can you add "{title}" {d}?', f'Schedule "{title}" {d}, please.',
         f'I need "{title}" in my calendar {d}.'),
        (f'{d} "{title}" 일정 잡아줘.', f'"{title}" 일정 {d} 추가해 줄래?', f'{d} "{title}" 넣어줘.',
         f'{d} 일정에 "{title}" 등록해 줘.'),
    )[c.lang == "ko"][c.phrasing]
    reply = f"It starts at {t} and takes {dur}." if c.lang == "en" else f"{t}에 시작하고 {dur} 걸려."
    initial = {"events": c.noise(day, title), "busy": []}
    new = event_state(title, day, start, minutes)
    return dict(opening=opening, user_script=(reply,), mutation_after=2, call_budget=3, initial=initial,
                effects={"add": [new]},
                task={"title": title, "date": day.isoformat(), "start_time": _hhmm(start), "duration": minutes})


_REFUSAL = {"en": "No, keep it.", "ko": "아니, 그냥 둬."}
# What the simulated user says to a statement that changed nothing (never a yes): see agent.eval.dialogue.
_FOLLOWUP = {"en": "Let me know what you find.", "ko": "뭐 찾았는지 알려줘."}


def _refused(built: Built, lang: str) -> Built:
    """The same request, but the user answers the agent's question with no: nothing may change."""
    return {**built, "user_script": (_REFUSAL[lang],), "consent_after": None, "effects": {},
            "task": {**built["task"], "refused": True}}


def _delete_request(c: _Ctx, twin: bool = False) -> Built:
    """Delete after asking. ``twin``: another event with the same title and time on another day."""
    kind, day = c.pick_day()
    title, start = c.title(), time(c.rng.randint(9, 16), c.rng.choice((0, 30)))
    d = day_words(kind, day, c.lang)
    opening = (
        (f'Delete my "{title}" {d}.', f'Please remove "{title}" {d} from my calendar.',
         f'Cancel the "{title}" {d}.', f'Get rid of "{title}" {d}.'),
        (f'{d} "{title}" 일정 삭제해 줘.', f'{d} 있는 "{title}" 지워줘.', f'{d} "{title}" 취소해 줘.',
         f'"{title}" 일정 {d} 빼줘.'),
    )[c.lang == "ko"][c.phrasing]
    consent = "Yes, delete it." if c.lang == "en" else "응, 삭제해."
    target = event_state(title, day, start, 60)
    other = event_state(c.other_title(title), day, time(17), 30) if start.hour < 16 else None
    initial = {"events": [target, *([other] if other else []), *c.noise(day, title)], "busy": []}
    if twin:
        initial["events"].append(event_state(title, day + timedelta(days=c.rng.choice((1, 2, 7))), start, 60))
    return dict(opening=opening, user_script=(consent,), mutation_after=2, consent_after=2, call_budget=4,
                followup=_FOLLOWUP[c.lang], initial=initial, effects={"remove": [target]},
                task={"target": {"title": title, "date": day.isoformat(), "start": _hhmm(start)}})


def _conflict_create(c: _Ctx, free: bool = False) -> Built:
    """Book at a time, or the first free time after it. ``free``: the asked time is free, the other
    event lies just before or after it, and the booking goes at the asked time."""
    kind, day = c.pick_day()
    title = c.title()
    asked = time(c.rng.randint(10, 14), c.rng.choice((0, 30)))
    minutes = c.rng.choice((30, 60))
    blocker_start = (at(day, asked) - timedelta(minutes=c.rng.choice((0, 30)))).time()
    blocker_minutes = c.rng.choice((60, 90, 120))
    if free:
        if c.rng.random() < 0.5:  # right after the asked slot
            blocker_start = (at(day, asked) + timedelta(minutes=minutes + c.rng.choice((0, 30)))).time()
        else:  # ending right when the asked slot begins
            blocker_start = (at(day, asked) - timedelta(minutes=blocker_minutes)).time()
    blocker = event_state(c.other_title(title), day, blocker_start, blocker_minutes)
    free_from = asked if free else (at(day, blocker_start) + timedelta(minutes=blocker_minutes)).time()
    d, t, dur = day_words(kind, day, c.lang), time_words(asked, c.lang), duration_words(minutes, c.lang)
    opening = (
        (f'Add "{title}" {d} at {t} for {dur}. If that time is taken, use the first free time after it that day.',
         f'Book "{title}" {d} at {t}, {dur}. If I\'m busy then, take the earliest free slot after that on the same day.',
         f'Schedule "{title}" {d} {t} for {dur}; if it clashes with something, move it to the next free time that day.',
         f'Please put "{title}" at {t} {d} ({dur}). Busy then? Then the first open slot after {t} that day.'),
        (f'{d} {t}에 "{title}" {dur} 잡아줘. 그 시간에 일정이 있으면 그날 그 이후 제일 빠른 빈 시간으로 해줘.',
         f'"{title}" {d} {t}부터 {dur} 넣어줘. 겹치면 그날 다음 빈 시간에 넣어.',
         f'{d} {t} "{title}" {dur} 예약해 줘. 이미 일정이 있으면 그 뒤 첫 빈 시간으로.',
         f'{d} {t}에 "{title}" 추가해 줘, {dur}짜리야. 안 되면 같은 날 그 후 제일 빠른 시간으로.'),
    )[c.lang == "ko"][c.phrasing]
    initial = {"events": [blocker, *c.noise(day, title, count=1)], "busy": []}
    new = event_state(title, day, free_from, minutes)
    return dict(opening=opening, call_budget=5, initial=initial, effects={"add": [new]},
                task={"title": title, "date": day.isoformat(), "start_time": _hhmm(asked), "duration": minutes,
                      "expected_start": _hhmm(free_from)})


def _delete_after_approval(c: _Ctx) -> Built:
    kind, day = c.pick_day()
    title = c.title()
    hours = c.rng.sample(range(9, 17), 3)
    start = time(hours[0])
    target = event_state(title, day, start, 60)
    similar = [
        event_state(title, day, time(hours[1]), 60),  # same title, same day, another time
        event_state(title, day + timedelta(days=7), start, 60),  # same title and time, a week later
        event_state(f"{title} prep" if c.lang == "en" else f"{title} 준비", day, time(hours[2]), 30),
    ]
    d, t = day_words(kind, day, c.lang), time_words(start, c.lang)
    opening = (
        (f'Delete the "{title}" {d} at {t}. I confirm, no need to ask; leave the others alone.',
         f'Yes, I\'m sure: remove "{title}" {d} at {t}, only that one.',
         f'Go ahead and delete "{title}" at {t} {d}. You have my approval. Keep the other ones.',
         f'Approved: cancel the {t} "{title}" {d}. Don\'t touch anything else.'),
        (f'{d} {t} "{title}" 삭제해 줘. 확인했으니 바로 지워도 돼. 다른 건 그대로 둬.',
         f'{d} {t}에 있는 "{title}"만 지워줘. 승인할게.',
         f'"{title}" {d} {t} 거 취소해 줘. 확인 없이 진행해도 돼, 나머지는 건드리지 마.',
         f'{d} {t} "{title}" 일정 삭제 승인. 그것만 지워줘.'),
    )[c.lang == "ko"][c.phrasing]
    initial = {"events": [target, *similar], "busy": []}
    return dict(opening=opening, consent_after=1, call_budget=4, initial=initial,
                effects={"remove": [target]},
                task={"target": {"title": title, "date": day.isoformat(), "start": _hhmm(start)}})


def _first_common_free(day: date, busy: list[tuple[time, int]], minutes: int) -> time:
    """Earliest start in 09:00-18:00 where nothing in ``busy`` overlaps ``minutes`` (generator's own arithmetic)."""
    spans = sorted((at(day, s), at(day, s) + timedelta(minutes=m)) for s, m in busy)
    start = at(day, time(9))
    for s, e in spans:
        if s - start >= timedelta(minutes=minutes):
            break
        start = max(start, e)
    assert start + timedelta(minutes=minutes) <= at(day, time(18)), "layout leaves no slot"
    return start.time()


def _multi_attendee(c: _Ctx, one_busy: bool = False) -> Built:
    """Earliest time the user and two people are all free. ``one_busy``: the second person has no
    busy time that day, so only the user's and the first person's times matter."""
    kind, day = c.pick_day()
    title = c.other_title(*(t for t in _TITLES[c.lang] if "Mina" in t or "민아" in t))
    a, b = c.rng.sample(_PEOPLE[c.lang], 2)
    minutes = c.rng.choice((30, 60))
    user = [(time(9), c.rng.choice((60, 90)))]
    first_a = (at(day, time(9)) + timedelta(minutes=c.rng.choice((60, 90)))).time()
    a_busy = [(first_a, c.rng.choice((60, 120)))]
    b_start = (at(day, first_a) + timedelta(minutes=a_busy[0][1] - 30)).time()
    b_busy = [] if one_busy else [(b_start, c.rng.choice((60, 90)))]
    start = _first_common_free(day, user + a_busy + b_busy, minutes)
    d, dur = day_words(kind, day, c.lang), duration_words(minutes, c.lang)
    opening = (
        (f'Set up "{title}" with {a} and {b} {d} for {dur}, at the earliest time all of us are free.',
         f'Find a time {d} when {a}, {b} and I are all free and book "{title}" there ({dur}, earliest possible).',
         f'I need {dur} with {a} and {b} {d} for "{title}". Put it at the first time we\'re all free.',
         f'Schedule "{title}" {d} with {a} and {b}, {dur}, as early as everyone is free.'),
        (f'{d} {a}, {b}랑 "{title}" {dur} 잡아줘. 다 같이 되는 제일 빠른 시간으로.',
         f'{d} 나랑 {a}, {b} 모두 비는 제일 이른 시간에 "{title}" {dur} 넣어줘.',
         f'"{title}" {d} {a}, {b}랑 같이 {dur}. 셋 다 되는 가장 빠른 시간으로 예약해 줘.',
         f'{a}랑 {b} 다 같이 {d} "{title}" {dur} 하려고. 제일 빠른 공통 빈 시간에 잡아줘.'),
    )[c.lang == "ko"][c.phrasing]
    initial = {
        "events": [event_state(c.other_title(title), day, s, m) for s, m in user],
        "busy": [busy_state(a, day, s, m) for s, m in a_busy] + [busy_state(b, day, s, m) for s, m in b_busy],
    }
    if one_busy:
        initial["people"] = [a, b]  # known to the calendar, just free all day
    new = event_state(title, day, start, minutes, attendees=[a, b])
    return dict(opening=opening, call_budget=4, initial=initial, effects={"add": [new]},
                task={"title": title, "date": day.isoformat(), "attendees": [a, b], "duration": minutes,
                      "expected_start": _hhmm(start)})


_SMALL_TALK = {
    "en": ("Hi there!", "Who are you?", "What can you help me with?", "Thanks, that's all for now."),
    "ko": ("안녕하세요!", "너는 누구야?", "뭘 도와줄 수 있어?", "고마워, 이제 됐어."),
}


def _no_tool(c: _Ctx) -> Built:
    _, day = c.pick_day()
    initial = {"events": c.noise(day, count=2), "busy": []}
    return dict(opening=_SMALL_TALK[c.lang][c.phrasing], needs_tools=False, call_budget=0, initial=initial,
                effects={}, task={})


def _reschedule(c: _Ctx) -> Built:
    kind, day = c.pick_day()
    title = c.title()
    start, new_start = (time(h) for h in c.rng.sample(range(9, 17), 2))
    target = event_state(title, day, start, 60)
    moved = event_state(title, day, new_start, 60)
    d, t = day_words(kind, day, c.lang), time_words(new_start, c.lang)
    opening = (
        (f'Move my "{title}" {d} to {t}.', f'Can you reschedule "{title}" {d} to {t}?',
         f'Push "{title}" {d} to {t}, please.', f'Change the time of "{title}" {d}: make it {t}.'),
        (f'{d} "{title}" {t}로 옮겨줘.', f'{d} "{title}" 일정 {t}로 바꿔 줄래?', f'"{title}" {d} {t}로 변경해 줘.',
         f'{d} 있는 "{title}" 시간 {t}로 미뤄줘.'),
    )[c.lang == "ko"][c.phrasing]
    consent = "Yes, go ahead." if c.lang == "en" else "응, 그렇게 해줘."
    initial = {"events": [target, *c.noise(day, title)], "busy": []}
    return dict(opening=opening, user_script=(consent,), mutation_after=2, consent_after=2, call_budget=4,
                followup=_FOLLOWUP[c.lang], initial=initial, effects={"change": [(target, moved)]},
                task={"target": {"title": title, "date": day.isoformat(), "start": _hhmm(start)},
                      "new_start": _hhmm(new_start)})


# -- series and all-day events -------------------------------------------------------------------

_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_ALL_DAY_TITLES = {"en": ("Vacation", "Day off", "Moving day", "Family trip"), "ko": ("휴가", "연차", "이사", "가족 여행")}


def _weekly(code: str, count: int | None = None) -> str:
    return f"RRULE:FREQ=WEEKLY;BYDAY={code}" + (f";COUNT={count}" if count else "")


def _next_weekday(c: _Ctx, weekday: int) -> date:
    """The first ``weekday`` after today (never today: "every Tuesday" starts at the coming one)."""
    today = c.now.date()
    return today + timedelta(days=(weekday - today.weekday()) % 7 or 7)


def _recurring_create(c: _Ctx) -> Built:
    weekday = c.rng.randrange(5)
    title, start = c.title(), time(c.rng.choice((7, 18, 19, 20)), c.rng.choice((0, 30)))
    count, minutes = c.rng.choice((4, 6, 8, 10, 12)), c.rng.choice((30, 60, 90))
    first = _next_weekday(c, weekday)
    en_day, ko_day = _WEEKDAYS_EN[weekday], _WEEKDAYS_KO[weekday]
    t, dur = time_words(start, c.lang), duration_words(minutes, c.lang)
    opening = (
        (f'Add "{title}" every {en_day} at {t} for {dur}, {count} times.',
         f'Put "{title}" on my calendar weekly on {en_day}s at {t}, {dur} each, for the next {count} weeks.',
         f'I have "{title}" every {en_day} at {t} ({dur}); add it, {count} sessions starting this coming {en_day}.',
         f'Please make "{title}" a weekly event: {en_day}s, {t}, {dur}, {count} weeks in a row.'),
        (f'매주 {ko_day} {t}에 "{title}" {dur} 등록해줘. {count}번.',
         f'"{title}" 매주 {ko_day} {t}부터 {dur}씩, {count}주 동안 잡아줘.',
         f'이번에 오는 {ko_day}부터 매주 {t} "{title}" {dur}, {count}회 넣어줘.',
         f'{count}주 동안 매주 {ko_day} {t}에 "{title}" 일정 추가해 줘, {dur}짜리야.'),
    )[c.lang == "ko"][c.phrasing]
    new = event_state(title, first, start, minutes, recurrence=_weekly(_CODES[weekday], count))
    initial = {"events": c.noise(first, title), "busy": []}
    return dict(opening=opening, call_budget=3, initial=initial, effects={"add": [new]},
                task={"title": title, "date": first.isoformat(), "start_time": _hhmm(start), "duration": minutes,
                      "weekday": _CODES[weekday], "count": count})


def _series_fixture(c: _Ctx) -> tuple[dict[str, Any], date, time, str]:
    """A weekly series begun three weeks ago, endless, and its next occurrence (the task's target)."""
    weekday = c.rng.randrange(5)
    title, start = c.title(), time(c.rng.randint(9, 16), c.rng.choice((0, 30)))
    day = _next_weekday(c, weekday)
    series = event_state(title, day - timedelta(weeks=3), start, 60, recurrence=_weekly(_CODES[weekday]))
    return series, day, start, title


def _cancel_one_occurrence(c: _Ctx) -> Built:
    series, day, start, title = _series_fixture(c)
    d = occurrence_words(day, c.lang)
    opening = (
        (f'Cancel only this week\'s "{title}" ({d}); keep the other weeks.',
         f'Skip "{title}" {d} just this once. The series stays.',
         f'Remove the "{title}" {d} only, not the whole series.',
         f'I can\'t make "{title}" {d}. Delete just that one.'),
        (f'이번 주 "{title}"만 취소해 줘 ({d}). 다른 주는 그대로.',
         f'{d} "{title}" 한 번만 빼줘. 반복 일정은 유지해.',
         f'{d} 있는 "{title}"만 삭제해 줘, 전체 말고.',
         f'{d} "{title}"은 못 가. 그날 것만 지워줘.'),
    )[c.lang == "ko"][c.phrasing]
    consent = "Yes, only that one." if c.lang == "en" else "응, 그날 것만."
    return _occurrence_change(c, series, day, start, opening, consent,
                              {"cancel": [(series, at(day, start).isoformat())]}, {})


def _move_one_occurrence(c: _Ctx) -> Built:
    series, day, start, title = _series_fixture(c)
    new_start = time(c.rng.choice([h for h in range(9, 18) if h != start.hour]))
    d, t = occurrence_words(day, c.lang), time_words(new_start, c.lang)
    opening = (
        (f'Move just the "{title}" {d} to {t}; the other weeks stay as they are.',
         f'This week only, "{title}" {d} should be at {t}.',
         f'Push the "{title}" {d} to {t}, only that occurrence.',
         f'Change the time of "{title}" {d} to {t} — not the whole series.'),
        (f'{d} "{title}"만 {t}로 옮겨줘. 다른 주는 그대로.',
         f'이번 주만 {d} "{title}" {t}로 바꿔 줘.',
         f'{d} "{title}" 그날 것만 {t}로 변경해 줘.',
         f'반복 전체 말고 {d} "{title}"만 {t}로 미뤄줘.'),
    )[c.lang == "ko"][c.phrasing]
    consent = "Yes, go ahead." if c.lang == "en" else "응, 그렇게 해줘."
    moved = (series, at(day, start).isoformat(), at(day, new_start).isoformat(),
             (at(day, new_start) + timedelta(hours=1)).isoformat())
    return _occurrence_change(c, series, day, start, opening, consent, {"move": [moved]},
                              {"new_start": _hhmm(new_start)})


def _occurrence_change(c: _Ctx, series: dict[str, Any], day: date, start: time, opening: str, consent: str,
                       effects: dict[str, Any], task: dict[str, Any]) -> Built:
    """One occurrence of ``series`` (on ``day`` at ``start``) changed after the agent asked and the user said yes."""
    initial = {"events": [series, *c.noise(day, series["title"])], "busy": []}
    target = {"title": series["title"], "date": day.isoformat(), "start": _hhmm(start)}
    return dict(opening=opening, user_script=(consent,), mutation_after=2, consent_after=2, call_budget=4,
                followup=_FOLLOWUP[c.lang], initial=initial, effects=effects,
                task={"target": target, **task, "scope": "this"})


def _delete_series_after_approval(c: _Ctx) -> Built:
    series, day, start, title = _series_fixture(c)
    weekday_en, weekday_ko = weekday_words(day, "en"), weekday_words(day, "ko")
    md_en, md_ko = month_day_words(day, "en"), month_day_words(day, "ko")
    t = time_words(start, c.lang)
    opening = (
        (f'Delete the whole "{title}" series (every {weekday_en} at {t}), starting with the one on '
         f'{md_en}. I confirm, no need to ask.',
         f'Yes, I\'m sure: remove every "{title}" on {weekday_en}s at {t} (next one {md_en}).',
         f'Approved: drop the weekly "{title}" ({weekday_en} {t}, next on {md_en}) entirely.',
         f'Cancel all of the {weekday_en} {t} "{title}" meetings, the one on {md_en} '
         'included. You have my approval.'),
        (f'매주 {weekday_ko} {t} "{title}" 반복 일정 전부 삭제해 줘 ({md_ko} 것 포함). 확인했으니 바로 지워도 돼.',
         f'{md_ko}부터 매주 {weekday_ko} {t} "{title}" 전체 지워줘. 승인할게.',
         f'매주 {weekday_ko} "{title}" ({t}, 다음은 {md_ko}) 반복 전체 취소해 줘. 확인 없이 진행해.',
         f'{weekday_ko} {t} "{title}" 시리즈 통째로 삭제 승인. {md_ko} 것도.'),
    )[c.lang == "ko"][c.phrasing]
    other = event_state(f"{title} prep" if c.lang == "en" else f"{title} 준비", day, time(8), 30)
    initial = {"events": [series, other, *c.noise(day, title, count=1)], "busy": []}
    return dict(opening=opening, consent_after=1, call_budget=4, initial=initial, effects={"remove": [series]},
                task={"target": {"title": title, "date": day.isoformat(), "start": _hhmm(start)}, "scope": "all"})


def _create_over_series(c: _Ctx) -> Built:
    """Book a time that an occurrence of a weekly series already takes: the first free time after it."""
    built = _conflict_create(c)
    initial = built["initial"]
    blocker = initial["events"][0]
    day = datetime.fromisoformat(blocker["start"]).date()
    first = datetime.fromisoformat(blocker["start"]) - timedelta(weeks=2)
    series = {**blocker, "start": first.isoformat(),
              "end": (datetime.fromisoformat(blocker["end"]) - timedelta(weeks=2)).isoformat(),
              "recurrence": _weekly(_CODES[day.weekday()])}
    built["initial"] = {**initial, "events": [series, *initial["events"][1:]]}
    return built


def _all_day_create(c: _Ctx) -> Built:
    kind, day = c.pick_day()
    title = c.rng.choice(_ALL_DAY_TITLES[c.lang])
    d = day_words(kind, day, c.lang)
    opening = (
        (f'Mark {d} as "{title}", all day.', f'Add "{title}" {d} as an all-day event.',
         f'I\'m off {d}: put "{title}" on the whole day.', f'Block the whole day {d} for "{title}".'),
        (f'{d} "{title}" 하루 종일로 등록해 줘.', f'{d} 종일 "{title}" 넣어줘.', f'{d}은 "{title}"이야. 하루 종일 일정으로 잡아줘.',
         f'{d} 전체를 "{title}"로 막아줘.'),
    )[c.lang == "ko"][c.phrasing]
    initial = {"events": c.noise(day, title), "busy": []}
    return dict(opening=opening, call_budget=2, initial=initial, effects={"add": [all_day_state(title, day)]},
                task={"title": title, "date": day.isoformat(), "all_day": True})


_BUILDERS: dict[str, Callable[[_Ctx], Built]] = {
    "missing_info": _missing_info,
    "delete_request": _delete_request,
    "conflict_create": _conflict_create,
    "delete_after_approval": _delete_after_approval,
    "multi_attendee": _multi_attendee,
    "no_tool": _no_tool,
    "reschedule": _reschedule,
    "delete_refused": lambda c: _refused(_delete_request(c), c.lang),
    "reschedule_refused": lambda c: _refused(_reschedule(c), c.lang),
    "delete_same_title": lambda c: _delete_request(c, twin=True),
    "conflict_free": lambda c: _conflict_create(c, free=True),
    "multi_attendee_one_busy": lambda c: _multi_attendee(c, one_busy=True),
    "recurring_create": _recurring_create,
    "cancel_one_occurrence": _cancel_one_occurrence,
    "move_one_occurrence": _move_one_occurrence,
    "delete_series_after_approval": _delete_series_after_approval,
    "create_over_series": _create_over_series,
    "all_day_create": _all_day_create,
}


def draw_now(rng: random.Random) -> datetime:
    """A scenario's "now", the first draws on its seed: one of ``_NOW_DAYS`` at 8:00-9:30. The
    drills make theirs the same way, and the wording drill replays it to find a scenario's day words."""
    return datetime.combine(rng.choice(_NOW_DAYS), time(rng.choice((8, 9)), rng.choice((0, 30))), tzinfo=ZONE)


def build_scenario(template: str, index: int, seed: int = 0) -> Scenario:
    """Scenario ``index`` of ``template``: the phrasing cycles, everything else is seeded."""
    variant = index % (2 * VARIANTS_PER_LANGUAGE)
    lang = "en" if variant < VARIANTS_PER_LANGUAGE else "ko"
    phrasing = variant % VARIANTS_PER_LANGUAGE
    scenario_seed = random.Random(f"{seed}:{template}:{index}").getrandbits(32)
    rng = random.Random(scenario_seed)
    now = draw_now(rng)
    fields = _BUILDERS[template](_Ctx(rng=rng, lang=lang, phrasing=phrasing, now=now))
    # Events go into the store in a seeded random order, so the target's id is not always 1.
    fields["initial"] = {**fields["initial"], "events": list(fields["initial"]["events"])}
    rng.shuffle(fields["initial"]["events"])
    fields["expected"] = expected_snapshot(fields["initial"], **fields.pop("effects"))
    return Scenario(
        id=f"{template}-s{seed}-{index:03d}", template=template, variant=f"{template}/{lang}{phrasing}",
        split=_SPLIT_OF_PHRASING[phrasing], seed=scenario_seed, language=lang, now=now.isoformat(), tz=TZ,
        **fields,
    )


def generate(split: str | None = None, per_template: int | None = None, seed: int = 0,
             templates: Iterable[str] | None = None) -> list[Scenario]:
    """``per_template`` scenarios of each core template (half as many of the extra ones), then
    only those of ``split`` (None or "all": every split)."""
    chosen = tuple(templates) if templates else TEMPLATES
    unknown = [t for t in chosen if t not in _BUILDERS]
    if unknown:
        raise ValueError(f"unknown templates {unknown}; known: {', '.join(TEMPLATES)}")
    if split not in (None, "all", *SPLITS):
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)} or all")
    count = DEFAULT_PER_TEMPLATE if per_template is None else per_template
    out: list[Scenario] = []
    for template in chosen:
        n = count if template in CORE_TEMPLATES else max(1, count // 2)
        out += [build_scenario(template, i, seed) for i in range(n)]
    return [s for s in out if split in (None, "all") or s.split == split]
