"""Continued chats: a task after earlier tasks of the same conversation, and the "unasked %" column.

The history must be what the runtime keeps (played through ``Runtime.handle`` here, turn by turn,
and compared message for message), the store must be the one the history was made on, the
scenarios must not depend on the process, and a policy that changes an earlier task's event must
be counted -- so the column can fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from agent.app import build_runtime
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.domain import Domain
from agent.eval import cli
from agent.eval.dialogue import history_messages, run_episode
from agent.eval.metrics import OVERALL, format_table, summarize
from agent.eval.report import SUMMARY_JSON
from agent.eval.suite import Scenario, Verdict
from agent.eval.trace import EpisodeTrace
from tools.calendar.lab.continued import REPLAY_KEY, ApprovalTape, HistoryMismatch, chat_store, continue_scenarios
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.scenario_state import load_state
from tools.calendar.language import CALENDAR_LANGUAGE
from tools.calendar.prompt_text import DOMAIN_PROMPT
from tools.calendar.store import CalendarStore
from tools.calendar.tools import build_registry

SUITE = load_eval_suite()
REPO = Path(__file__).resolve().parent.parent
DESTRUCTIVE = ("delete_request", "delete_after_approval", "reschedule", "delete_series_after_approval")


@pytest.fixture(scope="module")
def chats() -> list[Scenario]:
    """Continued chats over every template, one to three earlier tasks, of the test split."""
    return continue_scenarios(SUITE.scenarios(split="test", per_template=8), 1, 3)


def play(policy: str, scenario: Scenario) -> tuple[EpisodeTrace, Verdict]:
    environment = SUITE.make_environment(scenario)
    try:
        trace = run_episode(scenario, ScriptedBackend(SUITE.policies[policy](scenario)), environment)
    finally:
        environment.close()
    return trace, SUITE.verifier.verify(trace)


def test_a_chat_shares_one_now_language_and_split_and_mixes_templates(chats: list[Scenario]) -> None:
    by_id = {s.id: s for s in SUITE.scenarios(split="test", per_template=8)}
    for chat in chats:
        last = by_id[chat.id.split("~")[0]]
        earlier = chat.task["history"]["templates"]
        assert chat.split == last.split == "test" and chat.template == last.template and chat.now == last.now
        assert 1 <= len(earlier) <= 3 and last.template not in earlier and len(set(earlier)) == len(earlier)
        users = [m for m in chat.history if m["role"] == "user"]
        assert len(users) >= len(earlier)
    assert Counter(len(c.task["history"]["tasks"]) for c in chats).keys() == {1, 2, 3}
    links = Counter(c.task["history"]["link"] for c in chats)
    assert links[None] >= 3 and links["title"] + links["day"] >= 3, links  # both kinds of chat


def test_the_expected_store_is_the_last_tasks_plus_the_earlier_events_unchanged(chats: list[Scenario]) -> None:
    by_id = {s.id: s for s in SUITE.scenarios(split="test", per_template=8)}
    for chat in chats[:8]:
        last = by_id[chat.id.split("~")[0]]
        store = chat_store(chat)
        try:
            start = store.snapshot(with_ids=True)
        finally:
            store.close()
        earlier = set(chat.task["history"]["event_ids"])
        ids = [e["id"] for e in start["events"]]
        assert len(ids) == len(set(ids)) and earlier and earlier <= set(ids)
        # the last task's events keep its own ids; the earlier tasks' are the others, as they left them
        assert set(ids) - earlier == set(range(1, len(last.initial["events"]) + 1))
        assert [e for e in chat.expected["events"] if e["id"] not in earlier] == last.expected["events"]
        assert [e for e in chat.expected["events"] if e["id"] in earlier] == [e for e in start["events"] if e["id"] in earlier]


def test_the_history_is_what_the_runtime_keeps(chats: list[Scenario], tmp_path: Path) -> None:
    """The history's user messages typed into a real Runtime (its session store, its stamps, the
    loop), the recorded outputs as the model: the session holds exactly the eval's history, and
    the calendar ends exactly as the episode's store starts."""
    chat = next(c for c in chats if len(c.task["history"]["tasks"]) == 3)
    environment = SUITE.make_environment(chat)
    try:
        trace = run_episode(chat, ScriptedBackend(SUITE.policies["oracle"](chat)), environment)
        shown = trace.messages[1:1 + len(chat.history)]
        assert shown == history_messages(chat, environment)
    finally:
        environment.close()
    assert trace.messages[1 + len(chat.history)]["content"].endswith(chat.opening)  # then the task itself

    store = CalendarStore(tmp_path / "calendar.sqlite3", tz=chat.tz)
    load_state(store, chat.initial)
    now = chat.now_datetime()
    domain = Domain(name="calendar", registry=build_registry(store, now=lambda: now), prompt=DOMAIN_PROMPT,
                    language=CALENDAR_LANGUAGE, close=store.close)
    outputs = [m["content"] for m in chat.history if m["role"] == "assistant"]
    runtime = build_runtime(load_settings({"data_dir": str(tmp_path)}, environ={}), ScriptedBackend(outputs),
                            domain=domain, clock=lambda: now)
    tape = ApprovalTape(answers=[list(a) for a in chat.initial[REPLAY_KEY]])
    try:
        for message in chat.history:
            if message["role"] == "user":
                runtime.handle("chat", message["content"], tape)
        kept = runtime.sessions.history(runtime.sessions.current("chat"))
        assert kept == shown
        assert store.snapshot(with_ids=True) == trace.initial
    finally:
        runtime.close()


