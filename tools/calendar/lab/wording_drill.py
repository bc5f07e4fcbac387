"""The wording drill: training rows that ask for the same tasks in more words than the generator's.

The generator says each task in eight phrasings per language, two of them for training, three for
dev and three for test (one each before 2026-12-06). A 135M model learns the two train wordings
rather than the intent: retrained on the 18 templates, the demo read "as early as everyone is
free" (the test's wording of a meeting with others) as a whole-day event and booked it ``all_day``,
because "everyone" and "whole" were nearer to ``all_day_create``'s train wordings than to
``multi_attendee``'s. This set gives every template five or more train-only frames per language:

- ``multi_attendee`` / ``multi_attendee_one_busy``: "everyone", "all of us", "the three of us",
  "다들", "모두", "셋 다", with the earliest time said several ways;
- ``all_day_create``: "the entire day", "all of", "온종일", "하루 전체", with nobody else named;
- ``missing_info``: a title and a day with no time, said several ways (the user gives it when asked);
- ``no_tool``: greetings, thanks and questions about the assistant that need no calendar;
- the deletes, moves and bookings at a time: retrains that had frames only for the four
  above lost the templates that had none (``delete_request`` 85 → 55 %, ``reschedule_refused``
  80 → 50 %, Korean openings 42 → 26 of 115), so the rest of the 18 get theirs. Templates that share
  an opening (a refused delete and a delete, a booking over a series and over an event) share frames.

Each scenario is a generated ``train`` scenario of its template (state, task, expected snapshot,
scripted replies, all as ``build_scenario`` makes them; indices from ``FIRST_INDEX`` on, past any
train set in use) with only the opening replaced. Its ``template`` stays the generated one, so the
oracle and the verifier treat it as any scenario of that template; its id and variant name this set.
None of the frames is one of the generator's wordings (checked by a test), so dev and test keep
wordings no training row uses. Always ``train``: served only when named (``--templates wording_drill``).

    python -m agent eval --policy oracle --split train --templates wording_drill
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import date, time

from agent.eval.suite import Scenario
from tools.calendar.lab.scenarios import SLOTS_PER_LANGUAGE, TEMPLATES, build_scenario, draw_now
from tools.calendar.lab.template_kit import (_Ctx, day_words, duration_words, month_day_words, occurrence_words,
                                             time_words, weekday_words)

TEMPLATE = "wording_drill"
SPLIT = "train"
DEFAULT_COUNT = 540  # 15 per template and language
FIRST_INDEX = 10_000  # generated indices from here on: no train set of --per-template < 10,000 holds them
# Generated indices cycle through 4 slots per language, the first two of each being train ones.
_TRAIN_PHRASING = {"en": 0, "ko": SLOTS_PER_LANGUAGE}

# template -> language -> frames. Fields: {title} {d} (the day as the generator says it), {dur},
# {a} {b} (the two people), {t} (the asked or current start), {new} (the new start), {occ} (a series'
# occurrence as the generator says it: "on Friday December 11"), {md} ("December 11"), {wd} (its
# weekday), {n} (how many times a series repeats).
FRAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "multi_attendee": {
        "en": (
            'Book "{title}" {d} with {a} and {b} for {dur}, in the first slot where everyone is free.',
            'Get {a}, {b} and me together {d} for "{title}" ({dur}), as soon as all of us can.',
            '"{title}" with {a} and {b} {d}: {dur}, the earliest time that works for everyone.',
            'Can you find the earliest slot {d} that suits me, {a} and {b}, and put {dur} of "{title}" there?',
            'Please schedule {dur} of "{title}" {d} with {a} and {b}, whenever the three of us are first free.',
            'Set "{title}" {d} for {dur} with {a} and {b}; pick the soonest time everybody is available.',
        ),
        "ko": (
            '{d} {a}, {b}, 나 다 같이 비는 가장 이른 시간에 "{title}" {dur} 잡아 줘.',
            '"{title}" {dur}, {a}, {b}까지 셋이 함께. {d} 모두 가능한 제일 빠른 시간으로 넣어줘.',
            '{d} {a}, {b} 그리고 나 셋이서 "{title}" 하고 싶어. {dur}, 다들 되는 가장 빠른 때로.',
            '{a}, {b}하고 {d} "{title}" 잡아줘 ({dur}). 우리 셋 다 비는 첫 시간으로.',
            '{d} "{title}" 모임 {dur}. {a}, {b}, 나 전부 시간 되는 제일 이른 때로 예약해 줘.',
            '{a}, {b}하고 같이 {d} "{title}" {dur} 할 건데, 모두 비어 있는 가장 빠른 시간 찾아서 넣어줘.',
        ),
    },
    "all_day_create": {
        "en": (
            '"{title}" {d}, the entire day please.',
            'Clear all of {d} for "{title}" as an all-day event.',
            '{d} is "{title}". Make it an all-day event.',
            'Add an all-day "{title}" {d}.',
            'Reserve the full day {d}: "{title}".',
            'Put "{title}" in my calendar {d}, no times, the whole day.',
        ),
        "ko": (
            '{d} 하루 종일 "{title}" 일정 넣어 줘.',
            '"{title}" {d} 종일 일정으로 등록해줘.',
            '{d} 온종일 "{title}" 일정 잡아줘.',
            '{d} "{title}" 하루 전체 일정으로 등록해 줘.',
            '{d} "{title}" 종일 일정 하나 만들어 줘.',
            '"{title}" 때문에 {d} 하루를 통째로 비워 줘. 종일 일정으로.',
        ),
    },
    "missing_info": {
        "en": (
            'Add "{title}" {d}.',
            'Could you put "{title}" on the schedule {d}?',
            'Book "{title}" for {d}.',
            '"{title}" {d}. Can you schedule it?',
            'Please create "{title}" {d}.',
            'New event {d}: "{title}".',
        ),
        "ko": (
            '"{title}" {d} 일정으로 넣어 줘.',
            '{d} "{title}" 예약해 줘.',
            '{d} "{title}" 일정 하나 추가해줘.',
            '"{title}" 일정 {d} 날짜로 만들어 줄래?',
            '{d} 캘린더에 "{title}" 좀 넣어줘.',
            '"{title}" 잡아 줘. 날짜는 {d}.',
        ),
    },
    "no_tool": {
        "en": ("Hello!", "Good morning.", "What are you?", "How does this work?", "Thank you!",
               "Can you tell me what you do?", "Hey, how are you?", "Nice to meet you."),
        "ko": ("안녕!", "좋은 아침이에요.", "넌 뭐 하는 봇이야?", "이거 어떻게 쓰는 거야?", "고마워요!",
               "반가워.", "무슨 일을 할 수 있어?", "잘 지냈어?"),
    },
    "delete_request": {
        "en": (
            'Remove the "{title}" event {d}.',
            'Take "{title}" {d} off my calendar.',
            'I don\'t need "{title}" {d} anymore, delete it.',
            'Could you delete "{title}" {d}?',
            '"{title}" {d} is called off. Please remove it.',
        ),
        "ko": (
            '{d} "{title}" 없애 줘.',
            '"{title}" {d} 일정 필요 없어졌어. 삭제해 줘.',
            '{d} 잡혀 있는 "{title}" 지워 줄래?',
            '캘린더에서 {d} "{title}" 일정 삭제 부탁해.',
            '{d} "{title}" 안 하게 됐어. 일정 지워줘.',
        ),
    },
    "delete_after_approval": {
        "en": (
            'Remove "{title}" {d} at {t}, no need to confirm. Only that one.',
            'You can delete the {t} "{title}" {d} right away, I\'m sure. Leave everything else.',
            'Please delete "{title}" at {t} {d}. Already confirmed, don\'t ask. Nothing else.',
            'I\'m fine with deleting "{title}" {d} at {t} without a question. Just that one, the rest stays.',
            'Delete "{title}" ({d}, {t}) without asking me first; only that event.',
        ),
        "ko": (
            '{d} {t} "{title}" 지워 줘. 따로 확인 안 받아도 돼. 그것만.',
            '"{title}" {d} {t} 일정 바로 삭제해. 내가 허락했어. 다른 일정은 그대로.',
            '{d} {t} 잡혀 있는 "{title}" 삭제해 줘, 다시 묻지 말고. 다른 건 두고.',
            '{d} {t} "{title}" 하나만 삭제해도 좋아. 이미 확인했어.',
            '물어볼 필요 없이 {d} {t} "{title}" 하나만 없애 줘.',
        ),
    },
    "conflict_create": {
        "en": (
            'Add {dur} of "{title}" {d} at {t}. If something is already there, use the next free time after it that day.',
            'I want "{title}" {d}, {t}, {dur}. If I\'m not free then, book the earliest free time after {t} on the same day.',
            'Can you add "{title}" at {t} {d} for {dur}? If I have something then, pick the soonest free time after that, same day.',
            '"{title}" {d} at {t} for {dur}, please; if the slot is taken, the soonest free time after it that day.',
            'Book "{title}" for {dur} {d}, at {t} if that is open, otherwise at the first free time after {t} that day.',
        ),
        "ko": (
            '{d} {t}에 "{title}" {dur} 넣어 줘. 그때 다른 일정 있으면 그날 그 시간 이후 비는 때 중 가장 이른 때로.',
            '"{title}" {d} {t}, {dur}. 시간이 겹치면 같은 날 그 이후 가장 빠른 빈 시간에 잡아 줘.',
            '{d} {t}부터 "{title}" {dur} 등록해 줘. 이미 차 있으면 그날 그다음 빈 시간으로 해줘.',
            '{d} {t} "{title}" {dur} 잡아줄래? 그 시간이 막혀 있으면 그날 {t} 이후 제일 이른 빈 시간에.',
            '"{title}" 예약: {d} {t}, {dur}. 다른 일정과 겹치면 같은 날 그다음 빈 시간으로.',
        ),
    },
    "reschedule": {
        "en": (
            'Please move "{title}" {d} to {new}.',
            'Could "{title}" {d} start at {new} instead?',
            'Shift my "{title}" {d} so it starts at {new}.',
            'Reschedule "{title}" {d} to {new}.',
            'Let\'s do "{title}" {d} at {new} instead of the current time.',
        ),
        "ko": (
            '{d} "{title}" 시간을 {new}로 옮겨 줘.',
            '"{title}" {d} 일정 시작을 {new}로 해 줄래?',
            '{d} "{title}" {new}에 하는 걸로 바꿔줘.',
            '{d} 잡혀 있는 "{title}" {new}로 시간 조정해 줘.',
            '"{title}" {d} {new}로 옮길 수 있어?',
        ),
    },
    "recurring_create": {
        "en": (
            'Book "{title}" on {n} {wd}s in a row, at {t}, {dur} each time.',
            'Create a repeating "{title}": {t} every {wd}, {dur}, {n} times in total.',
            'Set up {n} occurrences of "{title}", one each {wd} at {t}, lasting {dur}.',
            'Add {n} weekly "{title}" slots on {wd} at {t}, {dur} each.',
            '"{title}" repeats every {wd} at {t} for {dur}. Please add {n} of them.',
        ),
        "ko": (
            '"{title}" 매주 {wd} {t}, {dur}짜리로 {n}번 반복해서 넣어 줘.',
            '매주 {wd} {t}마다 "{title}" {dur} 있어. {n}주치 등록해 줘.',
            '{wd}마다 {t}에 "{title}" {dur}, 총 {n}번 반복 일정으로 만들어 줘.',
            '반복 일정 추가: "{title}", 매주 {wd} {t}, {dur}, {n}번.',
            '"{title}" 일정을 {wd} {t}에 {dur}씩, {n}주 연속으로 잡아줘.',
        ),
    },
    "cancel_one_occurrence": {
        "en": (
            'Cancel the "{title}" {occ} only; the rest of the series stays.',
            'Just drop "{title}" {occ}. Keep all the other weeks.',
            'Please take the "{title}" {occ} off my calendar; only that date, the series goes on.',
            'Of the weekly "{title}", cancel the one {occ} and leave the rest.',
            '"{title}" is off {occ}. Cancel that occurrence alone.',
        ),
        "ko": (
            '{occ} "{title}"만 취소해 줘. 반복은 그대로 두고.',
            '"{title}" {occ} 한 번만 삭제해 줘, 다른 주는 유지.',
            '반복되는 "{title}" 중에서 {occ} 하나만 취소해 줘.',
            '{occ} "{title}" 건너뛸게. 그 회차만 삭제해 줘.',
            '다른 주는 두고 {occ} "{title}"만 없애 줘.',
        ),
    },
    "move_one_occurrence": {
        "en": (
            'Move only the "{title}" {occ} to {new}. Leave the other weeks.',
            'Can the "{title}" {occ} be at {new} instead? Just that one.',
            'Reschedule that week\'s "{title}" ({occ}) to {new}; keep the series as is.',
            'Shift just the one "{title}" {occ} to {new}; the series stays.',
            'For the "{title}" {occ}, start it at {new} instead. The other dates stay.',
        ),
        "ko": (
            '{occ} "{title}"만 {new}로 바꿔 줘. 다른 주는 그대로 둬.',
            '"{title}" {occ} 것만 {new}로 옮겨 줄래?',
            '{occ} "{title}" 하나만 시작 시간을 {new}로 해 줘.',
            '그 주만 {occ} "{title}" {new}에 하는 걸로 해 줘.',
            '{occ}에 있는 "{title}" 한 번만 {new}로 옮겨줘.',
        ),
    },
    "delete_series_after_approval": {
        "en": (
            'Remove the entire "{title}" series that meets {wd}s at {t} (the next is {md}). No need to ask, I\'m sure.',
            'You don\'t need to check with me: delete every "{title}" on {wd} at {t}, the {md} one as well.',
            'Please delete the "{title}" series on {wd}s at {t} completely (its next date is {md}). Already confirmed.',
            'Wipe out all of the recurring "{title}" on {wd}s ({t}), including {md}; go ahead without asking.',
            'Delete all of the recurring "{title}" ({wd}, {t}); the next one is {md}. Go ahead, it\'s fine by me.',
        ),
        "ko": (
            '매주 {wd} {t} "{title}" 반복 일정 전체를 없애 줘. 다음 일정은 {md}. 다시 묻지 않아도 돼.',
            '"{title}" 반복 일정 다 지워 줘. 매주 {wd} {t}에 있는 거고, 다음 회차는 {md}. 물어보지 말고 해.',
            '매주 {wd} {t}에 있는 "{title}" 전부 없애 줘 ({md} 포함). 확인할 필요 없어.',
            '{wd}마다 {t}에 하는 "{title}" 모두 삭제해. 내가 확인했어. 다음 {md} 것도.',
            '매주 반복되는 "{title}" ({wd} {t}) 전부 삭제해도 좋아. {md} 것도 물론.',
        ),
    },
}
# Templates whose openings say what another's do (what differs is the store or the user's answer).
SHARED_FRAMES = {
    "multi_attendee_one_busy": "multi_attendee", "delete_refused": "delete_request",
    "delete_same_title": "delete_request", "reschedule_refused": "reschedule", "conflict_free": "conflict_create",
    "create_over_series": "conflict_create",
}
FRAMES.update({template: FRAMES[shared] for template, shared in SHARED_FRAMES.items()})
TARGETS: tuple[str, ...] = tuple(t for t in TEMPLATES if t in FRAMES)  # the generator's order: all 18


def _day_said(scenario: Scenario) -> str:
    """The scenario's day as its generator said it ("tomorrow", "next Monday", "December 9"): the
    template functions draw the day first, right after ``draw_now``, so replaying those draws on the
    scenario's seed gives the same kind of day."""
    rng = random.Random(scenario.seed)
    kind, day = _Ctx(rng=rng, lang=scenario.language, phrasing=0, now=draw_now(rng)).pick_day()
    task = scenario.task
    if (task.get("date") or task.get("target", {}).get("date")) not in (None, day.isoformat()):
        raise RuntimeError(f"{scenario.id}: its template no longer draws the day first; update _day_said")
    return day_words(kind, day, scenario.language)


