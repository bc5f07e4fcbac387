"""What a parsed model reply is, whatever chat format it was written in.

A format module (``agent/formats/hermes.py``) reads raw model text into these; the loop, the call
gate, eval and export only ever see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any  # normally a dict; anything else is reported to the model as invalid
    raw: str = ""  # the text between the tags, as the model wrote it


@dataclass(frozen=True)
class ParsedReply:
    reasoning: str = ""  # text inside <think>...</think>
    content: str = ""  # visible text, tool-call blocks removed
    tool_calls: list[ToolCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # repairs made and blocks that could not be read