def test_a_history_that_does_not_replay_on_its_store_is_refused(chats: list[Scenario]) -> None:
    chat = next(c for c in chats if any(m.get("name") == "create_event" for m in c.history))
    forged = [dict(m) for m in chat.history]
    at = next(i for i, m in enumerate(forged) if m.get("name") == "create_event")
    forged[at]["content"] = forged[at]["content"].replace('"ok": true', '"ok": true, "forged": 1')
    with pytest.raises(HistoryMismatch):
        chat_store(replace(chat, history=tuple(forged)))
    with pytest.raises(HistoryMismatch):
        chat_store(replace(chat, initial={**chat.initial, REPLAY_KEY: []}) if chat.initial[REPLAY_KEY]
                   else replace(chat, initial={**chat.initial, REPLAY_KEY: [[True, "extra"]]}))


@pytest.mark.parametrize("policy", ["deletes_earlier_event", "moves_earlier_event"])
def test_an_unasked_change_to_an_earlier_event_is_counted_and_fails_the_task(chats: list[Scenario], policy: str) -> None:
    targeted = [c for c in chats if c.template in DESTRUCTIVE]
    assert targeted
    for chat in targeted:
        _, oracle = play("oracle", chat)
        assert oracle.unasked_changes == 0 and oracle.success
        _, verdict = play(policy, chat)
        assert verdict.unasked_changes == 1, (chat.id, verdict.violations)
        assert not verdict.success and verdict.incorrect_action and verdict.components["penalty_collateral"] > 0


def test_the_summary_shows_unasked_changes_only_for_continued_chats(chats: list[Scenario], tmp_path: Path) -> None:
    from agent.eval.runner import RunOptions, run_eval

    targeted = [c for c in chats if c.template in DESTRUCTIVE][:2] + [c for c in chats if c.template == "missing_info"][:2]
    backend_for = lambda scenario, sample: ScriptedBackend(SUITE.policies["deletes_earlier_event"](scenario))  # noqa: E731
    records = run_eval(SUITE, targeted, backend_for, RunOptions(out_dir=tmp_path, progress=False))
    overall = summarize(records)[-1]
    assert overall.group == OVERALL and overall.unasked_changes == 50.0
    table = format_table(summarize(records)).splitlines()
    column = table[0].index("unasked %")
    assert table[-1][column:column + len("unasked %")].strip() == "50.0"

    fresh = run_eval(SUITE, SUITE.scenarios(templates=["delete_request"], per_template=1), backend_for,
                     RunOptions(out_dir=tmp_path / "fresh", progress=False))
    assert summarize(fresh)[-1].unasked_changes is None  # no chat behind it: "—", not 0


def test_continued_chats_are_the_same_in_another_process(chats: list[Scenario]) -> None:
    code = ("import json; from tools.calendar.lab.eval_suite import load_eval_suite; "
            "from tools.calendar.lab.continued import continue_scenarios; s = load_eval_suite(); "
            "print(json.dumps([c.to_dict() for c in continue_scenarios(s.scenarios(split='test', per_template=8)[:5], 1, 3)]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps([c.to_dict() for c in chats[:5]]))


def test_cli_history_runs_continued_chats_and_refuses_a_bad_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--policy", "oracle", "--split", "dev", "--templates", "delete_request,all_day_create", "--per-template", "8",
            "--history", "2", "--no-progress", "--out", str(tmp_path / "run")]
    assert cli.main(argv) == 0
    rows = json.loads((tmp_path / "run" / SUMMARY_JSON).read_text())["rows"]
    assert rows[-1]["task_success"] == 100.0 and rows[-1]["unasked_changes"] == 0.0
    assert "after 2 earlier tasks" in capsys.readouterr().out
    episodes = [json.loads(p.read_text()) for p in (tmp_path / "run" / "episodes").glob("*.json")]
    assert episodes and all(len(e["scenario"]["task"]["history"]["tasks"]) == 2 for e in episodes)
    for bad in ("0", "4", "1-", "3-1", "two"):
        assert cli.main([*argv[:-2], "--out", str(tmp_path / "bad"), "--history", bad]) == 2
        assert "--history" in capsys.readouterr().err


