"""The oracle solves every task and the verifier agrees; every broken policy is caught."""

from __future__ import annotations

import json

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.eval.cli import balanced
from agent.eval.dialogue import run_episode
from agent.eval.suite import Scenario, Verdict
from agent.eval.trace import EpisodeTrace
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.policies import BROKEN_TARGETS
from tools.calendar.lab.scenarios import CORE_TEMPLATES

SUITE = load_eval_suite()


def trace_of(policy: str, scenario: Scenario) -> EpisodeTrace:
    environment = SUITE.make_environment(scenario)
    try:
        return run_episode(scenario, ScriptedBackend(SUITE.policies[policy](scenario)), environment)
    finally:
        environment.close()


def play(policy: str, scenario: Scenario) -> Verdict:
    return SUITE.verifier.verify(trace_of(policy, scenario))


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


CHANGE_TEMPLATES = ("delete_request", "reschedule", "delete_refused", "reschedule_refused", "delete_same_title",
                    "delete_after_approval", "cancel_one_occurrence", "move_one_occurrence",
                    "delete_series_after_approval")


def test_the_title_searching_oracle_narrows_every_lookup_and_still_scores_100_percent() -> None:
    """``oracle_by_title`` (the rows of ``train demo --search-by-title``) looks the event up with its
    title as the query: every search it makes names the title the user asked about, the result lists
    only events whose title holds it, and every task, fresh or after earlier ones, is still solved with full
    marks and no unasked change."""
    fresh = SUITE.scenarios(split="train", templates=CHANGE_TEMPLATES, per_template=8)
    chats = SUITE.continued([s for s in fresh if s.template in CHANGE_TEMPLATES[:5]], 1, 3, 0)
    assert {s.template for s in fresh} == set(CHANGE_TEMPLATES) and chats
    failures, searches = [], 0
    for scenario in [*fresh, *chats]:
        trace = trace_of("oracle_by_title", scenario)
        verdict = SUITE.verifier.verify(trace)
        if not (verdict.success and verdict.policy_ok and verdict.reward == 1.0 and not verdict.unasked_changes):
            failures.append((scenario.id, verdict.errors, verdict.violations))
        title = scenario.task["target"]["title"]
        start = max(i for i, m in enumerate(trace.messages)  # the last task's request: earlier tasks' are the plain oracle's
                    if m.get("role") == "user" and scenario.opening in str(m.get("content")))
        for message in trace.messages[start:]:
            for call in message.get("tool_calls") or []:
                if call["function"]["name"] == "search_events":
                    searches += 1
                    assert json.loads(call["function"]["arguments"]).get("query") == title, scenario.id
            if message.get("role") == "tool" and message.get("name") == "search_events":
                listed = json.loads(message["content"])["data"]["events"]
                assert listed and all(title.casefold() in e["title"].casefold() for e in listed), scenario.id
    assert failures == [] and searches >= len(fresh) + len(chats)


def test_the_day_checking_oracle_looks_at_a_complete_bookings_day_first_and_still_scores_100_percent() -> None:
    """``oracle_checks_day`` (the drill rows of ``train demo --drill-checks-day``): a complete booking
    first searches its day with no title, then creates it as asked, and every drill and probe
    scenario is still solved with full marks; other templates are the plain oracle's."""
    drill = SUITE.scenarios(split="train", templates=["time_drill"], per_template=12)
    probe = SUITE.scenarios(templates=["time_probe"], per_template=6, split="test")
    assert {s.language for s in drill} == {s.language for s in probe} == {"en", "ko"}
    failures = []
    for scenario in [*drill, *probe]:
        trace = trace_of("oracle_checks_day", scenario)
        verdict = SUITE.verifier.verify(trace)
        if not (verdict.success and verdict.policy_ok and verdict.reward == 1.0):
            failures.append((scenario.id, verdict.errors, verdict.violations))
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for m in trace.messages for c in m.get("tool_calls") or []]
        assert calls[0] == ("search_events", {"date": scenario.task["date"]}), scenario.id
        assert [name for name, _ in calls[1:]] == ["create_event"]
        assert calls[1][1]["start_time"] == scenario.task["start_time"]
    assert failures == []
    [other] = SUITE.scenarios(split="train", templates=["multi_attendee"], per_template=1)
    assert trace_of("oracle_checks_day", other).messages == trace_of("oracle", other).messages
