"""The scenario templates about single events: create with a missing detail, delete after asking,
book around a conflict, delete with the consent in the opening, book with attendees, small talk,
move, and the refused and look-alike variants of these. One template = one function of a seeded
context (``template_kit._Ctx``) returning the template-specific fields of a Scenario.
"""

from __future__ import annotations

from datetime import time, timedelta
from typing import Callable

from tools.calendar.lab.scenario_state import at, busy_state, event_state
from tools.calendar.lab.template_kit import (PEOPLE, TITLES, Built, _Ctx, day_words, duration_words, first_free,
                                             hhmm, time_words)
from tools.calendar.lab.wordings import say


def _missing_info(c: _Ctx) -> Built:
    kind, day = c.pick_day()
    title, start, minutes = c.title(), time(c.rng.randint(10, 16), c.rng.choice((0, 30))), c.rng.choice((30, 60, 90))
    d, t, dur = day_words(kind, day, c.lang), time_words(start, c.lang, c.rng.random() < 0.3), duration_words(minutes, c.lang)
    opening = say("missing_info", c.lang, c.phrasing, title=title, d=d)
    reply = f"It starts at {t} and takes {dur}." if c.lang == "en" else f"{t}에 시작하고 {dur} 걸려."
    initial = {"events": c.noise(day, title), "busy": []}
    new = event_state(title, day, start, minutes)
    return dict(opening=opening, user_script=(reply,), mutation_after=2, call_budget=3, initial=initial,
                effects={"add": [new]},
                task={"title": title, "date": day.isoformat(), "start_time": hhmm(start), "duration": minutes})


_REFUSAL = {"en": "No, keep it.", "ko": "아니, 그냥 둬."}
# What the simulated user says to a statement that changed nothing (never a yes): see agent.eval.dialogue.
FOLLOWUP = {"en": "Let me know what you find.", "ko": "뭐 찾았는지 알려줘."}


def _refused(built: Built, lang: str) -> Built:
    """The same request, but the user answers the agent's question with no: nothing may change."""
    return {**built, "user_script": (_REFUSAL[lang],), "consent_after": None, "effects": {},
            "task": {**built["task"], "refused": True}}


def _delete_request(c: _Ctx, twin: bool = False) -> Built:
    """Delete after asking. ``twin``: another event with the same title and time on another day."""
    kind, day = c.pick_day()
    title, start = c.title(), time(c.rng.randint(9, 16), c.rng.choice((0, 30)))
    d = day_words(kind, day, c.lang)
    opening = say("delete_request", c.lang, c.phrasing, title=title, d=d)
    consent = "Yes, delete it." if c.lang == "en" else "응, 삭제해."
    target = event_state(title, day, start, 60)
    other = event_state(c.other_title(title), day, time(17), 30) if start.hour < 16 else None
    initial = {"events": [target, *([other] if other else []), *c.noise(day, title)], "busy": []}
    if twin:
        initial["events"].append(event_state(title, day + timedelta(days=c.rng.choice((1, 2, 7))), start, 60))
    return dict(opening=opening, user_script=(consent,), mutation_after=2, consent_after=2, call_budget=4,
                followup=FOLLOWUP[c.lang], initial=initial, effects={"remove": [target]},
                task={"target": {"title": title, "date": day.isoformat(), "start": hhmm(start)}})


def conflict_create(c: _Ctx, free: bool = False) -> Built:
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
    opening = say("conflict_create", c.lang, c.phrasing, title=title, d=d, t=t, dur=dur)
    initial = {"events": [blocker, *c.noise(day, title, count=1)], "busy": []}
    new = event_state(title, day, free_from, minutes)
    return dict(opening=opening, call_budget=5, initial=initial, effects={"add": [new]},
                task={"title": title, "date": day.isoformat(), "start_time": hhmm(asked), "duration": minutes,
                      "expected_start": hhmm(free_from)})


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
    opening = say("delete_after_approval", c.lang, c.phrasing, title=title, d=d, t=t)
    initial = {"events": [target, *similar], "busy": []}
    return dict(opening=opening, consent_after=1, call_budget=4, initial=initial,
                effects={"remove": [target]},
                task={"target": {"title": title, "date": day.isoformat(), "start": hhmm(start)}})


