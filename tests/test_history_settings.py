"""The configured history window (``history_turns``/``history_block``) is what eval shows the
model, what the episode record and run.json keep, and where export cuts the conversation, so
that training sees what is served when a user changes the setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.config import Settings
from agent.eval import cli
from agent.eval.record import read_episode
from agent.eval.runner import RunOptions, episode_path, run_eval
from agent.export.episodes import read_episodes
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.scenarios import build_scenario

SUITE = load_eval_suite(Settings())
# a question (the user answers with the script's line), then a statement that changed nothing
# (the user sends the follow-up once), then silence: three user messages
THREE_TURNS = ["Which one do you mean?", "I'll look into it.", "Okay."]


def user_turns(messages: list[dict]) -> int:
    return sum(1 for m in messages if m["role"] == "user")


def test_eval_shows_the_configured_window_and_export_cuts_where_it_did(tmp_path: Path) -> None:
    scenario = build_scenario("delete_request", 0)
    backends: dict[int, ScriptedBackend] = {}
    for turns in (1, 12):
        backend = backends[turns] = ScriptedBackend(list(THREE_TURNS))
        options = RunOptions(out_dir=tmp_path / f"keep{turns}", progress=False, history_turns=turns, history_block=1)
        [record] = run_eval(SUITE, [scenario], lambda s, k, b=backend: b, options)
        assert user_turns(record.messages) == 3
    # the third turn's prompt: one earlier user turn with a window of 1, both with 12
    assert [user_turns(p) for p in backends[1].calls] == [1, 2, 2]
    assert [user_turns(p) for p in backends[12].calls] == [1, 2, 3]

    kept = read_episode(episode_path(tmp_path / "keep1", "delete_request-s0-000__s0"))
    assert (kept.history_turns, kept.history_block) == (1, 1)
    windows = read_episodes(tmp_path / "keep1")
    assert [w.extra.get("window") for w in windows] == [0, 1]
    # each exported window ends with the prompt the model was last shown in it, plus its reply
    assert windows[1].messages[:-1] == backends[1].calls[-1]
    assert len(read_episodes(tmp_path / "keep12")) == 1


def test_the_eval_cli_records_the_window_from_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text("history_turns = 0\nhistory_block = 1\n", encoding="utf-8")
    monkeypatch.setenv("AGENT_DATA_DIR", str(data))
    out = tmp_path / "run"
    argv = ["--policy", "oracle", "--templates", "delete_request", "--limit", "1", "--no-progress", "--out", str(out)]
    assert cli.main(argv) == 0
    assert json.loads((out / cli.RUN_JSON).read_text(encoding="utf-8"))["history"] == {"turns": 0, "block": 1}
    [path] = (out / "episodes").glob("*.json")
    written = json.loads(path.read_text(encoding="utf-8"))
    assert (written["history_turns"], written["history_block"]) == (0, 1)
    # the oracle's second turn (after the yes) saw no earlier turn, and export trains it that way
    episodes = read_episodes(out)
    assert len(episodes) == 2 and all(user_turns(e.messages) == 1 for e in episodes)

    # resuming the folder with the default window would mix two runs: refused
    (data / "config.toml").write_text("", encoding="utf-8")
    assert cli.main(argv) == 2


def test_a_default_window_keeps_the_old_file_shape(tmp_path: Path) -> None:
    scenario = build_scenario("delete_request", 0)
    [record] = run_eval(SUITE, [scenario], lambda s, k: ScriptedBackend(list(THREE_TURNS)),
                        RunOptions(out_dir=tmp_path, progress=False))
    written = json.loads(episode_path(tmp_path, record.key).read_text(encoding="utf-8"))
    assert "history_turns" not in written and "history_block" not in written
    assert read_episode(episode_path(tmp_path, record.key)).history_turns == 12


def test_the_runtime_and_the_export_of_its_log_use_the_configured_window(tmp_path: Path) -> None:
    from agent.app import build_runtime
    from agent.approval import DenyAll
    from agent.config import load_settings
    from agent.export import cli as export_cli

    (tmp_path / "config.toml").write_text("history_turns = 1\nhistory_block = 1\n", encoding="utf-8")
    settings = load_settings({"data_dir": str(tmp_path)}, environ={})
    backend = ScriptedBackend(["One.", "Two.", "Three."])
    runtime = build_runtime(settings, backend)
    for text in ("first", "second", "third"):
        runtime.handle("repl", text, DenyAll())
    runtime.close()
    assert [user_turns(p) for p in backend.calls] == [1, 2, 2]  # the block setting reached the runtime

    log = tmp_path / "trajectories.sqlite3"
    episodes = export_cli._read(log, settings)
    assert episodes is not None and [user_turns(e.messages) for e in episodes] == [2, 2]
    # the log has no system prompt: the rest of the last prompt, and the reply to it
    assert episodes[1].messages[:-1] == backend.calls[-1][1:] and episodes[1].messages[-1]["content"] == "Three."


def run_chat(data_dir: Path, config: str, texts: list[str]) -> ScriptedBackend:
    """The runtime, configured by ``config``, answers ``texts`` in one chat; its backend keeps the prompts."""
    from agent.app import build_runtime
    from agent.approval import DenyAll
    from agent.config import load_settings

    (data_dir / "config.toml").write_text(config, encoding="utf-8")
    backend = ScriptedBackend([f"Reply {n}." for n in range(len(texts))])
    runtime = build_runtime(load_settings({"data_dir": str(data_dir)}, environ={}), backend)
    for text in texts:
        runtime.handle("repl", text, DenyAll())
    runtime.close()
    return backend


def logged_windows(log: Path) -> list[dict | None]:
    import sqlite3

    with sqlite3.connect(log) as db:
        return [json.loads(turn).get("history") for (turn,) in db.execute("SELECT turn FROM turns ORDER BY id")]


def test_the_log_records_each_turns_window_and_export_cuts_with_it_not_the_configured_one(tmp_path: Path) -> None:
    backend = run_chat(tmp_path, "history_turns = 1\nhistory_block = 1\n", ["first", "second", "third"])
    log = tmp_path / "trajectories.sqlite3"
    assert logged_windows(log) == [{"turns": 1, "block": 1}] * 3

    episodes = read_episodes(log)  # exported with the defaults (12 turns): the log's window wins
    assert [user_turns(e.messages) for e in episodes] == [2, 2]
    assert episodes[1].messages[:-1] == backend.calls[-1][1:]  # the last prompt, without the system message


def test_a_chat_whose_window_changed_is_cut_as_each_turn_was_served(tmp_path: Path) -> None:
    run_chat(tmp_path, "history_turns = 1\nhistory_block = 1\n", ["one", "two", "three"])
    backend = run_chat(tmp_path, "", ["four", "five"])  # the defaults from the fourth turn on
    log = tmp_path / "trajectories.sqlite3"
    assert logged_windows(log) == [{"turns": 1, "block": 1}] * 3 + [{"turns": 12, "block": None}] * 2

    episodes = read_episodes(log, history_turns=1, history_block=1)  # whatever is configured now
    assert [user_turns(e.messages) for e in episodes] == [2, 2, 5]
    assert [user_turns(p) for p in backend.calls] == [4, 5]  # the default window showed the whole chat again
    assert episodes[-1].messages[:-1] == backend.calls[-1][1:]


def test_turns_logged_before_the_window_was_recorded_are_cut_with_the_configured_one(tmp_path: Path) -> None:
    from agent.records import Turn
    from agent.trajectory import TrajectoryLog

    log_path = tmp_path / "trajectories.sqlite3"
    log = TrajectoryLog(log_path)
    for n in range(3):  # as the runtime logged a turn before: no window with it
        log.record(Turn(session_id="s1", user_text=f"turn {n}",
                        new_messages=[{"role": "assistant", "content": f"Reply {n}."}]), {"backend": "scripted"})
    log.close()
    assert logged_windows(log_path) == [None, None, None]

    assert [user_turns(e.messages) for e in read_episodes(log_path)] == [3]  # the default window: whole
    assert [user_turns(e.messages) for e in read_episodes(log_path, 1, 1)] == [2, 2]  # a configured one
