"""Runner, summary, reports and CLI: resume, interruption, pass^k, files, usage errors."""

from __future__ import annotations

import csv
import dataclasses
import json
import threading
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo
from typing import Any

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.eval import cli
from agent.eval.metrics import OVERALL, format_table, summarize
from agent.eval.record import EpisodeRecord
from agent.eval.report import ERRORS_CSV, SUMMARY_JSON, SUMMARY_TXT, write_reports
from agent.eval.runner import EPISODES_DIR, RunOptions, episode_path, load_episodes, run_eval
from agent.eval.suite import Scenario, Verdict
from tools.calendar.lab.eval_suite import load_eval_suite

SUITE = load_eval_suite()


def few() -> list[Scenario]:
    return cli.balanced(SUITE.scenarios(per_template=4, split="train"), len(SUITE.templates))


class Counting:
    """A backend_for that records which episodes were actually run."""

    def __init__(self, policy: str = "oracle") -> None:
        self.policy = policy
        self.built: list[str] = []

    def __call__(self, scenario: Scenario, sample: int) -> ScriptedBackend:
        self.built.append(f"{scenario.id}/{sample}")
        return ScriptedBackend(SUITE.policies[self.policy](scenario))


def test_balanced_limit_covers_every_template() -> None:
    assert {s.template for s in few()} == set(SUITE.templates)


def test_every_episode_is_written_and_a_rerun_resumes(tmp_path: Path) -> None:
    scenarios = few()
    options = RunOptions(out_dir=tmp_path, samples=2, progress=False)
    first = Counting()
    records = run_eval(SUITE, scenarios, first, options)
    assert len(records) == len(first.built) == 2 * len(scenarios)
    assert len(list((tmp_path / EPISODES_DIR).glob("*.json"))) == len(records)

    gone = episode_path(tmp_path, records[3].key)
    gone.unlink()
    half_written = episode_path(tmp_path, records[5].key)
    half_written.write_text('{"key": "trunc', encoding="utf-8")
    second = Counting()
    again = run_eval(SUITE, scenarios, second, options)
    assert sorted(second.built) == sorted([f"{records[3].scenario_id}/{records[3].sample}",
                                           f"{records[5].scenario_id}/{records[5].sample}"])
    assert [r.key for r in again] == [r.key for r in records]


def test_an_interrupted_episode_is_not_saved(tmp_path: Path) -> None:
    cancel = threading.Event()
    scenario = SUITE.scenarios(templates=["delete_request"], per_template=1)[0]
    oracle = SUITE.policies["oracle"](scenario)

    def interrupting(messages: list[dict[str, Any]]) -> str:
        cancel.set()  # Ctrl-C arrives while the model is thinking
        return oracle(messages)

    records = run_eval(SUITE, [scenario], lambda s, k: ScriptedBackend(interrupting),
                       RunOptions(out_dir=tmp_path, progress=False), cancel=cancel)
    assert records == [] and not list(tmp_path.glob(f"{EPISODES_DIR}/*.json"))


def test_episode_record_holds_messages_calls_components_and_stop_reasons(tmp_path: Path) -> None:
    scenario = SUITE.scenarios(templates=["delete_request"], per_template=1)[0]
    [record] = run_eval(SUITE, [scenario], Counting(), RunOptions(out_dir=tmp_path, progress=False))
    saved = json.loads(episode_path(tmp_path, record.key).read_text(encoding="utf-8"))
    assert saved["stop_reasons"] == ["asked_user", "final_reply"]
    assert [c["name"] for c in saved["calls"]] == ["search_events", "delete_event"]
    assert saved["calls"][1]["approved"] is True and saved["calls"][1]["user_messages"] == 2
    assert [m["role"] for m in saved["messages"]][:2] == ["system", "user"]
    assert saved["verdict"]["components"]["total"] == 1.0 and saved["backend"]["backend"] == "scripted"


