"""Test-only model: ``--scripted FILE`` replays model outputs chosen by rules.

End-to-end tests of the bot process must not depend on what a 135M model happens to
write. The file is JSON, either a list of raw outputs (replayed in order), or::

    {"rules": [{"match": "<regex on the user's text>", "steps": ["<raw output>", ...],
                "sleep": 0}],
     "default": ["You said: {user}"]}

The step used is the number of model steps already taken in this turn (the last step
repeats). ``match`` and ``{user}`` see the user's text as typed (without the runtime's
``[HH:MM]`` stamp). ``{user}`` is replaced by the user's text, ``{result}`` by the last tool result
and ``{name}`` by the regex's named group ``name``; ``sleep`` (seconds) delays the first step, so a test can kill the bot mid-turn.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from agent.backends.scripted import ScriptedBackend
from agent.prompt import unstamp_user_text


def _fill(template: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def rule_script(spec: dict[str, Any]):
    """A function from the message history to the next raw output."""
    rules = [(re.compile(r["match"]), r) for r in spec.get("rules", [])]
    default = {"steps": spec.get("default", ["{user}"])}

    def next_output(messages: list[dict[str, Any]]) -> str:
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        user = unstamp_user_text(str(messages[last_user].get("content", "")))
        after = messages[last_user + 1 :]
        step = sum(1 for m in after if m.get("role") == "assistant")
        tools = [str(m.get("content", "")) for m in after if m.get("role") == "tool"]
        rule, groups = default, {}
        for pattern, candidate in rules:
            found = pattern.search(user)
            if found:
                rule, groups = candidate, {k: v or "" for k, v in found.groupdict().items()}
                break
        if step == 0 and rule.get("sleep"):
            time.sleep(float(rule["sleep"]))
        steps = rule["steps"]
        values = {**groups, "user": user, "result": tools[-1] if tools else ""}
        return _fill(steps[min(step, len(steps) - 1)], values)

    return next_output


def load_scripted_backend(path: Path) -> ScriptedBackend:
    spec = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(spec, list):
        return ScriptedBackend([str(s) for s in spec])
    return ScriptedBackend(rule_script(spec))
