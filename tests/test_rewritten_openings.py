"""The hand-rewritten openings: test scenarios whose first user message is written in
wordings the generator never uses, served as ``eval --split rewritten`` and, for the paired arm,
the same scenarios in the generator's wording as ``eval --split rewritten-original``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from agent.eval.runner import load_episodes
from agent.eval.suite import Scenario
from agent.export.grpo import prompt_rows
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.rewritten import (DATA, REWRITTEN, REWRITTEN_ORIGINAL, STYLES, load_rewrites,
                                      rewritten_scenarios)
from tools.calendar.lab.scenarios import TEMPLATES, generate

REPO = Path(__file__).resolve().parent.parent
SUITE = load_eval_suite()
REWRITES = load_rewrites()
_HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")
_LATIN = re.compile(r"[A-Za-z]")
# Words that give the yes to a delete in the opening; only the approval templates' openings have one.
_CONSENT = ("approv", "confirm", "i'm sure", "no need to ask", "승인", "확인 없이", "확인 안 해도", "확인하지 않",
            "물어볼 필요")


@pytest.fixture(scope="module")
def generated_all() -> list[Scenario]:
    """Every generated scenario at the default settings (generated once: it takes seconds)."""
    return generate(split="all")


@pytest.fixture(scope="module")
def generated_test(generated_all: list[Scenario]) -> dict[str, Scenario]:
    """The generator's test split at its default settings (what ``eval --split test`` runs)."""
    return {s.id: s for s in generated_all if s.split == "test"}


def _norm(text: str) -> str:
    return "".join(text.split()).casefold()


def _title(scenario: Scenario) -> str | None:
    return scenario.task.get("title") or scenario.task.get("target", {}).get("title")


def test_every_entry_is_a_generated_test_scenario_with_the_recorded_opening(generated_test: dict[str, Scenario]) -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert data["generator"]["seed"] == 0 and data["generator"]["split"] == "test"
    for scenario_id, rewrite in REWRITES.items():
        assert scenario_id in generated_test, scenario_id
        scenario = generated_test[scenario_id]
        assert rewrite.original == scenario.opening, scenario_id
        assert (rewrite.template, rewrite.language) == (scenario.template, scenario.language), scenario_id
        assert data["entries"][scenario_id]["now"] == scenario.now, scenario_id


def test_each_rewrite_differs_from_its_original_and_quotes_the_title_verbatim(
        generated_test: dict[str, Scenario]) -> None:
    for scenario_id, rewrite in REWRITES.items():
        assert _norm(rewrite.rewritten) != _norm(rewrite.original), scenario_id
        title = _title(generated_test[scenario_id])
        if title is None:  # small talk has no event
            assert generated_test[scenario_id].template == "no_tool"
            continue
        assert _norm(f'"{title}"') in _norm(rewrite.rewritten), (scenario_id, title)


def test_a_yes_in_the_opening_only_where_the_generated_opening_has_one(generated_test: dict[str, Scenario]) -> None:
    """A heuristic guard on the consent facts: the approval templates' rewrites still say yes, the
    others (the agent must ask first) never do."""
    for scenario_id, rewrite in REWRITES.items():
        consents = generated_test[scenario_id].consent_after == 1
        for text in (rewrite.original, rewrite.rewritten):
            said = [w for w in _CONSENT if w in text.casefold()]
            assert bool(said) == consents, (scenario_id, text, said)


def test_styles_templates_and_languages_are_covered() -> None:
    assert len(REWRITES) >= 48
    styles = Counter(r.style for r in REWRITES.values())
    assert set(styles) == set(STYLES) and min(styles.values()) >= 8, styles
    for template in TEMPLATES:
        languages = {r.language for r in REWRITES.values() if r.template == template}
        assert languages == {"en", "ko"}, template
    for style in STYLES:
        assert {r.language for r in REWRITES.values() if r.style == style} == {"en", "ko"}, style


def test_mixed_rewrites_mix_korean_and_english_outside_the_title(generated_test: dict[str, Scenario]) -> None:
    for scenario_id, rewrite in REWRITES.items():
        if rewrite.style != "mixed":
            continue
        words = rewrite.rewritten.replace(f'"{_title(generated_test[scenario_id])}"', "")
        assert _HANGUL.search(words) and _LATIN.search(words), scenario_id


