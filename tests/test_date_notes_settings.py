"""The date_notes setting (``AGENT_DATE_NOTES``) reaches every place that stamps a user message, as
time_notes does: serving, eval (and its run.json), export, expert iteration, the bench and the demo.

``tools.calendar.date_notes.note_days``, as the calendar's language calls it, is replaced here by a
stand-in that says it was called, so these tests pin the plumbing, not the notes themselves
(tests/test_date_notes.py does those).
"""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.config import Settings, load_settings
from agent.prompt import PromptSettings, stamp_user_text
from tools.calendar.language import CALENDAR_LANGUAGE

NOTED = "NOTED"


@pytest.fixture
def noted_days(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, date]]:
    """Every (text, local day) that ``note_days`` was asked about; each message comes back as NOTED."""
    calls: list[tuple[str, date]] = []

    def note(text: str, now: datetime) -> str:
        calls.append((text, now.date()))
        return NOTED

    monkeypatch.setattr("tools.calendar.language.note_days", note)
    return calls


def test_agent_date_notes_turns_the_setting_on_and_it_is_off_by_default(tmp_path: Path) -> None:
    assert load_settings({"data_dir": str(tmp_path)}, environ={"AGENT_DATE_NOTES": "true"}).date_notes is True
    assert load_settings({"data_dir": str(tmp_path)}, environ={"AGENT_DATE_NOTES": "false"}).date_notes is False
    assert load_settings({"data_dir": str(tmp_path)}, environ={}).date_notes is False
    assert Settings().date_notes is False


def test_the_stamp_notes_days_with_the_local_date_only_when_asked(noted_days: list[tuple[str, date]]) -> None:
    now = datetime(2026, 12, 3, 20, 5, tzinfo=ZoneInfo("UTC"))  # already 4 December in Seoul
    assert stamp_user_text(now, "Asia/Seoul", "내일 치과", language=CALENDAR_LANGUAGE) == "[05:05] 내일 치과"
    assert noted_days == []
    assert stamp_user_text(now, "Asia/Seoul", "내일 치과", date_notes=True, language=CALENDAR_LANGUAGE) == f"[05:05] {NOTED}"
    assert noted_days == [("내일 치과", date(2026, 12, 4))]


def test_day_notes_see_the_message_before_its_time_notes(noted_days: list[tuple[str, date]]) -> None:
    # So that "내일 새벽 1시" reaches note_days in words, which it leaves alone (the night after).
    now = datetime(2026, 12, 3, 9, 5, tzinfo=ZoneInfo("Asia/Seoul"))
    stamp_user_text(now, "Asia/Seoul", "내일 오후 3시에", time_notes=True, date_notes=True, language=CALENDAR_LANGUAGE)
    assert noted_days == [("내일 오후 3시에", date(2026, 12, 3))]


def test_the_runtime_stamps_messages_with_date_notes_when_the_setting_is_on(
        noted_days: list[tuple[str, date]]) -> None:
    from agent.app import user_stamp_factory
    from agent.domain import Domain
    from agent.tools import Registry

    domain = Domain(name="calendar", registry=Registry.of([]), prompt="", language=CALENDAR_LANGUAGE)
    clock = lambda: datetime(2026, 12, 3, 9, 5, tzinfo=ZoneInfo("Asia/Seoul"))  # noqa: E731
    assert user_stamp_factory(Settings(tz="Asia/Seoul"), domain, clock)("내일") == "[09:05] 내일"
    assert user_stamp_factory(Settings(tz="Asia/Seoul", date_notes=True), domain, clock)("내일") == f"[09:05] {NOTED}"


def test_an_eval_run_with_date_notes_records_the_noted_opening(
        noted_days: list[tuple[str, date]], tmp_path: Path) -> None:
    from agent.backends.scripted import ScriptedBackend
    from agent.eval.runner import RunOptions, episode_path, run_eval
    from tools.calendar.lab.eval_suite import load_eval_suite

    suite = load_eval_suite()
    [scenario] = suite.scenarios(templates=["delete_request"], per_template=1, split="train")
    [record] = run_eval(suite, [scenario], lambda s, k: ScriptedBackend(["Done."]),
                        RunOptions(out_dir=tmp_path, progress=False, prompt_settings=PromptSettings(date_notes=True)))
    saved = json.loads(episode_path(tmp_path, record.key).read_text(encoding="utf-8"))
    opening = next(m["content"] for m in saved["messages"] if m["role"] == "user")
    assert opening.endswith(f"] {NOTED}")
    assert noted_days[0][0] == scenario.opening


