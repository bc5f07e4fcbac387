"""The scenario generator: deterministic, split by phrasing, dates resolved against a fixed now."""

from __future__ import annotations

import collections
import random
from functools import lru_cache
from datetime import date, datetime

import pytest

from tools.calendar.lab.eval_suite import make_environment
from tools.calendar.lab.scenarios import (
    _BUILDERS,
    CORE_TEMPLATES,
    EXTRA_TEMPLATES,
    PHRASINGS_OF_SPLIT,
    SERIES_TEMPLATES,
    TEMPLATES,
    build_scenario,
    draw_now,
    generate,
    phrasing_of,
)
from tools.calendar.lab.template_kit import _Ctx, day_words, time_words


@lru_cache(maxsize=1)
def default_scenarios() -> tuple:
    """``generate()`` once for the tests that read the default set (920 scenarios take a while)."""
    return tuple(generate())


def test_default_counts_are_80_per_core_template() -> None:
    scenarios = default_scenarios()
    counts = collections.Counter(s.template for s in scenarios)
    assert {t: counts[t] for t in CORE_TEMPLATES} == {t: 80 for t in CORE_TEMPLATES}
    assert sum(counts[t] for t in CORE_TEMPLATES) == 400
    assert all(counts[t] == 40 for t in EXTRA_TEMPLATES)
    assert len({s.id for s in scenarios}) == len(scenarios)


def test_same_seed_same_scenarios_other_seed_other_ones() -> None:
    assert [s.to_dict() for s in generate(per_template=6)] == [s.to_dict() for s in generate(per_template=6)]
    assert [s.initial for s in generate(per_template=6, seed=1)] != [s.initial for s in generate(per_template=6)]


def test_splits_go_by_phrasing_and_hold_both_languages() -> None:
    scenarios = default_scenarios()
    split_of_variant: dict[str, set[str]] = collections.defaultdict(set)
    for s in scenarios:
        split_of_variant[s.variant].add(s.split)
    assert all(len(splits) == 1 for splits in split_of_variant.values())
    by_id = {s.id: s for s in scenarios}
    for split in ("train", "dev", "test"):
        chosen = generate(split=split, per_template=8)
        assert chosen and {s.split for s in chosen} == {split}
        assert {s.language for s in chosen} == {"en", "ko"}
        assert all(by_id[s.id] == s for s in chosen)  # the default set's, served by split
    train_variants = {s.variant for s in scenarios if s.split == "train"}
    held = [{s.variant for s in scenarios if s.split == split} for split in ("dev", "test")]
    assert not train_variants & (held[0] | held[1]) and not held[0] & held[1]


def test_each_split_keeps_its_share_and_each_held_wording_its_turn() -> None:
    """At the default 80 per core template: 40 train, 20 dev, 20 test, as with one held wording; a
    held split's three wordings per language get 4, 3 and 3 of its 10 (2, 1, 2 of an extra's 5)."""
    per_split = collections.Counter((s.template, s.split) for s in default_scenarios())
    per_wording = collections.Counter((s.template, s.split, s.variant) for s in default_scenarios())
    for template in TEMPLATES:
        core = template in CORE_TEMPLATES
        shares = [per_split[template, split] for split in ("train", "dev", "test")]
        assert shares == ([40, 20, 20] if core else [20, 10, 10]), template
        for split in ("dev", "test"):
            for lang in ("en", "ko"):
                counts = [per_wording[template, split, f"{template}/{lang}{p}"] for p in PHRASINGS_OF_SPLIT[split]]
                assert counts == ([4, 3, 3] if core else [2, 1, 2]), (template, split, lang)
    assert len({s.variant for s in default_scenarios() if s.split == "test" and s.template in SERIES_TEMPLATES}) == \
        3 * 2 * len(SERIES_TEMPLATES)


def test_the_first_sixteen_indices_say_the_wordings_the_splits_had_before() -> None:
    """Train is what the demo adapter was trained on, and the hand-rewritten openings were written
    against test indices 3-15 in the test's one old wording (phrasing 3)."""
    assert [phrasing_of(i) for i in range(8)] == [("en", 0), ("en", 1), ("en", 2), ("en", 3),
                                                  ("ko", 0), ("ko", 1), ("ko", 2), ("ko", 3)]
    assert [phrasing_of(i + 8) for i in range(8)] == [phrasing_of(i) for i in range(8)]
    assert {phrasing_of(i) for i in range(16, 80) if i % 4 < 2} == {(lang, p) for lang in ("en", "ko") for p in (0, 1)}


def test_the_wording_never_changes_the_task() -> None:
    """A held scenario said in another wording is the same task: same store, same expected result."""
    for template in TEMPLATES:
        built = []
        for phrasing in range(8):
            rng = random.Random(f"wording:{template}")
            fields = _BUILDERS[template](_Ctx(rng=rng, lang="ko", phrasing=phrasing, now=draw_now(rng)))
            built.append(fields)
        assert len({b.pop("opening") for b in built}) == 8, template
        assert all(b == built[0] for b in built), template


def test_unknown_template_or_split_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown templates"):
        generate(templates=["nope"])
    with pytest.raises(ValueError, match="unknown split"):
        generate(split="validation")


def test_relative_day_and_time_words() -> None:
    assert day_words("next_weekday", date(2026, 12, 8), "en") == "next Tuesday"
    assert day_words("next_weekday", date(2026, 12, 8), "ko") == "다음 주 화요일"
    assert day_words("tomorrow", date(2026, 12, 4), "ko") == "내일"
    assert time_words(datetime(2026, 12, 4, 15, 0).time(), "ko") == "오후 3시"
    assert time_words(datetime(2026, 12, 4, 10, 30).time(), "en") == "10:30am"


def test_next_weekday_is_in_the_following_week() -> None:
    """'next Tuesday' must be unambiguous: now is Thu-Sat, the day is Mon-Wed of the next week."""
    for s in generate(per_template=80, templates=["delete_request", "missing_info"]):
        now = s.now_datetime()
        assert now.weekday() in (3, 4, 5)
        day = date.fromisoformat(s.task.get("date") or s.task["target"]["date"])
        assert day > now.date()
        if "next " in s.opening or "다음 주" in s.opening:
            assert day.weekday() in (0, 1, 2) and (day - now.date()).days <= 7


def test_mutation_templates_expect_a_change_and_no_tool_expects_none() -> None:
    for template in (*CORE_TEMPLATES, *EXTRA_TEMPLATES):
        scenario = build_scenario(template, 3)
        environment = make_environment(scenario)
        try:
            initial = environment.snapshot()
        finally:
            environment.close()
        assert (initial == scenario.expected) == (template in ("no_tool", "delete_refused", "reschedule_refused")), template


def test_rules_of_the_dialogue_per_template() -> None:
    by_template = {t: build_scenario(t, 0) for t in (*CORE_TEMPLATES, *EXTRA_TEMPLATES)}
    assert by_template["missing_info"].mutation_after == 2 and by_template["missing_info"].user_script
    assert by_template["delete_request"].consent_after == 2
    assert by_template["delete_after_approval"].consent_after == 1
    assert by_template["conflict_create"].consent_after is None
    assert not by_template["no_tool"].needs_tools