def test_user_messages_in_the_transcript_are_stamped_with_the_episodes_time(tmp_path: Path) -> None:
    scenario = SUITE.scenarios(templates=["delete_request"], per_template=1)[0]
    [record] = run_eval(SUITE, [scenario], Counting(), RunOptions(out_dir=tmp_path, progress=False))
    saved = json.loads(episode_path(tmp_path, record.key).read_text(encoding="utf-8"))
    local = datetime.fromisoformat(scenario.now).astimezone(ZoneInfo(scenario.tz))
    stamp = f"[{local:%H:%M}] "
    users = [m["content"] for m in saved["messages"] if m["role"] == "user"]
    assert users == [stamp + scenario.opening, stamp + scenario.user_script[0]]  # as the runtime stores them
    assert [e["user"] for e in saved["exchanges"]] == [e["turn"]["user_text"] for e in saved["exchanges"]] == users
    assert stamp.strip() not in saved["messages"][0]["content"]  # the system message has the date only
    assert f"{local:%Y-%m-%d}" in saved["messages"][0]["content"]


def test_parallel_run_gives_the_same_outcomes(tmp_path: Path) -> None:
    scenarios = few()
    one = run_eval(SUITE, scenarios, Counting("deletes_without_asking"), RunOptions(out_dir=tmp_path / "a", progress=False))
    many = run_eval(SUITE, scenarios, Counting("deletes_without_asking"),
                    RunOptions(out_dir=tmp_path / "b", concurrency=3, progress=False))
    strip = lambda rs: [(r.key, r.verdict.success, r.verdict.policy_ok) for r in rs]  # noqa: E731
    assert strip(one) == strip(many)


def record(scenario: str, sample: int, success: bool, template: str = "t", calls: int = 1, valid: int = 1,
           policy_ok: bool = True, incorrect: bool = False) -> EpisodeRecord:
    """An episode record with just the verdict the summary reads (no conversation)."""
    task = dataclasses.replace(SUITE.scenarios(per_template=1)[0], id=scenario, template=template)
    verdict = Verdict(success=success, policy_ok=policy_ok, incorrect_action=incorrect, reward=float(success),
                      valid_calls=valid, attempted_calls=calls, components={"total": float(success)})
    return EpisodeRecord(key=f"{scenario}__s{sample}", scenario_id=scenario, template=template, variant=task.variant,
                         split=task.split, language=task.language, sample=sample, scenario=task, messages=[],
                         exchanges=[], stop_reasons=[], calls=[], final_snapshot={}, verdict=verdict, backend={},
                         error=None, seconds=0.0)


def test_summary_figures_and_pass_k() -> None:
    records = [
        record("a", 0, True), record("a", 1, True),  # both samples succeed
        record("b", 0, True), record("b", 1, False, calls=3, valid=1, policy_ok=False, incorrect=True),
        record("c", 0, False, template="u", calls=0, valid=0), record("c", 1, False, template="u", calls=0, valid=0),
    ]
    rows = {r.group: r for r in summarize(records)}
    t = rows["t"]
    assert (t.episodes, t.scenarios, t.k) == (4, 2, 2)
    assert t.task_success == 75.0 and t.pass_k == 50.0
    assert t.valid_tool_calls == pytest.approx(100 * 4 / 6) and t.mean_tool_calls == 1.5
    assert t.policy_compliance == 75.0 and t.incorrect_action == 25.0
    assert rows["u"].valid_tool_calls is None and rows["u"].pass_k == 0.0
    assert rows[OVERALL].pass_k == pytest.approx(100 / 3)
    table = format_table(summarize(records))
    assert "pass^2" in table and table.splitlines()[-1].startswith(OVERALL)