def _multi_attendee(c: _Ctx, one_busy: bool = False) -> Built:
    """Earliest time the user and two people are all free. ``one_busy``: the second person has no
    busy time that day, so only the user's and the first person's times matter."""
    kind, day = c.pick_day()
    title = c.other_title(*(t for t in TITLES[c.lang] if "Mina" in t or "민아" in t))
    a, b = c.rng.sample(PEOPLE[c.lang], 2)
    minutes = c.rng.choice((30, 60))
    user = [(time(9), c.rng.choice((60, 90)))]
    first_a = (at(day, time(9)) + timedelta(minutes=c.rng.choice((60, 90)))).time()
    a_busy = [(first_a, c.rng.choice((60, 120)))]
    b_start = (at(day, first_a) + timedelta(minutes=a_busy[0][1] - 30)).time()
    b_busy = [] if one_busy else [(b_start, c.rng.choice((60, 90)))]
    start = first_free(day, user + a_busy + b_busy, minutes)
    d, dur = day_words(kind, day, c.lang), duration_words(minutes, c.lang)
    opening = say("multi_attendee", c.lang, c.phrasing, title=title, a=a, b=b, d=d, dur=dur)
    initial = {
        "events": [event_state(c.other_title(title), day, s, m) for s, m in user],
        "busy": [busy_state(a, day, s, m) for s, m in a_busy] + [busy_state(b, day, s, m) for s, m in b_busy],
    }
    if one_busy:
        initial["people"] = [a, b]  # known to the calendar, just free all day
    new = event_state(title, day, start, minutes, attendees=[a, b])
    return dict(opening=opening, call_budget=4, initial=initial, effects={"add": [new]},
                task={"title": title, "date": day.isoformat(), "attendees": [a, b], "duration": minutes,
                      "expected_start": hhmm(start)})


def _no_tool(c: _Ctx) -> Built:
    _, day = c.pick_day()
    initial = {"events": c.noise(day, count=2), "busy": []}
    return dict(opening=say("no_tool", c.lang, c.phrasing), needs_tools=False, call_budget=0, initial=initial,
                effects={}, task={})


def _reschedule(c: _Ctx) -> Built:
    kind, day = c.pick_day()
    title = c.title()
    start, new_start = (time(h) for h in c.rng.sample(range(9, 17), 2))
    target = event_state(title, day, start, 60)
    moved = event_state(title, day, new_start, 60)
    d, t = day_words(kind, day, c.lang), time_words(new_start, c.lang)
    opening = say("reschedule", c.lang, c.phrasing, title=title, d=d, new=t)
    consent = "Yes, go ahead." if c.lang == "en" else "응, 그렇게 해줘."
    initial = {"events": [target, *c.noise(day, title)], "busy": []}
    return dict(opening=opening, user_script=(consent,), mutation_after=2, consent_after=2, call_budget=4,
                followup=FOLLOWUP[c.lang], initial=initial, effects={"change": [(target, moved)]},
                task={"target": {"title": title, "date": day.isoformat(), "start": hhmm(start)},
                      "new_start": hhmm(new_start)})


SINGLE_BUILDERS: dict[str, Callable[[_Ctx], Built]] = {
    "missing_info": _missing_info,
    "delete_request": _delete_request,
    "conflict_create": conflict_create,
    "delete_after_approval": _delete_after_approval,
    "multi_attendee": _multi_attendee,
    "no_tool": _no_tool,
    "reschedule": _reschedule,
    "delete_refused": lambda c: _refused(_delete_request(c), c.lang),
    "reschedule_refused": lambda c: _refused(_reschedule(c), c.lang),
    "delete_same_title": lambda c: _delete_request(c, twin=True),
    "conflict_free": lambda c: conflict_create(c, free=True),
    "multi_attendee_one_busy": lambda c: _multi_attendee(c, one_busy=True),
}
