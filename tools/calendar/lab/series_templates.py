"""The scenario templates about series and all-day events: a weekly series made in one call, one
occurrence cancelled or moved, a whole series deleted on approval, a booking that clashes with an
occurrence, a whole-day event.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, Callable

from tools.calendar.lab.scenario_state import all_day_state, at, event_state
from tools.calendar.lab.single_templates import FOLLOWUP, conflict_create
from tools.calendar.lab.template_kit import (Built, _Ctx, day_words, duration_words, hhmm, month_day_words,
                                             occurrence_words, time_words, weekday_words)
from tools.calendar.lab.wordings import say


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
    t, dur = time_words(start, c.lang), duration_words(minutes, c.lang)
    opening = say("recurring_create", c.lang, c.phrasing, title=title, wd=weekday_words(first, c.lang), t=t, dur=dur,
                  n=count)
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
    opening = say("cancel_one_occurrence", c.lang, c.phrasing, title=title, occ=d)
    consent = "Yes, only that one." if c.lang == "en" else "응, 그날 것만."
    return _occurrence_change(c, series, day, start, opening, consent,
                              {"cancel": [(series, at(day, start).isoformat())]}, {})


def _move_one_occurrence(c: _Ctx) -> Built:
    series, day, start, title = _series_fixture(c)
    new_start = time(c.rng.choice([h for h in range(9, 18) if h != start.hour]))
    d, t = occurrence_words(day, c.lang), time_words(new_start, c.lang)
    opening = say("move_one_occurrence", c.lang, c.phrasing, title=title, occ=d, new=t)
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
    opening = say("delete_series_after_approval", c.lang, c.phrasing, title=title, wd=weekday_words(day, c.lang),
                  md=month_day_words(day, c.lang), t=time_words(start, c.lang))
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
    opening = say("all_day_create", c.lang, c.phrasing, title=title, d=d)
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
