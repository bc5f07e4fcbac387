"""How much of a chat's history the model sees: trimmed in blocks, so the prompt stays cached.

A sliding window (the last N user turns) changes the start of the history on every turn once a
chat passes N turns, and llama.cpp then re-evaluates everything after the system prompt, every
turn. Here the window is cut only every ``block`` turns: when the earlier turns would pass
``keep``, the oldest ``block`` of them (two thirds of the window) go at once. Between two cuts the prompt up to the newest
user message is the previous turn's prompt and reply, byte for byte, so only the new message is
evaluated; at a cut, the kept turns are evaluated once more.

The cut is a pure function of the stored history (``keep``, ``block`` and the number of user
turns), so the runtime, the eval dialogue and the export all compute the same window from the
same messages, and training sees what was served.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DEFAULT_HISTORY_TURNS = 12  # earlier user turns kept at most (the runtime's ``history_turns``)


def default_block(keep: int) -> int:
    """Two thirds of the window (8 of 12): a cut every 8 turns, and at least 5 earlier turns kept
    after it. Measured on a 40-message chat with SmolLM2's 3.3k-token prompt (evaluated ÷ new
    prompt tokens): half the window 1.26, two thirds 1.15, three quarters 1.09, sliding 3.48."""
    return max(1, keep * 2 // 3)


def kept_start(user_turns: int, keep: int, block: int | None = None) -> int:
    """How many of the earliest user turns are dropped when ``user_turns`` earlier turns are stored.

    0 while they fit; past ``keep``, a multiple of ``block``, so it grows in steps and the kept
    count stays within ``keep - block + 1 .. keep``. ``block == 1`` is a sliding window.
    """
    block = default_block(keep) if block is None else max(1, min(block, keep))
    if keep <= 0:
        return user_turns
    if user_turns <= keep:
        return 0
    return ((user_turns - keep - 1) // block + 1) * block


def recent_turns(history: list[dict[str, Any]], keep: int, block: int | None = None) -> list[dict[str, Any]]:
    """The earlier turns the model sees: cut on a user message, in blocks (see ``kept_start``).

    ``history`` has no system message and not the new user message.
    """
    user_positions = [i for i, m in enumerate(history) if m.get("role") == "user"]
    drop = kept_start(len(user_positions), keep, block)
    if drop == 0:
        return list(history)
    if drop >= len(user_positions):
        return []
    return history[user_positions[drop]:]


def served_windows(messages: list[dict[str, Any]], keep: int = DEFAULT_HISTORY_TURNS,
                   block: int | None = None,
                   per_turn: Sequence[tuple[int, int | None]] | None = None) -> list[list[dict[str, Any]]]:
    """A whole conversation split into what the model was shown, one window per cut.

    Each window is the conversation as the last turn before the next cut saw it (its prompt plus
    what it produced); a leading system message heads every window. A conversation that never
    passed ``keep`` comes back whole, as the one window. For export: a trained example is then a
    prompt that was served, never a history longer than the runtime ever shows.

    ``per_turn[i]``, where given, is the ``(keep, block)`` user turn ``i`` was served with (the
    trajectory log records it per turn, and the settings may change between two turns of a chat);
    the turns it does not cover had ``keep``/``block``.
    """
    head = messages[:1] if messages and messages[0].get("role") == "system" else []
    body = messages[len(head):]
    user_positions = [i for i, m in enumerate(body) if m.get("role") == "user"]
    windows: list[list[dict[str, Any]]] = []
    start, end = 0, 0  # the current window's first user turn, and the turns it has so far
    for turn in range(len(user_positions)):
        turn_keep, turn_block = per_turn[turn] if per_turn is not None and turn < len(per_turn) else (keep, block)
        drop = kept_start(turn, turn_keep, turn_block)  # the cut this turn's prompt was served with
        if drop != start:
            windows.append(head + body[user_positions[start]:user_positions[end]])
            start = drop
        end = turn + 1
    first = user_positions[start] if user_positions else 0
    windows.append(head + body[first:])
    return windows
