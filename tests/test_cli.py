"""``python -m agent`` as a user meets it: help, no model, a bad adapter, a piped session."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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


def test_every_subcommand_and_action_prints_its_help() -> None:
    """In process: argparse formats every help text (a bare % in one crashed ``eval --help``)."""
    import argparse
    import contextlib
    import io

    from agent.__main__ import build_parser

    def paths(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        found = [prefix]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += paths(sub, [*prefix, name])
        return found

    every = paths(build_parser(), [])
    assert ["eval", "rescore"] in every and ["calendar"] in every
    for argv in every:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            build_parser().parse_args([*argv, "--help"])
        assert done.value.code == 0 and out.getvalue().startswith("usage:"), argv


def readme_run_command() -> list[str]:
    """The final part of README's first command (``.venv/bin/python -m agent``), as argv."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- run-command -->", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    argv = block.strip().split("&&")[-1].split()
    assert argv[0].endswith("/python"), argv
    return [sys.executable, *argv[1:]]


def test_readme_first_command_with_nothing_configured_chats_on_the_demo_and_exits_0(tmp_path):
    """No model configured, none pulled, empty data dir: the demo answers, after one line saying so."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    environ.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    result = subprocess.run(readme_run_command(), input="hello\n", capture_output=True, text=True, env=environ,
                            timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    note = result.stderr.strip().splitlines()[0]
    assert note.startswith("note:") and "Gemma 3 270M" in note and "demo" in note and "python -m models pull" in note
    assert "time zone Asia/Seoul" in result.stdout and "a new conversation" in result.stdout
    with sqlite3.connect(tmp_path / "data" / "sessions.sqlite3") as db:
        roles = [json.loads(m)["role"] for (m,) in db.execute("SELECT message FROM messages ORDER BY idx")]
    assert roles[0] == "user" and "assistant" in roles  # it answered (what it says, the model decides)
    with sqlite3.connect(tmp_path / "data" / "trajectories.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 1


def test_a_configured_model_that_is_missing_is_exit_2_not_the_demo(tmp_path):
    missing = tmp_path / "nope.gguf"
    result = run_agent([], tmp_path, stdin="hello\n", AGENT_MODEL_PATH=str(missing), AGENT_NO_ADAPTER="1")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "note:" not in result.stderr


def test_a_partial_pull_is_exit_2_not_the_demo(tmp_path, smollm2):
    """The model was pulled but its adapter was not: that is a broken setup, not "nothing configured"."""
    from models.resolve import DEFAULT_MODEL_FILE

    (tmp_path / "data" / "models").mkdir(parents=True)
    (tmp_path / "data" / "models" / DEFAULT_MODEL_FILE).symlink_to(smollm2)
    result = run_agent([], tmp_path, stdin="hello\n")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no LoRA adapter found" in lines[0]


@pytest.mark.parametrize("given", [["--model", "m.gguf"], ["--adapter", "a.gguf"], "AGENT_LORA_PATH"])
def test_demo_with_a_model_choice_is_one_line_and_exit_2(tmp_path, given):
    args, env = (["--demo"], {"AGENT_LORA_PATH": str(tmp_path / "a.gguf")}) if given == "AGENT_LORA_PATH" else (["--demo", *given], {})
    result = run_agent(args, tmp_path, stdin="hello\n", **env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    named = given if isinstance(given, str) else given[0]
    assert len(lines) == 1 and "--demo" in lines[0] and named in lines[0]


def test_unknown_time_zone_is_one_line_before_any_model_loads(tmp_path):
    result = run_agent(["--tz", "Mars/Olympus", "--model", str(tmp_path / "never-read.gguf")], tmp_path, stdin="hi\n")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: tz: unknown time zone 'Mars/Olympus': use an IANA name such as Asia/Seoul or Europe/Berlin"
    ]


def test_a_bad_calendar_setting_is_one_line_before_any_model_loads(tmp_path):
    """The calendar owns agenda_time (tools/calendar/settings.py); the CLI still checks it up front."""
    result = run_agent(["--model", str(tmp_path / "never-read.gguf")], tmp_path, stdin="hi\n", AGENT_AGENDA_TIME="8am")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: agenda_time: expected a 24-hour HH:MM time, e.g. 08:00; got '8am'"
    ]


def test_lora_is_not_taken_for_lora_scale(tmp_path):
    result = run_agent(["--lora", "x.gguf"], tmp_path)
    assert result.returncode == 2
    assert "--lora is not a flag: the adapter is --adapter FILE" in result.stderr
    assert "--lora-scale" not in result.stderr.splitlines()[-1]


def test_error_messages_name_only_flags_that_exist(tmp_path):
    """Every --flag the no-model/no-adapter hints suggest is accepted by the parser it is meant for."""
    import re

    from agent.__main__ import build_parser
    from models.check import ADAPTER_HINT, MODEL_HINT
    from models.resolve import NO_ADAPTER_MESSAGE, NO_MODEL_MESSAGE

    known = set(build_parser()._option_string_actions)
    for text in (NO_MODEL_MESSAGE, NO_ADAPTER_MESSAGE, MODEL_HINT, ADAPTER_HINT):
        for flag in re.findall(r"--[a-z][a-z-]*", text):
            assert flag in known, (flag, text)


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


def test_piped_session_runs_commands_and_a_turn_with_the_demo_model(tmp_path, gemma3):
    """The turn really ran: both files exist before any turn, so what is checked is their rows,
    the user's message and the model's reply after it in the session, and the turn with its steps
    in the trajectory log. What the model replied is its business and is not read."""
    from contextlib import closing

    stdin = "/tools\n/events 2026-12-01\nhello\n/quit\n"
    result = run_agent(["--demo", "--ctx", "4096"], tmp_path, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert "delete_event [asks first]" in result.stdout
    assert "No events on 2026-12-01." in result.stdout

    with closing(sqlite3.connect(tmp_path / "data" / "sessions.sqlite3")) as sessions:
        rows = sessions.execute("SELECT session_id, message FROM messages ORDER BY session_id, idx").fetchall()
    assert rows and len({session for session, _ in rows}) == 1, rows
    messages = [json.loads(message) for _, message in rows]
    assert messages[0]["role"] == "user" and messages[0]["content"].endswith("] hello"), messages  # "[HH:MM] hello"
    assert len(messages) > 1 and messages[1]["role"] == "assistant", messages  # every model step is stored

    with closing(sqlite3.connect(tmp_path / "data" / "trajectories.sqlite3")) as trajectories:
        turns = trajectories.execute("SELECT session_id, steps, turn FROM turns").fetchall()
    assert len(turns) == 1, turns
    session_id, steps, turn = turns[0]
    turn = json.loads(turn)
    assert session_id == rows[0][0] and steps >= 1 and turn["user_text"] == messages[0]["content"], turn
    assert turn["steps"][0]["raw_output"] == messages[1]["content"]  # the step logged is the reply stored


def test_piped_repl_denies_destructive_calls_unless_yes(tmp_path):
    """Non-interactive without --yes: the gate has no one to ask, so it says no."""
    import io
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from agent.app import build_runtime
    from agent.backends.scripted import ScriptedBackend
    from agent.config import load_settings
    from agent.formats import format_tool_call
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


LAB_PREFIXES = ("agent.eval", "agent.export", "agent.train", "agent.bench", "tools.calendar.lab")


def test_starting_the_chat_and_its_first_reply_load_no_lab_module(tmp_path):
    """The lab (eval, export, train, bench, the calendar's scenarios) is for the lab: parsing a chat's
    command line, building the runtime and answering a turn (a tool call and a reply) import none of it."""
    code = (
        "import io, sys\n"
        "from agent.__main__ import parse_arguments\n"
        "from agent.app import build_runtime\n"
        "from agent.backends.scripted import ScriptedBackend\n"
        "from agent.config import load_settings\n"
        "from agent.formats import format_tool_call\n"
        "from agent.repl import run_repl\n"
        "args = parse_arguments(['--tz', 'Asia/Seoul', 'chat'])\n"
        f"settings = load_settings({{'data_dir': {str(tmp_path)!r}}}, environ={{}})\n"
        "call = format_tool_call('list_events', {'date': '2026-12-01'})\n"
        "runtime = build_runtime(settings, ScriptedBackend([call, 'Nothing that day.']))\n"
        "out = io.StringIO()\n"
        "assert run_repl(runtime, yes=False, stdin=io.StringIO('what is on dec 1\\n'), out=out) == 0\n"
        "runtime.close()\n"
        "assert 'Nothing that day.' in out.getvalue(), out.getvalue()\n"
        f"print(','.join(sorted(m for m in sys.modules if m.startswith({LAB_PREFIXES!r}))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_a_lab_command_is_parsed_by_its_own_parser_and_help_shows_it_unloaded() -> None:
    """``--help`` lists the lab's commands from stand-ins; their help lines are the lab modules' own,
    and a lab command line parses to exactly what the full parser gives."""
    from agent.__main__ import LAB, build_parser, parse_arguments

    assert build_parser(lab=()).format_help() == build_parser().format_help()
    for argv in (["--threads", "2", "eval", "--threads", "5"], ["--demo", "train", "ei", "--out", "x"],
                 ["bench", "--quick"], ["doctor", "--no-generate"], []):
        assert vars(parse_arguments(argv)) == vars(build_parser().parse_args(argv)), argv
    assert parse_arguments(["eval", "--threads", "5"]).n_threads == 5
    for argv in (["eval", "--no-such-flag"], ["chat", "--no-such-flag"], ["--no-such-flag"]):
        with pytest.raises(SystemExit) as refused:
            parse_arguments(argv)
        assert refused.value.code == 2, argv
    assert set(LAB) == {"eval", "export", "train", "bench"}


def test_model_flags_before_the_subcommand_are_kept_not_overwritten_by_its_defaults() -> None:
    """``python -m agent --threads 2 train ei`` ran llama.cpp on its default threads: argparse set the
    subcommand's ``None`` defaults over the values given before it. Now both places work, and a flag
    given in both places takes the later one."""
    from agent.__main__ import build_parser

    parser = build_parser()
    for argv in (["--threads", "2", "--model", "m.gguf", "--demo", "eval"], ["eval", "--threads", "2", "--model", "m.gguf", "--demo"],
                 ["--threads", "2", "--model", "m.gguf", "--demo", "train", "ei", "--out", "x"]):
        args = parser.parse_args(argv)
        assert (args.n_threads, args.model_path, args.demo) == (2, "m.gguf", True), argv
    assert parser.parse_args(["--threads", "2", "eval", "--threads", "5"]).n_threads == 5
    for argv in (["--yes", "--receipt", "on", "chat"], ["chat", "--yes", "--receipt", "on"]):
        args = parser.parse_args(argv)
        assert (args.yes, args.receipt) == (True, "on"), argv
    assert (parser.parse_args(["chat"]).yes, parser.parse_args(["chat"]).receipt) == (False, None)
    plain = parser.parse_args(["eval"])
    assert (plain.n_threads, plain.model_path, plain.demo, plain.no_adapter) == (None, None, False, None)
