"""Calling the calendar tools as the agent loop does (validate, then execute), for the tool tests."""

from __future__ import annotations

from typing import Any

from agent.tools import Registry, ToolResult


def call(registry: Registry, name: str, **arguments: Any) -> ToolResult:
    """Validate then execute, exactly like the loop does."""
    validated = registry.validate(name, arguments)
    if isinstance(validated, ToolResult):
        return validated
    return registry.execute(name, validated)
