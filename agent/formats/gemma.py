"""The Gemma 3 turn format: Hermes-style ``<tool_call>`` JSON in the text of Gemma's turns.

Gemma 3's vocabulary has no tool tokens and Google's template no tool support, so the calls,
the tool block and the parser are Hermes's (``HermesFormat``); what differs is the turn around
them: ``<start_of_turn>user … <end_of_turn>``, the system text folded into the first user turn,
``model`` for the assistant, and ``<end_of_turn>`` as the text that ends a reply. Google's
Gemma 3 270M GGUF carries no chat template, so the format brings its own (``gemma.jinja``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.resources import files

from agent.formats.hermes import HermesFormat

GEMMA_TEMPLATE = files("agent.formats").joinpath("gemma.jinja").read_text(encoding="utf-8")


@dataclass(frozen=True)
class GemmaFormat(HermesFormat):
    """Hermes calls inside Gemma turns; use the module's ``GEMMA``."""

    name: str = "gemma"
    stop_markers: tuple[str, ...] = ("<end_of_turn>",)
    turn_open: str = "<start_of_turn>"
    template: str | None = field(default=GEMMA_TEMPLATE, repr=False)

    @property
    def control_tags(self) -> tuple[str, ...]:
        """The format's tags and its turn scaffolding (``<start_of_turn>``, ``<end_of_turn>``)."""
        return (*super().control_tags, self.turn_open)


GEMMA = GemmaFormat()
