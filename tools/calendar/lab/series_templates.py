"""The scenario templates about series and all-day events: a weekly series made in one call, one
occurrence cancelled or moved, a whole series deleted on approval, a booking that clashes with an
occurrence, a whole-day event.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, Callable

from tools.calendar.lab.scenario_state import all_day_state, at, event_state
from tools.calendar.lab.single_templates import FOLLOWUP, conflict_create
from tools.calendar.lab.template_kit import (WEEKDAYS_EN, WEEKDAYS_KO, Built, _Ctx, day_words, duration_words,
                                             hhmm, month_day_words, occurrence_words, time_words, weekday_words)


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
    en_day, ko_day = WEEKDAYS_EN[weekday], WEEKDAYS_KO[weekday]
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
                task={"title": title, "date": first.isoformat(), "start_time": hhmm(start), "duration": minutes,
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
                              {"new_start": hhmm(new_start)})


def _occurrence_change(c: _Ctx, series: dict[str, Any], day: date, start: time, opening: str, consent: str,
                       effects: dict[str, Any], task: dict[str, Any]) -> Built:
    """One occurrence of ``series`` (on ``day`` at ``start``) changed after the agent asked and the user said yes."""
    initial = {"events": [series, *c.noise(day, series["title"])], "busy": []}
    target = {"title": series["title"], "date": day.isoformat(), "start": hhmm(start)}
    return dict(opening=opening, user_script=(consent,), mutation_after=2, consent_after=2, call_budget=4,
                followup=FOLLOWUP[c.lang], initial=initial, effects=effects,
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
                task={"target": {"title": title, "date": day.isoformat(), "start": hhmm(start)}, "scope": "all"})


def _create_over_series(c: _Ctx) -> Built:
    """Book a time that an occurrence of a weekly series already takes: the first free time after it."""
    built = conflict_create(c)
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


SERIES_BUILDERS: dict[str, Callable[[_Ctx], Built]] = {
    "recurring_create": _recurring_create,
    "cancel_one_occurrence": _cancel_one_occurrence,
    "move_one_occurrence": _move_one_occurrence,
    "delete_series_after_approval": _delete_series_after_approval,
    "create_over_series": _create_over_series,
    "all_day_create": _all_day_create,
}