def test_the_eval_cli_records_date_notes_in_run_json_and_refuses_to_mix_the_two(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.eval import cli

    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_DATE_NOTES", "true")
    out = tmp_path / "run"
    argv = ["--policy", "oracle", "--templates", "delete_request", "--limit", "1", "--no-progress", "--out", str(out)]
    assert cli.main(argv) == 0
    run = json.loads((out / cli.RUN_JSON).read_text(encoding="utf-8"))
    assert run["date_notes"] is True
    monkeypatch.setenv("AGENT_DATE_NOTES", "false")
    assert cli.main(argv) == 2  # the same folder without the notes would mix two runs
    # a run.json from before the setting was recorded meant it off
    del run["date_notes"]
    (out / cli.RUN_JSON).write_text(json.dumps(run), encoding="utf-8")
    assert cli.main(argv) == 0


def test_a_grpo_row_exported_with_date_notes_shows_the_noted_opening(noted_days: list[tuple[str, date]]) -> None:
    from agent.export.grpo import prompt_rows
    from tests.export_helpers import suite

    assert all(NOTED not in r["prompt"][-1]["content"] for r in prompt_rows(suite(), split="train", per_template=1))
    rows = prompt_rows(suite(), split="train", per_template=1, prompt_settings=PromptSettings(date_notes=True))
    assert rows and all(r["prompt"][-1]["content"].endswith(f"] {NOTED}") for r in rows)


def test_the_export_cli_passes_the_date_notes_setting_to_the_grpo_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.export import cli
    from tests.export_helpers import parse

    seen: dict[str, Any] = {}
    monkeypatch.setattr("agent.export.grpo.prompt_rows", lambda suite, **kw: seen.update(kw) or [{}])
    monkeypatch.setattr("agent.export.grpo.write_grpo", lambda rows, out: {"rows": len(rows)})
    assert cli.run(parse(["export", "grpo", "--out", str(tmp_path / "grpo")]), Settings(date_notes=True)) == 0
    assert seen["prompt_settings"].date_notes is True


def test_expert_iteration_takes_date_notes_from_the_settings_and_keeps_it_in_its_identity(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.__main__ import build_parser
    from agent.train import cli
    from agent.train.ei_runs import IDENTITY, EiOptions, check_same_run
    from agent.train.trainer import TrainError

    base = tmp_path / "base.gguf"
    base.write_bytes(b"GGUF")
    taken: list[EiOptions] = []
    monkeypatch.setattr("agent.train.ei.run_ei",
                        lambda opts, settings: taken.append(opts) or {"rounds": [], "test": None})
    args = build_parser().parse_args(["train", "ei", "--base", str(base), "--out", str(tmp_path / "ei")])
    assert cli._run_ei(args, Settings(date_notes=True), base) == 0
    assert taken[0].prompt_settings.date_notes is True

    assert "date_notes" in IDENTITY
    check_same_run(EiOptions(base=base, out=tmp_path / "ei", prompt_settings=PromptSettings(date_notes=True)))
    with pytest.raises(TrainError, match=r"other options \(date_notes\)"):
        check_same_run(EiOptions(base=base, out=tmp_path / "ei", prompt_settings=PromptSettings(date_notes=False)))


def test_the_bench_gives_every_peer_the_date_notes_setting(tmp_path: Path) -> None:
    from agent.bench import peers
    from agent.eval.suite import load_eval_suite

    settings = load_settings({"data_dir": str(tmp_path)}, environ={"AGENT_DATE_NOTES": "true"})
    suite = load_eval_suite(settings)
    environment = peers._environment(suite, suite.scenarios(split="dev")[0], settings)
    try:
        assert environment.prompt_settings.date_notes is True
    finally:
        environment.close()


def test_the_demo_serves_and_trains_with_its_own_date_notes_setting(tmp_path: Path) -> None:
    from agent.app import demo_settings
    from agent.train.demo import SERVING_ENV, demo_env
    from models import demo

    other = str(not demo.DEMO_DATE_NOTES).lower()
    settings = demo_settings(load_settings({}, {"AGENT_DATA_DIR": str(tmp_path), "AGENT_DATE_NOTES": other}))
    assert settings.date_notes is demo.DEMO_DATE_NOTES
    assert "AGENT_DATE_NOTES" in SERVING_ENV
    assert demo_env(True, False)["AGENT_DATE_NOTES"] == "false"
    assert demo_env(False, True)["AGENT_DATE_NOTES"] == "true"


def test_train_grpo_without_data_renders_its_prompts_with_the_runtimes_settings(
        noted_days: list[tuple[str, date]]) -> None:
    # As `export grpo` does: the prompt a rollout starts from is the one serving would show.
    import argparse

    from agent.eval.suite import load_eval_suite
    from agent.export.grpo import prompt_rows
    from agent.train.cli import _grpo_rows

    settings = Settings(prompt_style="short", date_notes=True)
    args = argparse.Namespace(data=None, split="train", per_template=1, seed=0, limit=None)
    rows = _grpo_rows(args, settings)
    assert rows and all(r["prompt"][-1]["content"].endswith(f"] {NOTED}") for r in rows)
    assert rows == prompt_rows(load_eval_suite(settings), split="train", per_template=1,
                               prompt_settings=PromptSettings(prompt_style="short", date_notes=True))
    assert [r["prompt"][0] for r in rows] != [r["prompt"][0] for r in prompt_rows(
        load_eval_suite(settings), split="train", per_template=1)]  # the short system prompt, not the full one