def test_served_scenarios_equal_the_generated_ones_except_the_opening(generated_test: dict[str, Scenario]) -> None:
    rewritten = SUITE.scenarios(split=REWRITTEN)
    original = SUITE.scenarios(split=REWRITTEN_ORIGINAL)
    assert [s.id for s in rewritten] == [s.id for s in original] == [
        s for s in generated_test if s in REWRITES]  # the generator's order
    for served, same in zip(rewritten, original):
        generated = generated_test[served.id]
        assert served.opening == REWRITES[served.id].rewritten != generated.opening
        assert replace(served, opening=generated.opening) == generated
        assert same == generated


def test_the_rewritten_sets_select_like_generate_and_refuse_other_seeds() -> None:
    few = SUITE.scenarios(split=REWRITTEN, per_template=8, templates=["missing_info", "no_tool"])
    assert [s.id for s in few] == ["missing_info-s0-003", "missing_info-s0-007", "no_tool-s0-003"]
    with pytest.raises(ValueError, match="--seed 0"):
        SUITE.scenarios(split=REWRITTEN, seed=1)
    with pytest.raises(ValueError, match="unknown templates"):
        SUITE.scenarios(split=REWRITTEN_ORIGINAL, templates=["nope"])


def test_a_drifted_file_is_an_error_not_a_mismatched_pair(tmp_path: Path) -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    data["entries"]["delete_request-s0-007"]["original"] += " (changed)"
    drifted = tmp_path / "rewritten_openings.json"
    drifted.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    for split in (REWRITTEN, REWRITTEN_ORIGINAL):
        with pytest.raises(ValueError, match="delete_request-s0-007: the generator now makes a different scenario"):
            rewritten_scenarios(split, path=drifted)


def test_train_and_dev_never_get_them(generated_all: list[Scenario]) -> None:
    rewritten_openings = {r.rewritten for r in REWRITES.values()}
    for split in ("train", "dev"):
        served = SUITE.scenarios(split=split)
        assert served and not {s.id for s in served} & REWRITES.keys(), split
        assert not {s.opening for s in served} & rewritten_openings, split
    # all (= generate's every split) serves these ids only in the generator's wording
    assert not {s.opening for s in generated_all} & rewritten_openings
    with pytest.raises(ValueError, match="unknown split"):  # GRPO prompts (training) refuse the name
        prompt_rows(SUITE, split=REWRITTEN)


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "eval", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_oracle_scores_100_percent_on_both_arms_and_compare_pairs_them(tmp_path: Path) -> None:
    """Plumbing, not robustness: the oracle is scripted from ``task``, not from the opening's words,
    so 100 % here says the rewritten set is served, run, scored and paired end to end through the
    CLI; what the rewrites do to a model is what ``eval compare`` of two model runs measures."""
    rewritten, original = tmp_path / "rewritten", tmp_path / "original"
    for split, out in ((REWRITTEN, rewritten), (REWRITTEN_ORIGINAL, original)):
        run = _eval("--policy", "oracle", "--split", split, "--out", str(out), "--no-progress")
        assert run.returncode == 0, run.stderr
        records = load_episodes(out)
        assert sorted(r.scenario_id for r in records) == sorted(REWRITES)
        assert all(r.verdict.success and r.verdict.policy_ok and r.verdict.reward == 1.0 for r in records)
        wanted = {i: (r.rewritten if split == REWRITTEN else r.original) for i, r in REWRITES.items()}
        assert {r.scenario_id: r.scenario.opening for r in records} == wanted
    compare = subprocess.run([sys.executable, "-m", "agent", "eval", "compare", str(original), str(rewritten)],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stderr
    assert f"paired episodes: {len(REWRITES)}\n" in compare.stdout and "unpaired" not in compare.stdout
    assert "success: " in compare.stdout and "100.0%  →  " in compare.stdout
    # the arms share scenario ids: resuming one into the other's folder is refused, not taken as done
    clash = _eval("--policy", "oracle", "--split", REWRITTEN_ORIGINAL, "--out", str(rewritten), "--no-progress")
    assert clash.returncode == 2 and "differs in split" in clash.stderr
    unknown = _eval("--policy", "oracle", "--split", "nope", "--out", str(tmp_path / "x"))
    assert unknown.returncode == 2 and "unknown split 'nope'" in unknown.stderr
