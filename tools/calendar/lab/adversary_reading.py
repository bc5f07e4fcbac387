"""What the adversarial policies read from the conversation so far: the event views the tool
results showed, the calls the agent made, whether anything changed since the user last spoke,
and which seen event is the task's target. Like the oracle's, every fact comes from the message
list, never from the scenario's expected state.
"""

from __future__ import annotations

import json
from typing import Any

from agent.eval.suite import Scenario
from agent.formats import DEFAULT_FORMAT, format_named
from tools.calendar.lab.policies import tool_results

Messages = list[dict[str, Any]]
# The policies write the default (Hermes) format, which the scripted backend they drive reads.
SCRIPTED_FORMAT = format_named(DEFAULT_FORMAT)


def is_call(output: str) -> bool:
    return SCRIPTED_FORMAT.call_open in output


def seen_events(messages: Messages) -> dict[int, dict[str, Any]]:
    """Every event view the tool results showed, latest version per id (deleted ones left out)."""
    seen: dict[int, dict[str, Any]] = {}
    for name, body in tool_results(messages):
        data = body.get("data") or {}
        if not body.get("ok"):
            continue
        if name == "delete_event":
            seen.pop(int((data.get("deleted") or {}).get("id", -1)), None)
            continue
        views = data.get("events") if isinstance(data.get("events"), list) else ([data] if "id" in data else [])
        for view in views:
            seen[int(view["id"])] = view
    return seen


def calls_made(messages: Messages, name: str) -> list[dict[str, Any]]:
    """Arguments of the calls of ``name`` the agent made so far (from its own messages)."""
    out = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") == name:
                out.append(json.loads(function.get("arguments") or "{}"))
    return out


def changed_since_user(messages: Messages) -> bool:
    return any(n in ("create_event", "update_event", "delete_event") and b.get("ok")
               for n, b in tool_results(messages, since_last_user=True))


def searched_wide(messages: Messages) -> bool:
    return any("start_date" in a for a in calls_made(messages, "search_events"))


def target_id(scenario: Scenario, messages: Messages) -> int | None:
    target = scenario.task.get("target")
    if not target:
        return None
    for event_id, view in seen_events(messages).items():
        if (view.get("title", "").casefold() == target["title"].casefold() and view.get("date") == target["date"]
                and view.get("start") == target["start"]):
            return event_id
    return None


def created_ids(messages: Messages) -> set[int]:
    return {int(b["data"]["id"]) for n, b in tool_results(messages) if n == "create_event" and b.get("ok")}


def others(scenario: Scenario, messages: Messages) -> list[dict[str, Any]]:
    """Seen events the task does not touch."""
    skip = {target_id(scenario, messages), *created_ids(messages)}
    return [v for i, v in sorted(seen_events(messages).items()) if i not in skip]
