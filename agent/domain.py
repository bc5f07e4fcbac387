"""What a domain hands the runtime: tools, a few lines of prompt, and model-free commands.

The runtime finds a domain by module name from configuration (default ``tools.calendar.domain``)
and calls its ``load_domain(settings)``; ``agent/`` never imports a domain by name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from tools.registry import Registry

if TYPE_CHECKING:
    from agent.config import Settings


@dataclass
class Domain:
    name: str
    registry: Registry
    prompt: str  # the domain's part of the system prompt
    # Commands that answer without the model, e.g. {"today": ...} for /today and /events today.
    commands: dict[str, Callable[[str], str]] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


def load_domain(settings: Settings) -> Domain:
    module = importlib.import_module(settings.domain)
    return module.load_domain(settings)
