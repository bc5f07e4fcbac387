"""The wording drill: train-only openings that ask for a generated scenario's task in other words.

An opening is reduced to its frame by putting placeholders back where the scenario's title, people,
duration and day words stand. That pins down three things without trusting the drill's own
formatting: each drill opening is exactly one of its template's frames filled with the scenario's
own task; the generator's first 32 scenarios of a template reduce to exactly 16 frames, its eight
wordings per language (so the day words were found); and no drill frame is a generator frame, so
dev and test keep wordings no row trains.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from agent.eval import cli
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.scenarios import TEMPLATES, build_scenario
from tools.calendar.lab.wording_drill import (DEFAULT_COUNT, FIRST_INDEX, FRAMES, TARGETS, TEMPLATE, build_wording,
                                          said_words, wording_scenarios)

SUITE = load_eval_suite()
DRILL = wording_scenarios("train")  # the default 540 of seed 0


def frame_of(opening: str, scenario) -> str:  # noqa: ANN001 - a Scenario
    """The opening with the scenario's own words put back as placeholders. The words are the drill's
    (``said_words``); that they are the generator's is what the 16-frames test checks."""
    every_frame = " ".join(FRAMES[scenario.template][scenario.language])  # {d} only where the template says it
    words = {"{" + name + "}": said for name, said in said_words(scenario, every_frame).items() if said}
    for placeholder, said in sorted(words.items(), key=lambda kv: -len(kv[1])):  # longest first
        opening = opening.replace(said, placeholder)
    return opening


def generator_frames(template: str) -> set[str]:
    """The frames of the first 32 scenarios: four blocks of eight indices, which say every wording."""
    return {frame_of(s.opening, s) for s in (build_scenario(template, i) for i in range(32))}


def test_each_opening_is_one_of_its_templates_frames_filled_with_the_scenarios_task() -> None:
    for s in DRILL:
        assert s.id.startswith(f"{TEMPLATE}-s0-") and s.variant.startswith(f"{TEMPLATE}/{s.template}/")
        assert frame_of(s.opening, s) in FRAMES[s.template][s.language], s.opening


def test_the_generator_says_each_template_in_16_frames_and_the_drill_in_none_of_them() -> None:
    for template in TARGETS:
        generated = generator_frames(template)
        assert len(generated) == 16, sorted(generated)  # 8 wordings x 2 languages: every day word was found
        drill = {f for lang in ("en", "ko") for f in FRAMES[template][lang]}
        assert not generated & drill, generated & drill


def _five_word_runs(frame: str) -> set[tuple[str, ...]]:
    """Runs of five words and placeholders, three or more of them words ("with {a} and {b} {d}" is
    only how a task's details are strung together)."""
    words = re.findall(r"\{\w+\}|[\w']+", frame.lower())
    runs = (tuple(words[i:i + 5]) for i in range(len(words) - 4))
    return {run for run in runs if sum(not w.startswith("{") for w in run) >= 3}


def test_no_drill_frame_shares_five_words_in_a_row_with_a_dev_or_test_wording() -> None:
    """Not a held-out wording with a word changed either, so dev and test stay unseen."""
    for template in TARGETS:
        held_out = [s for s in (build_scenario(template, i) for i in range(32)) if s.split in ("dev", "test")]
        for s in held_out:
            runs = _five_word_runs(frame_of(s.opening, s))
            for frame in FRAMES[template][s.language]:
                assert not runs & _five_word_runs(frame), (frame, s.opening)


def test_only_the_opening_differs_from_the_generated_train_scenario() -> None:
    for index, s in enumerate(DRILL[:40]):
        turn = index // len(TARGETS)
        lang = "en" if turn % 2 == 0 else "ko"
        candidates = [build_scenario(s.template, FIRST_INDEX + 8 * turn + offset) for offset in range(8)]
        (generated,) = [g for g in candidates if g.seed == s.seed]
        assert generated.split == "train" and generated.language == lang == s.language
        assert generated.opening != s.opening
        assert replace(s, id=generated.id, variant=generated.variant, opening=generated.opening) == generated


def test_the_drill_covers_every_template_in_both_languages_and_most_frames() -> None:
    assert TARGETS == TEMPLATES
    seen = Counter((s.template, s.language) for s in DRILL)
    assert set(seen) == {(t, lang) for t in TARGETS for lang in ("en", "ko")}
    assert min(seen.values()) >= 15
    frames = {(s.template, s.language, frame_of(s.opening, s)) for s in DRILL}
    assert len(frames) >= 0.9 * sum(len(FRAMES[t][lang]) for t in TARGETS for lang in ("en", "ko"))


def test_the_same_index_gives_the_same_scenario_and_another_seed_another() -> None:
    assert build_wording(7) == DRILL[7]
    assert build_wording(7, seed=1) != DRILL[7]


def test_the_drill_is_served_only_when_named_and_only_for_train() -> None:
    for split in ("train", "dev", "test", "all", None):
        assert not any(s.id.startswith(TEMPLATE) for s in SUITE.scenarios(split=split, per_template=2)), split
    for split in ("dev", "test"):
        with pytest.raises(ValueError, match="training data only: it has no .* scenarios"):
            SUITE.scenarios(split=split, templates=[TEMPLATE])
    assert SUITE.scenarios(split="train", templates=[TEMPLATE]) == DRILL
    assert SUITE.scenarios(split="train", per_template=7, seed=3, templates=[TEMPLATE]) == \
        [build_wording(i, seed=3) for i in range(7)]


def test_the_oracle_solves_all_of_them_through_the_eval_cli(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    assert cli.main(["--policy", "oracle", "--split", "train", "--templates", TEMPLATE, "--per-template", str(DEFAULT_COUNT),
                     "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows = {r["group"]: r for r in summary["rows"]}
    assert sum(rows[t]["episodes"] for t in TARGETS) == DEFAULT_COUNT
    for template in TARGETS:
        row = rows[template]
        assert (row["task_success"], row["mean_reward"], row["false_claims"]) == (100.0, 1.0, 0.0), template
