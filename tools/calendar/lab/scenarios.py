"""Seeded generator of calendar eval tasks: initial store, user messages, expected final store.

Same (seed, template, index) → same scenario, always. Each template has eight phrasings per
language (``tools.calendar.lab.wordings``); splits go by phrasing so a trained adapter is scored on
wording it has not seen: phrasings 0-1 of each language are ``train``, 2, 4 and 5 ``dev``, 3, 6
and 7 ``test``. A held split has three wordings per template and language, so a recipe chosen on
dev by the wording vote (``agent.eval.compare``) is tried on test on three other sentences, not one.

The index picks the split as before 2026-12-06: ``index % 8`` is a slot, 0-3 English and 4-7
Korean, slots 0-1 of a language train (phrasings 0 and 1), 2 dev, 3 test. So each split keeps its
share (train 1/2, dev 1/4, test 1/4: at the default 80 a core template has 40/20/20 scenarios, an
extra one 20/10/10), train scenarios are the ones the demo adapter was trained on, and a held
scenario is the same task as before, only its wording may differ. Which of the split's three
wordings a held scenario says turns with the block of eight indices (``index // 8``), each wording
holding one and a half blocks: blocks 0-1 (indices 0-15) say the wording the split had alone before
(phrasing 2 or 3; the hand-rewritten openings, ``rewritten``, were written against indices 3-15),
then 4 or 6, 5 or 7, and round again (``_held_phrasing``). At the default 80 per core template that
is 4, 3 and 3 scenarios of each held wording per language; at 40, 2, 1 and 2. A run of fewer per
template sees fewer wordings: all three of both held splits from 32 on, only the old one up to 18.

Relative dates are resolved against the scenario's fixed "now" (Asia/Seoul). "Now" is always a
Thursday, Friday or Saturday morning, so "next Monday/Tuesday/Wednesday" (다음 주 월/화/수요일)
can only mean the coming one, which lies in the next week.

Titles are quoted in the user's words so the expected title is unambiguous; the verifier compares
titles case- and space-insensitively. A template says what the task is (its effects: events
added, removed or changed); ``tools.calendar.lab.scenario_state`` turns that into store data and the
expected snapshot. The templates live in ``single_templates`` and ``series_templates``; this module
names them, draws each scenario's seed and now, and serves them by split.
"""

from __future__ import annotations

import random
from datetime import date, datetime, time
from typing import Callable, Iterable

from agent.eval.suite import SPLITS, Scenario
from tools.calendar.lab.scenario_state import TZ, ZONE, expected_snapshot
from tools.calendar.lab.series_templates import SERIES_BUILDERS
from tools.calendar.lab.single_templates import SINGLE_BUILDERS
from tools.calendar.lab.template_kit import Built, _Ctx

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
SLOTS_PER_LANGUAGE = 4  # index % 8: a language's four slots, which say the split
_SPLIT_OF_SLOT = ("train", "train", "dev", "test")
# A split's phrasings (of each language), the first of each held split being the one it had alone before.
PHRASINGS_OF_SPLIT: dict[str, tuple[int, ...]] = {"train": (0, 1), "dev": (2, 4, 5), "test": (3, 6, 7)}
SPLIT_OF_PHRASING: dict[int, str] = {p: split for split, ps in PHRASINGS_OF_SPLIT.items() for p in ps}

_NOW_DAYS = (date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5), date(2027, 1, 7), date(2027, 1, 8))

_BUILDERS: dict[str, Callable[[_Ctx], Built]] = {**SINGLE_BUILDERS, **SERIES_BUILDERS}


def draw_now(rng: random.Random) -> datetime:
    """A scenario's "now", the first draws on its seed: one of ``_NOW_DAYS`` at 8:00-9:30. The
    drills make theirs the same way, and the wording drill replays it to find a scenario's day words."""
    return datetime.combine(rng.choice(_NOW_DAYS), time(rng.choice((8, 9)), rng.choice((0, 30))), tzinfo=ZONE)


def scenario_seed(template: str, index: int, seed: int = 0) -> int:
    """The seed of scenario ``index`` of ``template``: every draw of the scenario, its "now" first."""
    return random.Random(f"{seed}:{template}:{index}").getrandbits(32)


def _held_phrasing(split: str, block: int) -> int:
    """The phrasing a held split's scenario in block ``block`` (``index // 8``) says: each of the
    split's wordings for one and a half blocks, the old one first (blocks 0-1)."""
    phrasings = PHRASINGS_OF_SPLIT[split]
    return phrasings[(2 * block // 3) % len(phrasings)]


def phrasing_of(index: int) -> tuple[str, int]:
    """The language and phrasing scenario ``index`` of any template says."""
    slot = index % (2 * SLOTS_PER_LANGUAGE)
    lang = "en" if slot < SLOTS_PER_LANGUAGE else "ko"
    split = _SPLIT_OF_SLOT[slot % SLOTS_PER_LANGUAGE]
    if split == "train":
        return lang, slot % SLOTS_PER_LANGUAGE
    return lang, _held_phrasing(split, index // (2 * SLOTS_PER_LANGUAGE))


def build_scenario(template: str, index: int, seed: int = 0) -> Scenario:
    """Scenario ``index`` of ``template``: the language and phrasing cycle (``phrasing_of``), everything
    else is seeded."""
    lang, phrasing = phrasing_of(index)
    drawn_seed = scenario_seed(template, index, seed)
    rng = random.Random(drawn_seed)
    now = draw_now(rng)
    fields = _BUILDERS[template](_Ctx(rng=rng, lang=lang, phrasing=phrasing, now=now))
    # Events go into the store in a seeded random order, so the target's id is not always 1.
    fields["initial"] = {**fields["initial"], "events": list(fields["initial"]["events"])}
    rng.shuffle(fields["initial"]["events"])
    fields["expected"] = expected_snapshot(fields["initial"], **fields.pop("effects"))
    return Scenario(
        id=f"{template}-s{seed}-{index:03d}", template=template, variant=f"{template}/{lang}{phrasing}",
        split=SPLIT_OF_PHRASING[phrasing], seed=drawn_seed, language=lang, now=now.isoformat(), tz=TZ,
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
