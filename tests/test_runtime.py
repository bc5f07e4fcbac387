"""Runtime: sessions survive a restart, every message is persisted as it appears, turns are logged."""

from __future__ import annotations

from pathlib import Path

from agent.app import build_runtime
from agent.approval import DenyAll
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.parsing import format_tool_call
from agent.runtime import recent_turns
from agent.trajectory import TrajectoryLog


def settings_in(tmp_path: Path):
    return load_settings({"data_dir": str(tmp_path)}, environ={})


CREATE = format_tool_call("create_event", {"title": "Lunch", "date": "2026-12-02", "start_time": "12:00", "duration_minutes": 60})


def test_a_restart_continues_the_conversation(tmp_path):
    settings = settings_in(tmp_path)
    first = build_runtime(settings, ScriptedBackend([CREATE, "Booked lunch."]))
    first.handle("repl", "book lunch on 2026-12-02 at noon", DenyAll())
    first.close()

    backend = ScriptedBackend(["You have lunch at 12:00."])
    second = build_runtime(settings, backend)
    turn = second.handle("repl", "what did you book?", DenyAll())
    second.close()

    seen = backend.calls[0]
    assert seen[0]["role"] == "system"
    assert [m["role"] for m in seen[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert seen[2]["content"] == CREATE
    assert turn.reply == "You have lunch at 12:00."


def test_new_session_starts_an_empty_history_but_keeps_the_calendar(tmp_path):
    settings = settings_in(tmp_path)
    runtime = build_runtime(settings, ScriptedBackend([CREATE, "Booked.", "Hi!"]))
    runtime.handle("repl", "book lunch", DenyAll())
    runtime.new_session("repl")
    runtime.handle("repl", "hello", DenyAll())
    seen = runtime.agent.backend.calls[-1]
    assert [m["role"] for m in seen] == ["system", "user"]
    assert "Lunch" in runtime.domain.commands["today"]("2026-12-02")
    runtime.close()


def test_the_user_message_is_saved_before_the_model_runs(tmp_path):
    settings = settings_in(tmp_path)

    def crash(messages):
        raise RuntimeError("power cut")

    runtime = build_runtime(settings, ScriptedBackend(crash))
    turn = runtime.handle("telegram:1", "remember me", DenyAll())
    assert turn.stop_reason.value == "model_error"
    session = runtime.sessions.current("telegram:1")
    assert runtime.sessions.history(session) == [{"role": "user", "content": "remember me"}]
    runtime.close()


def test_every_turn_is_logged_with_model_identity(tmp_path):
    settings = settings_in(tmp_path)
    runtime = build_runtime(settings, ScriptedBackend([CREATE, "Booked."]))
    runtime.handle("repl", "book lunch", DenyAll())
    runtime.close()
    (logged,) = list(TrajectoryLog(tmp_path / "trajectories.sqlite3").turns())
    assert logged["model"]["backend"] == "scripted"
    assert logged["stop_reason"] == "final_reply"
    assert logged["steps"][0]["raw_output"] == CREATE
    assert logged["steps"][0]["calls"][0]["name"] == "create_event"


def test_history_window_cuts_on_user_turns():
    history = []
    for i in range(5):
        history += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"}]
    kept = recent_turns(history, 2)
    assert [m["content"] for m in kept] == ["u3", "a3", "u4", "a4"]
    assert recent_turns(history, 10) == history
