"""Reading recorded episodes from an eval results folder or the trajectory log, as one plain shape.

The eval runner writes one JSON file per episode. This reader needs only these fields and is
lenient about where they sit, so it keeps working while the runner's format settles:

- ``messages`` (required): the whole conversation in the loop's form (system, user, assistant
  with the model's exact text in ``content`` and parsed ``tool_calls``, ``tool`` results).
- scenario: a ``scenario`` object with ``id``, ``template``, ``split``, ``seed`` — or the same
  as top-level ``scenario_id``, ``template``, ``split``, ``seed``.
- outcome: a ``verdict`` object with ``reward``, ``success`` and ``policy_ok`` — or the same at
  top level (``reward`` may be a number or an object with ``total``). Missing means "not scored".
- optional: ``calls`` (list or count; else tool messages are counted), ``tools`` (schemas the
  model saw), ``policy`` / ``model`` (who produced it), ``sample`` (index within a group).

Files without ``messages`` (e.g. a run summary) are skipped. The trajectory log
(``trajectories.sqlite``) has no verdicts and no system prompt: its sessions come back as
unscored episodes of template ``"log"``, split ``"log"``.

A conversation longer than the runtime's history window (``agent.history``) comes back as one
episode per window, each exactly what the model was shown, with the whole one's verdict and
``extra["window"]`` numbering them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from agent.history import served_windows


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
    tools: list[dict[str, Any]] | None = None
    producer: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("total", value.get("reward"))
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _producer(data: dict[str, Any]) -> str:
    backend = data.get("backend")
    if isinstance(backend, dict):
        return str(backend.get("adapter_path") or backend.get("model_path") or backend.get("backend") or "")
    return str(data.get("policy") or backend or "")


def episode_from_json(data: dict[str, Any], source: str = "") -> Episode | None:
    """The episode in one runner JSON object, or None when it is not an episode."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    scenario = data.get("scenario") if isinstance(data.get("scenario"), dict) else {}
    verdict = data.get("verdict") if isinstance(data.get("verdict"), dict) else {}
    reward = _number(verdict.get("reward", data.get("reward")))
    success = verdict.get("success", data.get("success"))
    policy_ok = verdict.get("policy_ok", data.get("policy_ok"))
    calls = data.get("calls")
    if isinstance(calls, list):
        n_calls = len(calls)
    elif isinstance(calls, int) and not isinstance(calls, bool):
        n_calls = calls
    else:
        n_calls = sum(1 for m in messages if m.get("role") == "tool")
    seed = scenario.get("seed", data.get("seed"))
    tools = data.get("tools")
    return Episode(
        messages=messages,
        scenario_id=str(scenario.get("id") or data.get("scenario_id") or source or "unknown"),
        template=str(scenario.get("template") or data.get("template") or "unknown"),
        split=str(scenario.get("split") or data.get("split") or "unknown"),
        seed=int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None,
        reward=reward,
        success=bool(success) if isinstance(success, bool) else None,
        policy_ok=bool(policy_ok) if isinstance(policy_ok, bool) else None,
        calls=n_calls,
        tools=tools if isinstance(tools, list) else None,
        producer=_producer(data),
        source=source,
        extra={k: data[k] for k in ("sample", "variant", "language") if k in data},
    )


def as_served(episode: Episode) -> list[Episode]:
    """The episode as the model was shown it: one episode per history window (``agent.history``),
    so a conversation longer than the runtime's window is never trained on whole."""
    windows = served_windows(episode.messages)
    if len(windows) == 1:
        return [episode]
    return [replace(episode, messages=w, calls=sum(1 for m in w if m.get("role") == "tool"),
                    extra={**episode.extra, "window": i}) for i, w in enumerate(windows)]


def read_results(folder: Path) -> Iterator[Episode]:
    """Every episode JSON under ``folder`` (recursively, sorted so exports are reproducible)."""
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            episode = episode_from_json(data, str(path))
            if episode is not None:
                yield from as_served(episode)


def read_trajectory_log(path: Path) -> Iterator[Episode]:
    """Sessions of the runtime's trajectory log as unscored episodes (user + produced messages)."""
    from agent.trajectory import TrajectoryLog

    if not path.exists():  # TrajectoryLog would create an empty database
        raise FileNotFoundError(path)
    try:
        log = TrajectoryLog(path)
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path} is not a trajectory log: {exc}") from exc
    sessions: dict[str, list[dict[str, Any]]] = {}
    order: list[str] = []
    try:
        for row in log.turns():
            key = str(row.get("session_id") or f"turn-{row['id']}")
            if key not in sessions:
                sessions[key], _ = [], order.append(key)
            sessions[key].append({"role": "user", "content": row.get("user_text", "")})
            sessions[key].extend(row.get("new_messages") or [])
    finally:
        log.close()
    for key in order:
        messages = sessions[key]
        yield from as_served(Episode(messages=messages, scenario_id=key, template="log", split="log",
                                     calls=sum(1 for m in messages if m.get("role") == "tool"), source=str(path)))


def read_episodes(source: Path) -> list[Episode]:
    """Episodes from a results folder, one episode JSON file, or a trajectory log (.sqlite/.db)."""
    if source.is_dir():
        return list(read_results(source))
    if source.suffix in (".sqlite", ".db", ".sqlite3"):
        return list(read_trajectory_log(source))
    if source.suffix == ".json":
        episode = episode_from_json(json.loads(source.read_text(encoding="utf-8")), str(source))
        return as_served(episode) if episode else []
    raise ValueError(f"{source}: expected a results folder, an episode .json or a trajectories .sqlite")
