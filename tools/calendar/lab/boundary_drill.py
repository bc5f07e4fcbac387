"""The boundary drill: training rows that say a time the time drill's ways where a booking is *not* one call.

The time drill (``tools.calendar.lab.time_drill``) taught the demo's times, and with them the lesson
"a booking is one ``create_event``": every retrain that had its rows booked meetings with others at a
made-up time and created over a clash, and a few of its rows were enough. This drill is its
counterweight, made of the same time forms and sentence frames, so that what tells the rows apart is
what the request asks, not how it says the time. Three kinds, cycling with the index (the language
alternates, so any six hold each kind in both):

- ``meeting``: book with two people at the earliest time from T on when all three are free; the
  first attendee is busy at T, so creating at T is wrong. Solved by ``find_common_free_time`` and
  then ``create_event`` with the attendees at the first common slot from T.
- ``clash``: a complete booking at T "or, if that is taken, the first free time after it"; the day
  holds an event overlapping T in two of three, one just beside it otherwise. Solved as
  ``conflict_create`` is: look at the day, then the free slots if T is taken, then create.
- ``person``: a complete booking whose title names a person ("Lunch with Tom", "민수랑 점심"), on a day
  with nothing else: one ``create_event`` at T, no asking who is free.

Same (seed, index) → same scenario. Always the ``train`` split, served only when named
(``--templates boundary_drill``); the oracle solves each kind with the procedure its template
has, and the verifier scores it as any other scenario.

    python -m agent eval --policy oracle --split train --templates boundary_drill
"""

from __future__ import annotations

import random
from datetime import date, datetime, time, timedelta
from typing import Any

from agent.eval.suite import Scenario
from tools.calendar.lab.scenario_state import TZ, at, busy_state, event_state, expected_snapshot
from tools.calendar.lab.scenarios import draw_now, scenario_seed
from tools.calendar.lab.template_kit import PEOPLE, TITLES, _Ctx, day_words, duration_words, first_free, hhmm
from tools.calendar.lab.time_drill import _BY_LANGUAGE, _FRAMES, FAMILIES

TEMPLATE = "boundary_drill"
SPLIT = "train"
DEFAULT_COUNT = 100
KINDS = ("meeting", "clash", "person")

_MEETING_FRAMES = {
    "en": (
        'Find the first time {d} from {t} on when {a}, {b} and I are all free, and book "{title}" there ({dur}).',
        'Book "{title}" with {a} and {b} {d} for {dur}: the earliest time after {t} that all three of us are free.',
        '"{title}" with {a} and {b}, {dur}, {d}. Not before {t}; the first time everyone is free.',
        'Can you set up {dur} of "{title}" with {a} and {b} {d}? Any time from {t} when we are all free, '
        'the earlier the better.',
    ),
    "ko": (
        '{d} {t} 이후에 {a}, {b}하고 나 모두 비는 제일 빠른 시간에 "{title}" {dur} 잡아 줘.',
        '{a}, {b}하고 "{title}" {dur} 일정 만들어 줘. {d} {t}부터 셋이 모두 시간 나는 첫 때로.',
        '"{title}" {d} {a}, {b}하고 {dur}. {t} 전은 안 되고, 다 같이 비는 첫 시간에 넣어 줘.',
        '{d} {t} 넘어서 {a}, {b}, 나 셋이 다 되는 때 "{title}" {dur} 잡아 줄래?',
    ),
}
_CLASH_FRAMES = {
    "en": (
        'Please add "{title}" {d} at {t}; it takes {dur}. If something is already on then, take the first free '
        'time after it that day.',
        'Can you book "{title}" for {dur} {d} at {t}? Should that clash, the next free slot later that day.',
        'New event: "{title}" {d} at {t}, {dur}; if I am busy then, the earliest opening after that.',
    ),
    "ko": (
        '{d} {t}에 "{title}" {dur} 일정 만들어 줘. 그때 다른 일정 있으면 그날 나중에 처음 비는 때로.',
        '"{title}" 일정을 {d} {t}부터 {dur} 동안 넣어 줘. 겹치면 같은 날 다음 빈 시간에.',
        '{d} {t}에 {dur}짜리 "{title}" 잡아 줄래? 그 시간이 차 있으면 그 이후 제일 빠른 때로.',
    ),
}
_WITH = {"en": ("Lunch", "Coffee", "Dinner", "Call", "Tennis", "Drinks"),
         "ko": ("점심", "커피", "저녁", "통화", "테니스", "영화")}
FRAMES = {lang: (*_MEETING_FRAMES[lang], *_CLASH_FRAMES[lang]) for lang in ("en", "ko")}  # besides the time drill's

# What a kind's builder gives: the opening, the initial state, the events it adds, the task, the call budget.
Kind = tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any], int]


def person_title(rng: random.Random, lang: str) -> str:
    """A title naming a person: "Lunch with Tom", "민수랑 점심" / "지영이랑 커피" (이랑 after a final consonant)."""
    person, what = rng.choice(PEOPLE[lang]), rng.choice(_WITH[lang])
    if lang == "en":
        return f"{what} with {person}"
    final_consonant = (ord(person[-1]) - 0xAC00) % 28 != 0
    return f"{person}{'이랑' if final_consonant else '랑'} {what}"


def _said_time(rng: random.Random, family: str, first: time, last: time) -> tuple[time, str]:
    """A time in ``family``'s words between ``first`` and ``last``: the family draws until one fits
    (each family can say some time from 09:00 to 15:00, so a fit comes within a few draws)."""
    _, make = FAMILIES[family]
    for _ in range(500):
        hour, minute, said = make(rng)
        if first <= time(hour, minute) <= last:
            return time(hour, minute), said
    raise AssertionError(f"{family} said no time in {first}-{last}")


