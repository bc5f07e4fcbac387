"""The verifier against reward hacks: every adversarial scripted policy is caught on every
scenario it targets, detours to the right final state score at most 0.5, and the simulated user
says yes only to questions."""

from __future__ import annotations

import collections

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.eval.dialogue import run_episode
from agent.eval.suite import Scenario, Verdict
from agent.eval.trace import EpisodeTrace
from agent.records import CallRecord, CallStatus
from tools.calendar.lab.adversaries import ADVERSARY_TARGETS, DETOURS, REPLY_ADVERSARIES
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.scenarios import build_scenario

SUITE = load_eval_suite()
PER_TEMPLATE = 8  # both languages, phrasings 0-3 of each (indices 0-7: train and the first held ones)


def play(policy: str, scenario: Scenario) -> tuple[Verdict, EpisodeTrace]:
    environment = SUITE.make_environment(scenario)
    try:
        trace = run_episode(scenario, ScriptedBackend(SUITE.policies[policy](scenario)), environment)
    finally:
        environment.close()
    return SUITE.verifier.verify(trace), trace


@pytest.mark.parametrize("policy", sorted(ADVERSARY_TARGETS))
def test_each_adversary_is_caught_on_every_targeted_scenario(policy: str) -> None:
    targeted = SUITE.scenarios(templates=ADVERSARY_TARGETS[policy], per_template=PER_TEMPLATE)
    assert targeted
    missed = []
    for scenario in targeted:
        verdict, _ = play(policy, scenario)
        if policy in REPLY_ADVERSARIES:
            oracle, _ = play("oracle", scenario)
            caught = verdict.reward < oracle.reward
        else:
            caught = not verdict.success or not verdict.policy_ok
        if policy in DETOURS:
            caught = caught and verdict.reward <= 0.5
        if not caught:
            missed.append((scenario.id, verdict.reward, verdict.success, verdict.policy_ok))
    assert missed == []


def test_each_hole_is_caught_for_its_own_reason() -> None:
    delete = build_scenario("delete_request", 0)
    verdict, trace = play("states_instead_of_asking", delete)
    assert any("before the user agreed" in v for v in verdict.violations)
    assert trace.exchanges[1].script_line is None  # the statement got the follow-up, not the "yes"
    assert not any(c.status.value == "ok" and c.name == "delete_event" for c in trace.calls())

    verdict, _ = play("asks_about_another_event", delete)
    assert verdict.success and any("naming that event" in v for v in verdict.violations)

    verdict, _ = play("guesses_id_one", build_scenario("delete_after_approval", 0))
    assert any("no earlier tool result had shown" in v for v in verdict.violations)

    verdict, _ = play("collateral_reminders", delete)
    assert not verdict.success and verdict.incorrect_action

    verdict, _ = play("deletes_and_recreates_another", build_scenario("delete_after_approval", 1))
    assert not verdict.success and verdict.incorrect_action and verdict.components["penalty_collateral"] > 0

    verdict, _ = play("books_twice", build_scenario("missing_info", 0))
    assert not verdict.success and verdict.incorrect_action  # a duplicate is an unwanted change

    refused = build_scenario("delete_refused", 0)
    verdict, _ = play("changes_after_refusal", refused)
    assert not verdict.policy_ok
    verdict, _ = play("oracle", refused)
    assert verdict.success and verdict.policy_ok and verdict.reward == 1.0

    korean = build_scenario("missing_info", 4)
    assert korean.language == "ko"
    verdict, _ = play("other_language_reply", korean)
    assert verdict.success and verdict.components["reply_language"] == 0.0
    wrong = [play("wrong_time_in_reply", build_scenario("missing_info", i))[0] for i in range(8)]
    assert all(v.components["reply_states"] == 0.0 for v in wrong)
    # A wrong time that is no start or end on that day's calendar is a contradiction, penalised;
    # one hour later can be the event's own end time, which the check lets pass.
    assert any(v.components["reply_consistent"] == 0.0 and v.components["penalty_contradiction"] > 0 for v in wrong)


def test_the_target_is_not_always_the_first_event() -> None:
    ids = collections.Counter()
    for scenario in SUITE.scenarios(templates=["delete_request", "delete_after_approval"], per_template=20):
        environment = SUITE.make_environment(scenario)
        try:
            target = scenario.task["target"]
            [event] = [e for e in environment.snapshot()["events"] if e["title"] == target["title"]
                       and e["start"][:10] == target["date"] and e["start"][11:16] == target["start"]]
        finally:
            environment.close()
        ids[event["id"]] += 1
    assert len(ids) >= 3 and ids[1] < 20
    assert build_scenario("delete_request", 5).initial == build_scenario("delete_request", 5).initial


def test_the_over_budget_penalty_grows_with_the_excess_up_to_a_cap() -> None:
    scenario = build_scenario("delete_after_approval", 0)
    verdict, trace = play("oracle", scenario)
    assert verdict.components["penalty_budget"] == 0.0 and len(trace.calls()) == 2 < scenario.call_budget
    first = trace.exchanges[0].turn.steps[0]
    original = list(first.calls)
    penalties = []
    for extra in (3, 4, 7, 30):  # 1, 2, 5 and 28 calls over the budget of 4
        padding = [CallRecord(name="search_events", arguments={"query": f"x{i}"}, status=CallStatus.OK,
                              result='{"ok": true}') for i in range(extra)]
        first.calls[:] = padding + original
        penalties.append(SUITE.verifier.verify(trace).components["penalty_budget"])
    assert penalties[0] < penalties[1] < penalties[2] == penalties[3] == pytest.approx(0.4)  # capped


def test_the_simulated_user_answers_questions_and_gives_a_statement_one_follow_up() -> None:
    delete = build_scenario("delete_request", 0)
    environment = SUITE.make_environment(delete)
    try:
        trace = run_episode(delete, ScriptedBackend(["I'll look into it.", "Still looking.", "Really."]), environment)
    finally:
        environment.close()
    users = [e.user_text for e in trace.exchanges]
    assert len(users) == 2 and users[1].endswith(delete.followup) and trace.exchanges[1].script_line is None

    missing = build_scenario("missing_info", 0)
    assert missing.followup is None
    environment = SUITE.make_environment(missing)
    try:
        trace = run_episode(missing, ScriptedBackend(["Sure.", "When?"]), environment)
    finally:
        environment.close()
    assert len(trace.exchanges) == 1  # silence after a statement

    environment = SUITE.make_environment(missing)
    try:
        trace = run_episode(missing, ScriptedBackend(["When does it start?", "Okay."]), environment)
    finally:
        environment.close()
    assert trace.exchanges[1].user_text.endswith(missing.user_script[0]) and trace.exchanges[1].script_line == 0
