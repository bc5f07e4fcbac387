"""``python -m agent`` as a user meets it: help, no model, a bad adapter, a piped session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_agent(args: list[str], tmp_path: Path, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    environ.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1", **env)
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], input=stdin, capture_output=True, text=True, env=environ, timeout=300
    )


def test_help_lists_the_subcommands(tmp_path):
    result = run_agent(["--help"], tmp_path)
    assert result.returncode == 0
    for command in ("chat", "eval", "export", "bench", "doctor"):
        assert command in result.stdout


def test_no_model_says_how_to_get_one(tmp_path):
    result = run_agent([], tmp_path)
    assert result.returncode == 2
    assert "python -m models pull" in result.stderr and "--demo" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("adapter", ["missing.gguf", "empty.gguf"])
def test_a_bad_adapter_is_one_line_and_exit_2_not_a_segfault(tmp_path, smollm2, adapter):
    path = tmp_path / adapter
    if adapter == "empty.gguf":
        path.write_bytes(b"")
    result = run_agent(["--model", str(smollm2), "--adapter", str(path)], tmp_path, stdin="hello\n")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0]


def test_bench_refuses_a_grammar_model_that_is_not_a_model_before_loading_anything(tmp_path, smollm2):
    garbage = tmp_path / "qwen3.gguf"
    garbage.write_bytes(b"not a gguf at all")
    result = run_agent(["--model", str(smollm2), "bench", "--grammar-model", str(garbage)], tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(garbage) in lines[0]


def test_adapter_from_the_environment_that_is_missing_is_an_error(tmp_path, smollm2):
    missing = tmp_path / "gone.gguf"
    result = run_agent([], tmp_path, stdin="hello\n", AGENT_MODEL_PATH=str(smollm2), AGENT_LORA_PATH=str(missing))
    assert result.returncode == 2
    assert str(missing) in result.stderr


def test_piped_session_runs_commands_and_a_turn_with_the_demo_model(tmp_path, smollm2):
    stdin = "/tools\n/events 2026-12-01\nhello\n/quit\n"
    result = run_agent(["--demo", "--ctx", "4096"], tmp_path, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert "delete_event [asks first]" in result.stdout
    assert "No events on 2026-12-01." in result.stdout
    assert (tmp_path / "data" / "sessions.sqlite3").exists()
    assert (tmp_path / "data" / "trajectories.sqlite3").exists()


def test_piped_repl_denies_destructive_calls_unless_yes(tmp_path):
    """Non-interactive without --yes: the gate has no one to ask, so it says no."""
    import io
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from agent.app import build_runtime
    from agent.backends.scripted import ScriptedBackend
    from agent.config import load_settings
    from agent.parsing import format_tool_call
    from agent.repl import run_repl
    from tools.calendar import CalendarStore

    settings = load_settings({"data_dir": str(tmp_path)}, environ={})
    seoul = ZoneInfo("Asia/Seoul")
    for yes, survives in ((False, True), (True, False)):
        with CalendarStore(settings.store_path) as store:
            event = store.add_event("Dentist", datetime(2026, 12, 1, 15, tzinfo=seoul), datetime(2026, 12, 1, 16, tzinfo=seoul))
        delete = format_tool_call("delete_event", {"event_id": event.id})
        runtime = build_runtime(settings, ScriptedBackend([delete, "done."]))
        out = io.StringIO()
        assert run_repl(runtime, yes=yes, stdin=io.StringIO("delete the dentist\n"), out=out) == 0
        with CalendarStore(settings.store_path) as store:
            still_there = store.get_event(event.id) is not None
        runtime.close()
        assert still_there is survives, out.getvalue()
        assert ("denied" in out.getvalue()) is survives


def test_the_runtime_never_imports_the_train_extra():
    """The runtime must work on a machine without torch: no runtime module may import it."""
    code = (
        "import sys, agent.__main__, agent.app, agent.loop, agent.repl, agent.backends.llama, "
        "agent.backends.openai, agent.eval.cli, agent.export.cli, agent.train.cli, agent.bench, "
        "bot.app, bot.run, models.check, models.__main__, tools.calendar.domain\n"
        "agent.__main__.build_parser()\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft', 'trl', 'datasets') if m in sys.modules)\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