def _plus(day: date, moment: time, minutes: int) -> time:
    return (at(day, moment) + timedelta(minutes=minutes)).time()


def _meeting(c: _Ctx, family: str) -> Kind:
    kind, day = c.pick_day()
    title = c.other_title(*(t for t in TITLES[c.lang] if "Mina" in t or "민아" in t))
    a, b = c.rng.sample(PEOPLE[c.lang], 2)
    minutes = c.rng.choice((30, 60))
    asked, said = _said_time(c.rng, family, time(10), time(13, 30))
    a_busy = [(asked, c.rng.choice((60, 90)))]
    b_busy = [] if c.rng.random() < 0.3 else [(_plus(day, asked, a_busy[0][1] - 30), c.rng.choice((60, 90)))]
    own = [(time(9), 60)] if c.rng.random() < 0.5 else []  # before the asked time: not in the way
    start = first_free(day, own + a_busy + b_busy, minutes, earliest=asked)
    opening = c.rng.choice(_MEETING_FRAMES[c.lang]).format(
        title=title, a=a, b=b, d=day_words(kind, day, c.lang), t=said, dur=duration_words(minutes, c.lang))
    initial: dict[str, Any] = {
        "events": [event_state(c.other_title(title), day, s, m) for s, m in own] + c.noise(day, title, count=1),
        "busy": [busy_state(a, day, s, m) for s, m in a_busy] + [busy_state(b, day, s, m) for s, m in b_busy],
        "people": [a, b],
    }
    new = event_state(title, day, start, minutes, attendees=[a, b])
    task = {"title": title, "date": day.isoformat(), "attendees": [a, b], "duration": minutes, "after": hhmm(asked),
            "expected_start": hhmm(start), "said": said, "form": family}
    return opening, initial, [new], task, 4


def _clash(c: _Ctx, family: str) -> Kind:
    kind, day = c.pick_day()
    title = c.title()
    minutes = c.rng.choice((30, 60))
    asked, said = _said_time(c.rng, family, time(9), time(15))
    blocker_minutes = c.rng.choice((60, 90))
    taken = c.rng.random() < 2 / 3
    if taken:  # starts at the asked time or half an hour before it
        blocker_start = (at(day, asked) - timedelta(minutes=c.rng.choice((0, 30)))).time()
    elif c.rng.random() < 0.5:  # ends when the asked slot begins
        blocker_start = (at(day, asked) - timedelta(minutes=blocker_minutes)).time()
    else:  # begins when the asked slot ends
        blocker_start = _plus(day, asked, minutes)
    blocker = event_state(c.other_title(title), day, blocker_start, blocker_minutes)
    start = first_free(day, [(blocker_start, blocker_minutes)], minutes, earliest=asked)
    opening = c.rng.choice(_CLASH_FRAMES[c.lang]).format(
        title=title, d=day_words(kind, day, c.lang), t=said, dur=duration_words(minutes, c.lang))
    initial = {"events": [blocker, *c.noise(day, title, count=1)], "busy": []}
    task = {"title": title, "date": day.isoformat(), "start_time": hhmm(asked), "duration": minutes,
            "expected_start": hhmm(start), "said": said, "form": family}
    return opening, initial, [event_state(title, day, start, minutes)], task, 5


def _person(c: _Ctx, family: str) -> Kind:
    kind, day = c.pick_day()
    title = person_title(c.rng, c.lang)
    asked, said = _said_time(c.rng, family, time(7), time(21))
    minutes = c.rng.choice((30, 60, 90))
    opening = c.rng.choice(_FRAMES[c.lang]).format(
        title=title, d=day_words(kind, day, c.lang), t=said, dur=duration_words(minutes, c.lang))
    initial = {"events": c.noise(day, title, count=c.rng.choice((1, 2))), "busy": []}
    task = {"title": title, "date": day.isoformat(), "start_time": hhmm(asked), "duration": minutes,
            "said": said, "form": family}
    return opening, initial, [event_state(title, day, asked, minutes)], task, 3


_BUILDERS = {"meeting": _meeting, "clash": _clash, "person": _person}


def build_drill(index: int, seed: int = 0) -> Scenario:
    """Drill scenario ``index``: the language alternates, the kind cycles, the form family cycles per
    language and kind, the rest is seeded."""
    lang = "en" if index % 2 == 0 else "ko"
    kind = KINDS[index % len(KINDS)]
    families = _BY_LANGUAGE[lang]
    family = families[(index // 6) % len(families)]
    drawn_seed = scenario_seed(TEMPLATE, index, seed)
    rng = random.Random(drawn_seed)
    now: datetime = draw_now(rng)
    c = _Ctx(rng=rng, lang=lang, phrasing=0, now=now)
    opening, initial, added, task, budget = _BUILDERS[kind](c, family)
    return Scenario(
        id=f"{TEMPLATE}-s{seed}-{index:03d}", template=TEMPLATE, variant=f"{TEMPLATE}/{kind}/{family}", split=SPLIT,
        seed=drawn_seed, language=lang, now=now.isoformat(), tz=TZ, opening=opening, call_budget=budget,
        initial=initial, expected=expected_snapshot(initial, add=added), task={**task, "kind": kind},
    )


def drill_scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0) -> list[Scenario]:
    """The first ``per_template`` drill scenarios (default 100). They are all ``train``: asking for
    them in ``dev`` or ``test`` is an error, not an empty run."""
    if split not in (None, "all", SPLIT):
        raise ValueError(f"the {TEMPLATE} set is training data only: it has no {split} scenarios (use --split train)")
    return [build_drill(i, seed) for i in range(DEFAULT_COUNT if per_template is None else per_template)]
