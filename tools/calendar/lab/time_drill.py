"""The time drill: training rows that pair many ways of saying a time with its HH:MM.

The time probe (``tools.calendar.lab.time_probe``) found the demo model right on 24-hour times
("15:00", "15시") and wrong on 12-hour forms and words ("3pm", "오후 3시", "noon", "세 시 반"); the
generator says each time one way per language. This is the training side: seeded scenarios of the
template ``time_drill``, each a complete create request (title, day, start time and duration
stated, on a day with nothing else; a noise event or two on other days), in English or Korean,
whose time is said in one of many forms, made for any hour from 6 to 22 and minute 00/15/30/45:

- Korean: ``오전/오후 N시``, ``아침/낮/저녁/밤/새벽 N시``, Korean numerals (``오후 세 시``, ``밤 열시 반``),
  ``정오``, 24-hour ``15시`` / ``15시 30분``, ``15:00``, ``N시 15분 전``; minutes as ``반``, ``30분``,
  ``15분``, ``45분``;
- English: ``3pm`` / ``3 PM`` / ``3 p.m.`` / ``3:30pm`` / ``9:45 AM``, ``15:00``, ``noon`` / ``midday``,
  ``3 in the afternoon`` / ``7 o'clock in the evening`` / ``eight in the morning``,
  ``half past three ...``, ``quarter past / to ...``, ``15 minutes past / to ...``.

The language alternates and the form family cycles with the index, so any 200 hold every family
about equally. Same (seed, index) → same scenario. Always the ``train`` split: served by the
calendar suite only when named (``--templates time_drill``) and never in dev or test; the probe's
40 openings are never reproduced (different sentence frames). The oracle solves it with one
``create_event``; the verifier scores it as any other scenario.

    python -m agent eval --policy oracle --split train --templates time_drill
"""

from __future__ import annotations

import random
from datetime import time
from typing import Any, Callable

from agent.eval.suite import Scenario
from tools.calendar.lab.scenario_state import TZ, event_state, expected_snapshot
from tools.calendar.lab.scenarios import draw_now, scenario_seed
from tools.calendar.lab.template_kit import _Ctx, day_words, duration_words

TEMPLATE = "time_drill"
SPLIT = "train"
DEFAULT_COUNT = 200
HOURS = range(6, 23)  # start hours, 24-hour
MINUTES = (0, 15, 30, 45)
DURATIONS = (30, 60, 90, 120)

Rng = random.Random

# -- words -----------------------------------------------------------------------------------------

_KO_NATIVE = {1: "한", 2: "두", 3: "세", 4: "네", 5: "다섯", 6: "여섯", 7: "일곱", 8: "여덟", 9: "아홉", 10: "열",
              11: "열한", 12: "열두"}
_EN_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
             10: "ten", 11: "eleven", 12: "twelve"}
# Parts of the day and the 24-hour hours each can name (the hour said, not the minute).
_KO_AMPM = (("오전", 6, 11), ("오후", 13, 22))
_KO_PARTS = (("새벽", 5, 6), ("아침", 6, 9), ("낮", 12, 15), ("저녁", 17, 21), ("밤", 20, 23))
_EN_PARTS = (("in the morning", 5, 11), ("in the afternoon", 13, 17), ("in the evening", 17, 21), ("at night", 20, 23))


def _h12(hour: int) -> int:
    return hour if hour <= 12 else hour - 12


def _parts(table: tuple[tuple[str, int, int], ...], hour: int) -> list[str]:
    return [word for word, first, last in table if first <= hour <= last]


def _ko_minutes(rng: Rng, minute: int) -> str:
    if minute == 30:
        return rng.choice((" 반", " 30분"))
    return f" {minute}분" if minute else ""


def _en_hour(rng: Rng, hour: int) -> str:
    """The hour said with a part of the day or am/pm ("three in the afternoon", "3 pm"); noon as itself."""
    if hour == 12:
        return "noon"
    if rng.random() < 0.5:
        return f"{rng.choice((_EN_WORDS[_h12(hour)], str(_h12(hour))))} {rng.choice(_parts(_EN_PARTS, hour))}"
    return f"{_h12(hour)}{rng.choice(('', ' '))}{'am' if hour < 12 else 'pm'}"


def _any_time(rng: Rng, ok: Callable[[int, int], bool] = lambda h, m: True) -> tuple[int, int]:
    return rng.choice([(h, m) for h in HOURS for m in MINUTES if ok(h, m)])


