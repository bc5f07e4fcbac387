"""Reading recorded episodes for export, from an eval results folder or the trajectory log, as one shape.

Eval episodes are the runner's ``EpisodeRecord`` files (``agent.eval.record``), read by that
model: a file that is not one stops the export with one line naming the file, the line and the
problem. An ``Episode`` keeps what an export needs of a record: the conversation (``messages``:
system, user, assistant with the model's exact text in ``content`` and parsed ``tool_calls``,
``tool`` results), the scenario (id, template, split, generator seed), the verdict (reward,
success, policy_ok), the number of calls and who produced it.

The trajectory log (``trajectories.sqlite``) has no verdicts and no system prompt: its sessions
come back as unscored episodes of template ``"log"``, split ``"log"``.

A conversation longer than the runtime's history window (``agent.history``) comes back as one
episode per window, each exactly what the model was shown, with the whole one's verdict and
``extra["window"]`` numbering them. The window is the one it was served with: an eval record
names its own (``history_turns``/``history_block``; files without them had the default), and
the trajectory log records it with every turn (``agent.trajectory``), so each turn of a logged
chat is cut as it was served even if the setting changed in between. A turn logged before the
log kept it gets the window the caller passes (the runtime's configured one).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from agent.eval.record import EPISODES_DIR, EpisodeRecord, read_episode
from agent.history import DEFAULT_HISTORY_TURNS, served_windows
from agent.trajectory import HistoryWindow, TrajectoryLog, served_window


@dataclass
class Episode:
    """One recorded conversation and how the verifier judged it (None: not scored)."""

    messages: list[dict[str, Any]]
    scenario_id: str
    template: str
    split: str
    seed: int | None = None
    reward: float | None = None
    success: bool | None = None
    policy_ok: bool | None = None  # no rule broken (e.g. no delete before consent), even if it succeeded
    calls: int = 0
    # The schemas the model saw. Neither source records them, so export fills in the domain's: that
    # loses nothing while every scenario and the runtime are served one list (the calendar's are;
    # tests/test_export_sft.py pins it) and export runs the tool code the episodes ran with.
    tools: list[dict[str, Any]] | None = None
    producer: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    history_turns: int = DEFAULT_HISTORY_TURNS  # the window it was served with (agent.history)
    history_block: int | None = None
    # The (history_turns, history_block) of each user turn, where they are known per turn (the
    # trajectory log); the turns it does not cover had history_turns/history_block.
    turn_windows: list[HistoryWindow] | None = None
    # The chat format it was played in (the backend identity's ``chat_format``); records written
    # before backends named theirs were all played in Hermes.
    chat_format: str = "hermes"


def _producer(backend: dict[str, Any]) -> str:
    """Who played the episode: the adapter, else the model, else the kind of backend."""
    return str(backend.get("adapter_path") or backend.get("model_path") or backend.get("backend") or "")


def episode_from_record(record: EpisodeRecord, source: str = "") -> Episode:
    """What the export needs of one eval episode."""
    return Episode(
        messages=record.messages,
        scenario_id=record.scenario_id,
        template=record.template,
        split=record.split,
        seed=record.scenario.seed,
        reward=record.verdict.reward,
        success=record.verdict.success,
        policy_ok=record.verdict.policy_ok,
        calls=len(record.calls),
        producer=_producer(record.backend),
        source=source,
        extra={"sample": record.sample, "variant": record.variant, "language": record.language},
        history_turns=record.history_turns,
        history_block=record.history_block,
        chat_format=str(record.backend.get("chat_format") or "hermes"),
    )


def episode_files(folder: Path) -> list[Path]:
    """The episode files of a results folder, of a folder of results folders, or of an
    ``episodes`` folder itself, in sorted order (run.json and the summaries are not episodes)."""
    found = set(folder.glob(f"**/{EPISODES_DIR}/*.json"))
    if folder.name == EPISODES_DIR:
        found |= set(folder.glob("*.json"))
    return sorted(found)


def read_results(folder: Path) -> Iterator[Episode]:
    """Every episode under ``folder`` (see ``episode_files``), in sorted order so exports are
    reproducible. ``EpisodeFileError`` names the first file that is not an episode record."""
    paths = episode_files(folder)
    if not paths:
        raise ValueError(f"{folder}: no episodes (expected {EPISODES_DIR}/*.json, as `python -m agent eval` writes)")
    for path in paths:
        yield from as_served(episode_from_record(read_episode(path), str(path)))


def as_served(episode: Episode) -> list[Episode]:
    """The episode as the model was shown it: one episode per history window (``agent.history``),
    so a conversation longer than the runtime's window is never trained on whole."""
    windows = served_windows(episode.messages, episode.history_turns, episode.history_block, episode.turn_windows)
    if len(windows) == 1:
        return [episode]
    return [replace(episode, messages=w, calls=sum(1 for m in w if m.get("role") == "tool"),
                    extra={**episode.extra, "window": i}) for i, w in enumerate(windows)]


def read_trajectory_log(path: Path, history_turns: int = DEFAULT_HISTORY_TURNS,
                        history_block: int | None = None) -> Iterator[Episode]:
    """Sessions of the runtime's trajectory log as unscored episodes (user + produced messages),
    each turn cut with the window it recorded; ``history_turns``/``history_block`` (pass the
    runtime's configured ones) stand for it in turns logged before it was recorded."""
    if not path.exists():  # TrajectoryLog would create an empty database
        raise FileNotFoundError(path)
    try:
        log = TrajectoryLog(path)
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path} is not a trajectory log: {exc}") from exc
    configured = (history_turns, history_block)
    sessions: dict[str, list[dict[str, Any]]] = {}
    windows: dict[str, list[HistoryWindow]] = {}
    formats: dict[str, str] = {}  # the chat format each session was served in (its first turn's)
    try:
        for row in log.turns():
            key = str(row.get("session_id") or f"turn-{row['id']}")
            sessions.setdefault(key, []).append({"role": "user", "content": row.get("user_text", "")})
            sessions[key].extend(row.get("new_messages") or [])
            windows.setdefault(key, []).append(served_window(row) or configured)
            formats.setdefault(key, str((row.get("model") or {}).get("chat_format") or "hermes"))
    finally:
        log.close()
    for key, messages in sessions.items():  # first-seen order, as the log has them
        yield from as_served(Episode(messages=messages, scenario_id=key, template="log", split="log",
                                     calls=sum(1 for m in messages if m.get("role") == "tool"), source=str(path),
                                     history_turns=history_turns, history_block=history_block,
                                     turn_windows=windows[key], chat_format=formats[key]))


def read_episodes(source: Path, history_turns: int = DEFAULT_HISTORY_TURNS,
                  history_block: int | None = None) -> list[Episode]:
    """Episodes from a results folder, one episode JSON file, or a trajectory log (.sqlite/.db);
    ``history_*`` is the runtime's window, for log turns that do not record theirs (eval
    records carry their own)."""
    if source.is_dir():
        return list(read_results(source))
    if source.suffix in (".sqlite", ".db", ".sqlite3"):
        return list(read_trajectory_log(source, history_turns, history_block))
    if source.suffix == ".json":
        return as_served(episode_from_record(read_episode(source), str(source)))
    raise ValueError(f"{source}: expected a results folder, an episode .json or a trajectories .sqlite")
