"""Runtime: sessions survive a restart, every message is persisted as it appears, turns are logged."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.app import build_runtime
from agent.approval import DenyAll
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.export.episodes import read_trajectory_log
from agent.loop import Budgets
from agent.formats import format_tool_call
from agent.history import kept_start, served_windows
from agent.runtime import recent_turns
from agent.trajectory import TrajectoryLog
from tests.renderers import renderer_for

SEOUL = ZoneInfo("Asia/Seoul")  # the settings' default zone


def settings_in(tmp_path: Path):
    return load_settings({"data_dir": str(tmp_path)}, environ={})


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


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

    runtime = build_runtime(settings, ScriptedBackend(crash), clock=Clock(datetime(2026, 11, 30, 9, 41, tzinfo=SEOUL)))
    turn = runtime.handle("telegram:1", "remember me", DenyAll())
    assert turn.stop_reason.value == "model_error"
    session = runtime.sessions.current("telegram:1")
    assert runtime.sessions.history(session) == [{"role": "user", "content": "[09:41] remember me"}]
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


def test_history_is_cut_in_blocks_so_the_kept_count_stays_in_range():
    drops = [kept_start(n, 12) for n in range(40)]
    assert drops[:13] == [0] * 13  # 12 earlier turns fit
    assert sorted(set(drops)) == [0, 8, 16, 24, 32]  # then two thirds of the window go at once
    assert all(5 <= n - d <= 12 for n, d in enumerate(drops) if n > 12)
    assert [kept_start(n, 12, block=1) for n in (12, 13, 14)] == [0, 1, 2]  # block 1: sliding


def test_a_long_chat_keeps_the_previous_prompt_as_its_prefix_between_cuts(tmp_path):
    """40 messages through the runtime: the prompt changes before the new message only at a cut."""
    backend = ScriptedBackend(lambda messages: f"Noted {len(messages)}.")
    runtime = build_runtime(settings_in(tmp_path), backend)
    for i in range(40):
        runtime.handle("repl", f"note {i}", DenyAll())
    runtime.close()
    breaks = 0
    for earlier, later in zip(backend.calls, backend.calls[1:]):
        reply = {"role": "assistant", "content": f"Noted {len(earlier)}."}
        if later[: len(earlier) + 1] != earlier + [reply]:
            breaks += 1
        assert sum(m["role"] == "user" for m in later) <= runtime.history_turns + 1
    assert breaks == 4  # earlier turns 13, 21, 29, 37: not one cut per turn from turn 13 on
    assert backend.calls[-1][1]["content"].endswith("note 32")  # the last cut kept turns 32..38


def test_served_windows_split_a_long_conversation_as_the_runtime_showed_it():
    conversation = [{"role": "system", "content": "s"}]
    for i in range(19):
        conversation += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"}]
    first, second = served_windows(conversation, keep=12)
    assert [m["content"] for m in first[:2]] == ["s", "u0"] and first[-1]["content"] == "a12"
    assert [m["content"] for m in second[:2]] == ["s", "u8"] and second[-1]["content"] == "a18"
    # the last prompt of each window is what recent_turns showed that turn
    assert second[1:-1] == recent_turns(conversation[1:-2], 12) + [conversation[-2]]
    assert served_windows(conversation[:9], keep=12) == [conversation[:9]]


def two_turns_seven_minutes_apart(tmp_path: Path, backend) -> tuple:
    """Turn 1 at 10:00, turn 2 at 10:07 on the same day, in one runtime."""
    clock = Clock(datetime(2026, 11, 30, 10, 0, tzinfo=SEOUL))
    runtime = build_runtime(settings_in(tmp_path), backend, clock=clock)
    first = runtime.handle("repl", "book lunch on 2026-12-02 at noon", DenyAll())
    clock.now += timedelta(minutes=7)
    second = runtime.handle("repl", "what did you book?", DenyAll())
    return runtime, first, second


def test_a_turn_minutes_later_renders_the_earlier_prompt_and_reply_unchanged(tmp_path, tiny_qwen3_each):
    """Qwen3's templates put the tool block after the system text: a time of day there would
    change the whole prefix every minute. Text before the new user message must be the last
    prompt of the previous turn plus the model's reply, byte for byte (with either template:
    the hybrid one would re-render the earlier reply without its empty think block)."""
    backend = ScriptedBackend([CREATE, "Booked lunch.", "You have lunch at 12:00."])
    runtime, first, second = two_turns_seven_minutes_apart(tmp_path, backend)
    tools = runtime.domain.registry.schemas()
    runtime.close()
    renderer = renderer_for(tiny_qwen3_each)
    earlier = renderer.render(backend.calls[1], tools) + "Booked lunch."  # last step of turn 1 and its output
    later = renderer.render(backend.calls[2], tools)
    assert later.startswith(earlier)
    assert "[10:00] book lunch on 2026-12-02 at noon" in earlier
    assert "[10:07] what did you book?" in later[len(earlier):]
    assert "10:0" not in backend.calls[2][0]["content"]  # the system message has no time of day


def test_the_stamp_is_kept_in_the_session_history_and_the_trajectory_log(tmp_path):
    backend = ScriptedBackend([CREATE, "Booked lunch.", "You have lunch at 12:00."])
    runtime, first, second = two_turns_seven_minutes_apart(tmp_path, backend)
    history = runtime.sessions.history(runtime.sessions.current("repl"))
    runtime.close()
    users = [m["content"] for m in history if m["role"] == "user"]
    assert users == ["[10:00] book lunch on 2026-12-02 at noon", "[10:07] what did you book?"]
    assert [first.user_text, second.user_text] == users
    [episode] = read_trajectory_log(tmp_path / "trajectories.sqlite3")  # what export reads: the same text
    assert [m["content"] for m in episode.messages if m["role"] == "user"] == users


@pytest.mark.slow
def test_a_turn_minutes_later_evaluates_only_the_new_message(tmp_path, smollm2):
    """With a real llama.cpp backend: the second turn's first step reuses the cached prompt."""
    from agent.backends.llama import LlamaBackend

    backend = LlamaBackend(smollm2, n_ctx=4096, n_threads=2)
    clock = Clock(datetime(2026, 11, 30, 10, 0, tzinfo=SEOUL))
    runtime = build_runtime(settings_in(tmp_path), backend, clock=clock)
    runtime.agent.budgets = Budgets(max_steps=1, max_tokens=8)
    first = runtime.handle("repl", "Hello", DenyAll()).steps[0]
    clock.now += timedelta(minutes=7)
    step = runtime.handle("repl", "What is on my calendar today?", DenyAll()).steps[0]
    runtime.close()
    assert first.prompt_tokens > 1000  # system prompt + tool block + the first message
    # all of turn 1's prompt is reused; what is evaluated is turn 1's tail (its reply, maybe a
    # tool result) and the new message
    assert step.reused_tokens >= first.prompt_tokens
    assert step.evaluated_tokens < step.prompt_tokens / 10, (step.evaluated_tokens, step.prompt_tokens)


@pytest.mark.slow
def test_the_state_cache_budget_comes_from_the_environment(tmp_path, smollm2):
    from agent.app import build_llama_backend

    settings = load_settings({"data_dir": str(tmp_path)}, environ={
        "AGENT_MODEL_PATH": str(smollm2), "AGENT_NO_ADAPTER": "1", "AGENT_STATE_CACHE_MB": "64"})
    backend = build_llama_backend(settings)
    assert backend.max_saved_state_bytes == 64 * 2**20
    assert load_settings({"data_dir": str(tmp_path)}, environ={}).state_cache_mb == 1024