def _part_time(rng: Rng, table: tuple[tuple[str, int, int], ...], shift: int = 0) -> tuple[str, int, int]:
    """A part of the day first (so each is about as frequent), then a time whose hour + ``shift`` it names."""
    usable = [(part, first, last) for part, first, last in table if any(first <= h + shift <= last for h in HOURS)]
    part, first, last = rng.choice(usable)
    hour, minute = _any_time(rng, lambda h, m: first <= h + shift <= last)
    return part, hour, minute


# -- form families: each picks a time and says it: (hour, minute, words) --------------------------

Made = tuple[int, int, str]


def _ko_ampm(rng: Rng) -> Made:  # 오후 3시, 오전 9시 반, 오후 4시 15분
    part, h, m = _part_time(rng, _KO_AMPM)
    return h, m, f"{part} {_h12(h)}시{_ko_minutes(rng, m)}"


def _ko_part(rng: Rng) -> Made:  # 저녁 7시, 밤 9시 30분, 새벽 6시, 낮 2시 반, 아침 8시 45분
    part, h, m = _part_time(rng, _KO_PARTS)
    return h, m, f"{part} {_h12(h)}시{_ko_minutes(rng, m)}"


def _ko_native(rng: Rng) -> Made:  # 오후 세 시, 아침 일곱시 반, 밤 열 시 15분
    part, h, m = _part_time(rng, _KO_AMPM + _KO_PARTS)
    return h, m, f"{part} {_KO_NATIVE[_h12(h)]}{rng.choice((' ', ''))}시{_ko_minutes(rng, m)}"


def _ko_noon(rng: Rng) -> Made:
    return 12, 0, "정오"


def _ko_24h(rng: Rng) -> Made:  # 15시, 16시 30분, 17시 반 ("9시" alone would be ambiguous: 13-22 only)
    h, m = _any_time(rng, lambda h, m: h >= 13)
    return h, m, f"{h}시{_ko_minutes(rng, m)}"


def _ko_before(rng: Rng) -> Made:  # 오후 3시 15분 전 = 14:45, 아침 아홉 시 15분 전 = 08:45
    part, h, _ = _part_time(rng, _KO_AMPM + _KO_PARTS, shift=1)
    named = _h12(h + 1)
    hour = rng.choice((str(named), _KO_NATIVE[named] + rng.choice((" ", ""))))
    return h, 45, f"{part} {hour}시 15분 전"


def _clock(rng: Rng) -> Made:  # 15:00, 09:45
    h, m = _any_time(rng)
    return h, m, f"{h:02d}:{m:02d}"


def _en_ampm(rng: Rng) -> Made:  # 3pm, 3 PM, 3 p.m., 3:30pm, 9:45 AM, 1:00 p.m.
    h, m = _any_time(rng)
    suffix = rng.choice((("am", " am", "AM", " AM", " a.m.") if h < 12 else ("pm", " pm", "PM", " PM", " p.m.")))
    minutes = f":{m:02d}" if m or rng.random() < 0.3 else ""
    return h, m, f"{_h12(h)}{minutes}{suffix}"


def _en_noon(rng: Rng) -> Made:
    return 12, 0, rng.choice(("noon", "midday", "12 noon"))


def _en_part(rng: Rng) -> Made:  # 3 in the afternoon, seven o'clock in the evening, 8:30 in the morning
    part, h, m = _part_time(rng, _EN_PARTS)
    if m:
        return h, m, f"{_h12(h)}:{m:02d} {part}"
    number = rng.choice((_EN_WORDS[_h12(h)], str(_h12(h))))
    oclock = rng.choice(("", " o'clock"))
    return h, m, f"{number}{oclock} {part}"


def _en_half(rng: Rng) -> Made:  # half past three in the afternoon, half past noon, half past 8 pm
    h, m = _any_time(rng, lambda h, m: m == 30)
    return h, m, f"half past {_en_hour(rng, h)}"


def _en_quarter(rng: Rng) -> Made:  # quarter past four in the afternoon, a quarter to nine am, quarter to noon
    h, m = _any_time(rng, lambda h, m: m in (15, 45))
    article = rng.choice(("", "a "))
    if m == 15:
        return h, m, f"{article}quarter past {_en_hour(rng, h)}"
    return h, m, f"{article}quarter to {_en_hour(rng, h + 1)}"


def _en_minutes(rng: Rng) -> Made:  # 15 minutes past two in the afternoon, fifteen minutes to six pm
    h, m = _any_time(rng, lambda h, m: m != 0)
    if m == 45:
        return h, m, f"{rng.choice(('15', 'fifteen'))} minutes to {_en_hour(rng, h + 1)}"
    count = rng.choice((str(m), {15: "fifteen", 30: "thirty"}[m]))
    return h, m, f"{count} minutes past {_en_hour(rng, h)}"