def test_reports_are_written(tmp_path: Path) -> None:
    records = run_eval(SUITE, few(), Counting("guesses_missing_time"), RunOptions(out_dir=tmp_path, progress=False))
    write_reports(tmp_path, records, "header")
    assert (tmp_path / SUMMARY_TXT).read_text(encoding="utf-8").startswith("header\n")
    assert json.loads((tmp_path / SUMMARY_JSON).read_text(encoding="utf-8"))["rows"][-1]["group"] == OVERALL
    with (tmp_path / ERRORS_CSV).open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for column in ("prompt_id", "template", "completion", "tool_name", "arguments", "tool_result", "call_count",
                   "safety", "progress", "final", "penalty_duplicate", "total", "verifier_error"):
        assert column in rows[0], column
    guessed = [r for r in rows if r["template"] == "missing_info"]
    assert guessed and "before the user gave the required information" in guessed[0]["verifier_error"]
    assert guessed[0]["tool_name"] == "create_event" and '"09:00"' in guessed[0]["arguments"]


def test_cli_runs_compares_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--templates", "delete_request,no_tool", "--per-template", "4", "--no-progress"]
    assert cli.main([*base, "--policy", "oracle", "--out", str(tmp_path / "oracle")]) == 0
    assert "overall" in capsys.readouterr().out
    assert cli.main([*base, "--policy", "deletes_without_asking", "--out", str(tmp_path / "broken")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "oracle"), str(tmp_path / "broken")]) == 0
    out = capsys.readouterr().out
    assert "paired episodes: 6" in out and "exact McNemar p = 1" in out  # the gate held: same success
    assert len(load_episodes(tmp_path / "oracle")) == 6
    # The same folder with another policy would mix two runs: refused.
    assert cli.main([*base, "--policy", "tools_for_greetings", "--out", str(tmp_path / "oracle")]) == 2


@pytest.mark.parametrize("argv", [
    ["--policy", "nope"],
    ["--backend", "scripted"],  # no such backend: --policy is the scripted one
    ["--policy", "oracle", "--backend", "llama"],
    ["--backend", "openai", "--model", "m"],
    ["--policy", "oracle", "--samples", "0"],
    ["--policy", "oracle", "--templates", "nope"],
    ["--policy", "oracle", "--weights", '{"safty": 1}'],
])
def test_cli_usage_errors_exit_2(argv: list[str], tmp_path: Path) -> None:
    try:
        status = cli.main([*argv, "--out", str(tmp_path), "--no-progress"])
    except SystemExit as exc:  # argparse's own refusals
        status = exc.code
    assert status == 2


@pytest.mark.parametrize("variable, value", [("AGENT_AGENDA_TIME", "25:00"), ("AGENT_TZ", "Nowhere")])
def test_a_bad_setting_stops_eval_with_the_runtimes_one_line_error(
        variable: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Both entries (``python -m agent eval`` and the stand-alone ``agent.eval.cli``) check the
    domain's keys as the runtime does on start-up, before any episode runs."""
    import subprocess
    import sys

    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(variable, value)
    argv = ["--policy", "oracle", "--limit", "1", "--no-progress", "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    line = capsys.readouterr().err
    assert line.startswith("error: ") and line.count("\n") == 1 and value in line
    assert not (tmp_path / "out").exists()
    runtime = subprocess.run([sys.executable, "-m", "agent", "eval", *argv], capture_output=True, text=True,
                             timeout=300)
    assert (runtime.returncode, runtime.stderr) == (2, line)


def test_each_demo_pair_and_its_base_get_their_own_default_result_folder() -> None:
    """`eval --demo`, `eval --demo --no-adapter` and the other pair must not resume into each other's folder."""
    import argparse

    from agent.eval.cli import _label

    def label(demo: str, **flags: object) -> str:
        settings = type("S", (), {"remote_model": None, "backend": "llama", "demo": demo})()
        args = argparse.Namespace(policy=None, backend="llama", model_path=None, lora_path=None, demo=True, **flags)
        return _label(args, settings)

    assert label("gemma3-270m", no_adapter=None) == "llama-demo-gemma3-270m"
    assert label("gemma3-270m", no_adapter=True) == "llama-demo-gemma3-270m-base"
    assert label("smollm2", no_adapter=None) == "llama-demo-smollm2"
