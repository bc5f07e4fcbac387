"""Scripted policies in a continued chat (``Scenario.history``): each scripts only the last task,
and two broken ones change what an earlier task of the chat left behind.

Why a wrapper: a scripted policy reads the whole message list (it counts the user's messages,
takes the latest search result); in a chat with earlier tasks those would be the earlier tasks'.
``last_task_only`` hands it the system message and the task's own messages, so every policy of
the suite plays the last task as it plays a fresh one. The broken ones exist so that the
"unasked changes" figure can be seen to fail: a model that tidies up an earlier task's event.
"""

from __future__ import annotations

from typing import Any

from agent.eval.suite import PolicyFactory, PolicyFn, Scenario
from agent.formats import format_tool_call


def _same_place(shown: dict[str, Any], kept: dict[str, Any]) -> bool:
    """A message of the window is this history message: a user message by its role (the window's
    is stamped, the history's is as typed), any other exactly."""
    if shown.get("role") != kept.get("role"):
        return False
    return kept.get("role") == "user" or shown == kept


def current_task(messages: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system message and the last task's own messages of a served window.

    The window is the system message, the history from one of its user messages on (the runtime
    drops the oldest turns in blocks, ``agent.history``) and the task's messages; the longest
    history suffix that the window starts with is cut off."""
    body = messages[1:]
    starts = [i for i, m in enumerate(history) if m.get("role") == "user"] + [len(history)]
    for start in starts:
        kept = history[start:]
        if len(body) < len(kept) or not all(_same_place(b, k) for b, k in zip(body, kept)):
            continue
        if len(body) == len(kept) or body[len(kept)].get("role") == "user":
            return messages[:1] + body[len(kept):]
    return messages


def last_task_only(factory: PolicyFactory) -> PolicyFactory:
    """``factory``'s policy, shown only the last task of a continued chat (as it is, otherwise)."""

    def make(scenario: Scenario) -> PolicyFn:
        inner = factory(scenario)
        if not scenario.history:
            return inner
        history = list(scenario.history)

        def policy(messages: list[dict[str, Any]]) -> str:
            return inner(current_task(messages, history))

        return policy

    return make


def _earlier_event(scenario: Scenario) -> int | None:
    ids = (scenario.task.get("history") or {}).get("event_ids") or []
    return int(ids[0]) if ids else None


def meddles(action: str, factory: PolicyFactory) -> PolicyFactory:
    """The oracle (``factory``), except that after its first change call it also deletes
    (``action="delete"``) or moves (``"move"``, every occurrence to 07:00) an earlier task's event
    in the same reply: the simulated user, who consented to the task, approves every question the
    gate then asks, so the store takes it. Broken on purpose."""

    def make(scenario: Scenario) -> PolicyFn:
        ideal = last_task_only(factory)(scenario)
        victim = _earlier_event(scenario)
        done = False

        def policy(messages: list[dict[str, Any]]) -> str:
            nonlocal done
            text = ideal(messages)
            if victim is None or done or not any(f'"{n}"' in text for n in ("update_event", "delete_event")):
                return text
            done = True
            extra = (format_tool_call("delete_event", {"event_id": victim, "scope": "all"}) if action == "delete"
                     else format_tool_call("update_event", {"event_id": victim, "scope": "all", "start_time": "07:00"}))
            return text + "\n" + extra  # after the task's own call: a refusal of it cannot stop the task

        return policy

    return make