# name -> (language, how it picks and says a time)
FAMILIES: dict[str, tuple[str, Callable[[Rng], Made]]] = {
    "ko_ampm": ("ko", _ko_ampm), "ko_part": ("ko", _ko_part), "ko_native": ("ko", _ko_native),
    "ko_noon": ("ko", _ko_noon), "ko_24h": ("ko", _ko_24h), "ko_clock": ("ko", _clock), "ko_before": ("ko", _ko_before),
    "en_ampm": ("en", _en_ampm), "en_clock": ("en", _clock), "en_noon": ("en", _en_noon), "en_part": ("en", _en_part),
    "en_half": ("en", _en_half), "en_quarter": ("en", _en_quarter), "en_minutes": ("en", _en_minutes),
}
_BY_LANGUAGE = {lang: tuple(name for name, (l, _) in FAMILIES.items() if l == lang) for lang in ("en", "ko")}


# -- openings --------------------------------------------------------------------------------------

# Sentence frames; none is one of the probe's (those end in "추가해줘 / 잡아줘 / 넣어줘 / 등록해 줘 /
# 예약해 줘" right after the duration, or "Add / Schedule / Put / Book ... at T for D").
_FRAMES = {
    "en": (
        'Please add "{title}" {d} at {t}; it takes {dur}.',
        'Can you book "{title}" for {dur} {d} at {t}?',
        'Create an event "{title}" {d}, starting at {t}, lasting {dur}.',
        'I have "{title}" {d} at {t}. Put it in my calendar for {dur}.',
        'Set up "{title}" at {t} {d}, {dur} long.',
        'New event: "{title}" {d} at {t}, {dur}.',
    ),
    "ko": (
        '{d} {t}에 "{title}" {dur} 일정 만들어 줘.',
        '"{title}" 일정을 {d} {t}부터 {dur} 동안 넣어 줘.',
        '{d} {t}부터 {dur} "{title}" 있어. 캘린더에 추가해 줘.',
        '{d} {t}에 {dur}짜리 "{title}" 잡아 줄래?',
        '"{title}" {d} {t} 시작, {dur}. 등록 부탁해.',
        '{d} {t}에 "{title}" 넣어 줘. {dur} 걸려.',
    ),
}


def build_drill(index: int, seed: int = 0) -> Scenario:
    """Drill scenario ``index``: the language alternates, the form family cycles, the rest is seeded."""
    lang = "en" if index % 2 == 0 else "ko"
    family = _BY_LANGUAGE[lang][(index // 2) % len(_BY_LANGUAGE[lang])]
    _, make = FAMILIES[family]
    drawn_seed = scenario_seed(TEMPLATE, index, seed)
    rng = random.Random(drawn_seed)
    now = draw_now(rng)
    c = _Ctx(rng=rng, lang=lang, phrasing=0, now=now)
    hour, minute, said = make(rng)
    start = time(hour, minute)
    minutes = rng.choice([d for d in DURATIONS if hour * 60 + minute + d <= 24 * 60])
    kind, day = c.pick_day()
    title = c.title()
    opening = rng.choice(_FRAMES[lang]).format(title=title, d=day_words(kind, day, lang), t=said,
                                               dur=duration_words(minutes, lang))
    initial: dict[str, Any] = {"events": c.noise(day, title, count=rng.choice((1, 2))), "busy": []}
    rng.shuffle(initial["events"])
    new = event_state(title, day, start, minutes)
    return Scenario(
        id=f"{TEMPLATE}-s{seed}-{index:03d}", template=TEMPLATE, variant=f"{TEMPLATE}/{family}", split=SPLIT,
        seed=drawn_seed, language=lang, now=now.isoformat(), tz=TZ, opening=opening, call_budget=3,
        initial=initial, expected=expected_snapshot(initial, add=[new]),
        task={"title": title, "date": day.isoformat(), "start_time": f"{hour:02d}:{minute:02d}",
              "duration": minutes, "said": said, "form": family},
    )


def drill_scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0) -> list[Scenario]:
    """The first ``per_template`` drill scenarios (default 200). They are all ``train``: asking for
    them in ``dev`` or ``test`` is an error, not an empty run."""
    if split not in (None, "all", SPLIT):
        raise ValueError(f"the {TEMPLATE} set is training data only: it has no {split} scenarios (use --split train)")
    return [build_drill(i, seed) for i in range(DEFAULT_COUNT if per_template is None else per_template)]

