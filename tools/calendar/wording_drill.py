"""Issue 32's wording drill: training rows that ask for the same tasks in more words than the generator's.

The generator says each task in four phrasings per language, two of them for training, one for dev
and one for test. A 135M model learns those two wordings rather than the intent: retrained on the
18 templates, the demo read "as early as everyone is free" (the test's wording of a meeting with
others) as a whole-day event and booked it ``all_day``, because "everyone" and "whole" were nearer
to ``all_day_create``'s train wordings than to ``multi_attendee``'s. This set gives the templates
that fail on their test wording several more train-only frames each:

- ``multi_attendee`` / ``multi_attendee_one_busy``: "everyone", "all of us", "the three of us",
  "다들", "모두", "셋 다", with the earliest time said several ways;
- ``all_day_create``: "the entire day", "all of", "온종일", "하루 전체", with nobody else named;
- ``missing_info``: a title and a day with no time, said several ways (the user gives it when asked);
- ``no_tool``: greetings, thanks and questions about the assistant that need no calendar.

Each scenario is a generated ``train`` scenario of its template (state, task, expected snapshot,
scripted replies, all as ``build_scenario`` makes them; indices from ``FIRST_INDEX`` on, past any
train set in use) with only the opening replaced. Its ``template`` stays the generated one, so the
oracle and the verifier treat it as any scenario of that template; its id and variant name this set.
None of the frames is one of the generator's 32 (checked by a test), so dev and test keep wordings
no training row uses. Always ``train``: served only when named (``--templates wording_drill``).

    python -m agent eval --policy oracle --split train --templates wording_drill
"""

from __future__ import annotations

import random
from dataclasses import replace

from agent.eval.suite import Scenario
from tools.calendar.scenarios import VARIANTS_PER_LANGUAGE, _Ctx, build_scenario, day_words, draw_now, duration_words

TEMPLATE = "wording_drill"
SPLIT = "train"
DEFAULT_COUNT = 200
FIRST_INDEX = 10_000  # generated indices from here on: no train set of --per-template < 10,000 holds them
# Generated indices cycle through 4 phrasings per language, the first two of each being train ones.
_TRAIN_PHRASING = {"en": 0, "ko": VARIANTS_PER_LANGUAGE}

# template -> language -> frames. Fields: {title} {d} (the day as the generator says it), {dur},
# {a} {b} (the two people).
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
            '{d}에 {a}, {b} 그리고 나 셋이서 "{title}" 하고 싶어. {dur}, 다들 되는 가장 빠른 때로.',
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
            'Could you put "{title}" in my calendar {d}?',
            'Book "{title}" for {d}.',
            '"{title}" {d}. Can you schedule it?',
            'Please create "{title}" {d}.',
            'New event {d}: "{title}".',
        ),
        "ko": (
            '"{title}" {d}에 넣어 줘.',
            '{d} "{title}" 예약해 줘.',
            '{d}에 "{title}" 일정 하나 추가해줘.',
            '"{title}" 일정 {d}에 만들어 줄래?',
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
}
FRAMES["multi_attendee_one_busy"] = FRAMES["multi_attendee"]
TARGETS: tuple[str, ...] = tuple(FRAMES)


def _day_said(scenario: Scenario) -> str:
    """The scenario's day as its generator said it ("tomorrow", "next Monday", "December 9"): the
    template functions draw the day first, right after ``draw_now``, so replaying those draws on the
    scenario's seed gives the same kind of day."""
    rng = random.Random(scenario.seed)
    kind, day = _Ctx(rng=rng, lang=scenario.language, phrasing=0, now=draw_now(rng)).pick_day()
    if scenario.task.get("date") not in (None, day.isoformat()):
        raise RuntimeError(f"{scenario.id}: its template no longer draws the day first; update _day_said")
    return day_words(kind, day, scenario.language)


def build_wording(index: int, seed: int = 0) -> Scenario:
    """Wording scenario ``index``: the template cycles, the language alternates within it, the frame
    is seeded; the rest is the generated train scenario's."""
    template = TARGETS[index % len(TARGETS)]
    turn = index // len(TARGETS)
    lang = "en" if turn % 2 == 0 else "ko"
    # a train phrasing of that language: generated index ≡ 0/1 (en) or 4/5 (ko) modulo 8
    generated = FIRST_INDEX + 2 * VARIANTS_PER_LANGUAGE * turn + _TRAIN_PHRASING[lang] + (turn // 2) % 2
    scenario = build_scenario(template, generated, seed)
    if (scenario.split, scenario.language) != (SPLIT, lang):  # the generator's phrasing cycle changed
        raise RuntimeError(f"{scenario.id} is a {scenario.split} scenario in {scenario.language}, not {SPLIT} in {lang}")
    rng = random.Random(f"{seed}:{TEMPLATE}:{index}")
    frames = FRAMES[template][lang]
    k = rng.randrange(len(frames))
    task = scenario.task
    people = task.get("attendees") or ("", "")
    opening = frames[k].format(title=task.get("title", ""), d=_day_said(scenario) if task else "",
                               dur=duration_words(task["duration"], lang) if "duration" in task else "",
                               a=people[0], b=people[1])
    return replace(scenario, id=f"{TEMPLATE}-s{seed}-{index:03d}", variant=f"{TEMPLATE}/{template}/{lang}{k}",
                   opening=opening)


def wording_scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0) -> list[Scenario]:
    """The first ``per_template`` wording scenarios (default 200). They are all ``train``: asking for
    them in ``dev`` or ``test`` is an error, not an empty run."""
    if split not in (None, "all", SPLIT):
        raise ValueError(f"the {TEMPLATE} set is training data only: it has no {split} scenarios (use --split train)")
    return [build_wording(i, seed) for i in range(DEFAULT_COUNT if per_template is None else per_template)]
