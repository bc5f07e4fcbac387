"""The scenario generator: deterministic, split by phrasing, dates resolved against a fixed now."""

from __future__ import annotations

import collections
from datetime import date, datetime

import pytest

from tools.calendar.lab.eval_suite import make_environment
from tools.calendar.lab.scenarios import (
    CORE_TEMPLATES,
    EXTRA_TEMPLATES,
    build_scenario,
    generate,
)
from tools.calendar.lab.template_kit import day_words, time_words


def test_default_counts_are_80_per_core_template() -> None:
    scenarios = generate()
    counts = collections.Counter(s.template for s in scenarios)
    assert {t: counts[t] for t in CORE_TEMPLATES} == {t: 80 for t in CORE_TEMPLATES}
    assert sum(counts[t] for t in CORE_TEMPLATES) == 400
    assert all(counts[t] == 40 for t in EXTRA_TEMPLATES)
    assert len({s.id for s in scenarios}) == len(scenarios)


def test_same_seed_same_scenarios_other_seed_other_ones() -> None:
    assert [s.to_dict() for s in generate(per_template=6)] == [s.to_dict() for s in generate(per_template=6)]
    assert [s.initial for s in generate(per_template=6, seed=1)] != [s.initial for s in generate(per_template=6)]


def test_splits_go_by_phrasing_and_hold_both_languages() -> None:
    scenarios = generate()
    split_of_variant: dict[str, set[str]] = collections.defaultdict(set)
    for s in scenarios:
        split_of_variant[s.variant].add(s.split)
    assert all(len(splits) == 1 for splits in split_of_variant.values())
    for split in ("train", "dev", "test"):
        chosen = generate(split=split)
        assert chosen and {s.split for s in chosen} == {split}
        assert {s.language for s in chosen} == {"en", "ko"}
    train_variants = {s.variant for s in generate(split="train")}
    assert not train_variants & {s.variant for s in generate(split="test")}


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
