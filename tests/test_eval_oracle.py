"""The oracle solves every task and the verifier agrees; every broken policy is caught."""

from __future__ import annotations

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.eval.cli import balanced
from agent.eval.dialogue import run_episode
from agent.eval.suite import Scenario, Verdict
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.policies import BROKEN_TARGETS
from tools.calendar.lab.scenarios import CORE_TEMPLATES

SUITE = load_eval_suite()


def play(policy: str, scenario: Scenario) -> Verdict:
    environment = SUITE.make_environment(scenario)
    try:
        trace = run_episode(scenario, ScriptedBackend(SUITE.policies[policy](scenario)), environment)
    finally:
        environment.close()
    return SUITE.verifier.verify(trace)


def test_oracle_scores_100_percent_on_all_scenarios() -> None:
    scenarios = SUITE.scenarios()
    assert sum(s.template in CORE_TEMPLATES for s in scenarios) == 400
    failures = []
    for scenario in scenarios:
        verdict = play("oracle", scenario)
        if not (verdict.success and verdict.policy_ok and verdict.reward == 1.0 and not verdict.incorrect_action):
            failures.append((scenario.id, verdict.errors, verdict.violations, verdict.components))
    assert failures == []


@pytest.mark.parametrize("policy", sorted(BROKEN_TARGETS))
def test_each_broken_policy_is_caught_on_every_targeted_scenario(policy: str) -> None:
    targeted = SUITE.scenarios(templates=BROKEN_TARGETS[policy], per_template=20)
    assert targeted
    missed = []
    for scenario in targeted:
        verdict = play(policy, scenario)
        if verdict.success and verdict.policy_ok:
            missed.append(scenario.id)
        assert verdict.reward < 1.0, scenario.id
    assert missed == []


def test_broken_policies_are_caught_for_the_right_reason() -> None:
    delete = SUITE.scenarios(templates=["delete_request"], per_template=1)[0]
    verdict = play("deletes_without_asking", delete)
    assert verdict.success and not verdict.policy_ok  # the gate held, the rule was still broken
    assert "before the user agreed" in verdict.violations[0]

    missing = SUITE.scenarios(templates=["missing_info"], per_template=1)[0]
    verdict = play("guesses_missing_time", missing)
    assert not verdict.success and verdict.incorrect_action and verdict.components["safety_info"] == 0.0

    conflict = SUITE.scenarios(templates=["conflict_create"], per_template=1)[0]
    verdict = play("ignores_conflicts", conflict)
    assert not verdict.success and verdict.incorrect_action

    greeting = SUITE.scenarios(templates=["no_tool"], per_template=2)[0]
    verdict = play("tools_for_greetings", greeting)
    assert not verdict.success and not verdict.policy_ok and verdict.components["no_tools"] == 0.0


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_oracle_scores_100_percent_on_continued_chats_of_every_split_and_language(split: str) -> None:
    """The last task after one to three earlier tasks of the same chat (``--history 1-3``): the
    oracle scripts only the last task and must still solve it with full marks, changing nothing
    that an earlier task left behind."""
    assert SUITE.continued is not None
    base = SUITE.scenarios(split=split, per_template=16)
    sample = [s for language in ("en", "ko") for s in balanced([s for s in base if s.language == language], 5)]
    chats = SUITE.continued(sample, 1, 3, 0)
    assert {c.language for c in chats} == {"en", "ko"} and {c.split for c in chats} == {split}
    assert all(c.history and c.task["history"]["event_ids"] for c in chats)
    failures = []
    for chat in chats:
        verdict = play("oracle", chat)
        if not (verdict.success and verdict.policy_ok and verdict.reward == 1.0 and verdict.unasked_changes == 0):
            failures.append((chat.id, verdict.errors, verdict.violations))
    assert failures == []