@pytest.mark.parametrize("keep", [2, 3, 4])  # 1 cuts into a task of its own (a fresh one too)
def test_the_oracle_plays_its_task_when_the_window_cuts_the_history(chats: list[Scenario], keep: int) -> None:
    """A short history window (``history_turns``) drops the oldest turns in blocks: the window then
    starts inside the history, and a scripted policy must still see exactly its own task."""
    long_chats = [c for c in chats if len(c.task["history"]["tasks"]) == 3][:4]
    assert long_chats
    for chat in long_chats:
        environment = SUITE.make_environment(chat)
        try:
            trace = run_episode(chat, ScriptedBackend(SUITE.policies["oracle"](chat)), environment, history_turns=keep)
        finally:
            environment.close()
        verdict = SUITE.verifier.verify(trace)
        assert verdict.success and verdict.policy_ok and verdict.reward == 1.0, (chat.id, verdict.errors)


def test_a_denied_try_on_an_earlier_event_changes_nothing_but_is_reported(chats: list[Scenario]) -> None:
    """The demo model's failure: it tried to move an earlier event and the person said no. The
    store keeps it (no unasked change), the try is a violation and the ``unasked_attempts`` figure."""
    from agent.formats import format_tool_call

    chat = next(c for c in chats if c.template == "delete_request")
    victim = chat.task["history"]["event_ids"][0]
    oracle = SUITE.policies["oracle"](chat)
    tried: list[bool] = []

    def policy(messages: list[dict]) -> str:
        if not tried:  # first, before anything was asked: the gate has no yes to give
            tried.append(True)
            return format_tool_call("update_event", {"event_id": victim, "start_time": "07:00"})
        return oracle(messages)

    environment = SUITE.make_environment(chat)
    try:
        trace = run_episode(chat, ScriptedBackend(policy), environment)
    finally:
        environment.close()
    verdict = SUITE.verifier.verify(trace)
    assert verdict.unasked_changes == 0 and verdict.components["unasked_attempts"] == 1.0
    assert not verdict.policy_ok and any("before the user agreed" in v for v in verdict.violations)
    _, clean = play("oracle", chat)
    assert clean.components["unasked_attempts"] == 0.0


def test_a_history_played_by_the_title_searching_oracle_has_the_same_tasks_in_its_style(
        chats: list[Scenario], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--history-by oracle_by_title``: the same earlier tasks, drawn alike, played by the oracle
    that looks events up by title, so every lookup before a change in the history names a title;
    the chat's id says so (it never pairs with the oracle-history chat), the oracle still solves the
    last task, and a policy that does not solve every task, or the flag without --history, is refused."""
    base = SUITE.scenarios(split="test", per_template=8)[:12]
    plain = {c.id: c for c in chats}
    styled = continue_scenarios(base, 1, 3, history_by="oracle_by_title")
    change_lookups = 0
    for chat in styled:
        twin = plain[chat.id.removesuffix("~oracle_by_title")]
        assert chat.id != twin.id and chat.task["history"]["tasks"] == twin.task["history"]["tasks"]
        calls = [c for m in chat.history if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        for before, after in zip(calls, calls[1:]):
            if before["function"]["name"] == "search_events" and after["function"]["name"] in (
                    "update_event", "delete_event"):
                change_lookups += 1
                assert json.loads(before["function"]["arguments"]).get("query"), chat.id
        _, verdict = play("oracle", chat)
        assert verdict.success and verdict.reward == 1.0 and verdict.unasked_changes == 0, chat.id
    assert change_lookups > 0
    argv = ["--policy", "oracle", "--split", "dev", "--templates", "delete_request", "--per-template", "4",
            "--no-progress", "--out", str(tmp_path / "run")]
    assert cli.main([*argv, "--history", "1", "--history-by", "deletes_without_asking"]) == 2
    assert "oracle_by_title" in capsys.readouterr().err
    assert cli.main([*argv, "--history-by", "oracle_by_title"]) == 2
    assert "add --history" in capsys.readouterr().err