def said_words(scenario: Scenario, frame: str) -> dict[str, str]:
    """The words that fill ``frame`` for ``scenario``'s task, said as the generator says them. The day
    words are replayed only when the frame names ``{d}``: a series' day is not drawn that way."""
    task, lang = scenario.task, scenario.language
    target = task.get("target", {})
    day = date.fromisoformat(task.get("date") or target["date"]) if task else None
    start = task.get("start_time") or target.get("start")
    people = task.get("attendees") or ("", "")
    words = {"title": task.get("title") or target.get("title", ""), "a": people[0], "b": people[1],
             "dur": duration_words(task["duration"], lang) if "duration" in task else "",
             "t": time_words(time.fromisoformat(start), lang) if start else "",
             "new": time_words(time.fromisoformat(task["new_start"]), lang) if "new_start" in task else "",
             "n": str(task.get("count", "")), "d": _day_said(scenario) if "{d}" in frame else ""}
    if day is not None:
        words.update(wd=weekday_words(day, lang), md=month_day_words(day, lang), occ=occurrence_words(day, lang))
    return words


def build_wording(index: int, seed: int = 0) -> Scenario:
    """Wording scenario ``index``: the template cycles, the language alternates within it, the frame
    is seeded; the rest is the generated train scenario's."""
    template = TARGETS[index % len(TARGETS)]
    turn = index // len(TARGETS)
    lang = "en" if turn % 2 == 0 else "ko"
    # a train phrasing of that language: generated index ≡ 0/1 (en) or 4/5 (ko) modulo 8
    generated = FIRST_INDEX + 2 * SLOTS_PER_LANGUAGE * turn + _TRAIN_PHRASING[lang] + (turn // 2) % 2
    scenario = build_scenario(template, generated, seed)
    if (scenario.split, scenario.language) != (SPLIT, lang):  # the generator's phrasing cycle changed
        raise RuntimeError(f"{scenario.id} is a {scenario.split} scenario in {scenario.language}, not {SPLIT} in {lang}")
    rng = random.Random(f"{seed}:{TEMPLATE}:{index}")
    frames = FRAMES[template][lang]
    k = rng.randrange(len(frames))
    opening = frames[k].format(**said_words(scenario, frames[k]))
    return replace(scenario, id=f"{TEMPLATE}-s{seed}-{index:03d}", variant=f"{TEMPLATE}/{template}/{lang}{k}",
                   opening=opening)


def wording_scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0) -> list[Scenario]:
    """The first ``per_template`` wording scenarios (default 540). They are all ``train``: asking for
    them in ``dev`` or ``test`` is an error, not an empty run."""
    if split not in (None, "all", SPLIT):
        raise ValueError(f"the {TEMPLATE} set is training data only: it has no {split} scenarios (use --split train)")
    return [build_wording(i, seed) for i in range(DEFAULT_COUNT if per_template is None else per_template)]
