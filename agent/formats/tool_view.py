"""What a model is shown of its tools: the ``full`` schemas or the ``compact`` view.

Format-neutral: a format module (``agent/formats/hermes.py``) turns these into its tool block.
The runtime's renderer, the SFT/GRPO exports and therefore training all go through
``shown_tools``, so a model is trained on the block it is served with.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

TOOL_BLOCKS = ("full", "compact")

# "e.g. ..." examples, with the parenthesis or clause they sit in; a trailing sentence after the first.
_EXAMPLE = re.compile(r"\s*\((?:[^()]*?)e\.g\.[^()]*\)|[,;]?\s*\be\.g\.\s[^.;]*(?:\.(?=\s|$))?")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z\[(']|$)")
# What the compact block keeps of a property schema (constraints and defaults are the grammar's
# and the validator's business; the model needs the shape and the meaning).
_COMPACT_KEYS = ("type", "enum", "const", "items", "properties", "required", "anyOf")


def short_description(text: str) -> str:
    """One line: examples cut, then the first sentence (the rest is detail a small model can skip)."""
    text = _EXAMPLE.sub("", " ".join(text.split())).strip()
    first = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    return first.rstrip(";,")


def _compact_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_compact_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key in _COMPACT_KEYS:
        if key == "properties" and isinstance(node.get(key), dict):
            out[key] = {name: _compact_schema(prop) for name, prop in node[key].items()}
        elif key in node:
            out[key] = _compact_schema(node[key])
    if out.get("required") == []:
        del out["required"]
    return out


def compact_tools(tools: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool schemas as the ``compact`` block shows them: the tool's description cut to one
    line without examples; parameters by name and type only (no descriptions, defaults or
    constraints). Only what the model reads changes: the grammar and the validator still work
    from the full schemas, so what the block leaves out is still enforced (a date is
    ``YYYY-MM-DD`` because the grammar admits nothing else)."""
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        entry: dict[str, Any] = {"name": function["name"]}
        if function.get("description"):
            entry["description"] = short_description(str(function["description"]))
        if function.get("parameters") is not None:
            entry["parameters"] = _compact_schema(function["parameters"])
        out.append({"type": "function", "function": entry} if "function" in tool else entry)
    return out


def _type_words(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "anyOf" in schema:
        return "|".join(_type_words(option) for option in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return _type_words(schema.get("items") or {}) + "[]"
    if kind == "object" and schema.get("properties"):
        return "{" + _fields(schema) + "}"  # a nested argument (e.g. a calendar's repeat): its fields, not "object"
    return "|".join(kind) if isinstance(kind, list) else str(kind)


def _fields(parameters: dict[str, Any]) -> str:
    required = set(parameters.get("required", []))
    return ", ".join(f"{name}{'' if name in required else '?'}: {_type_words(prop)}"
                     for name, prop in (parameters.get("properties") or {}).items())


def tool_signature(tool: dict[str, Any]) -> str:
    """One line: ``name(required: type, optional?: type) - description``; a nested object's
    fields are written inside braces."""
    function = tool.get("function", tool)
    parameters = function.get("parameters") or {}
    args = _fields(parameters)
    description = function.get("description")
    return f"{function['name']}({args})" + (f" - {description}" if description else "")


def shown_tools(tools: list[dict[str, Any]], tool_block: str = "full") -> list[dict[str, Any]]:
    """The tools as the prompt shows them under the ``tool_block`` setting (``full`` or ``compact``).

    The one place that decides: the runtime's renderer, the SFT/GRPO exports and therefore
    training all call it, so a model is trained on the block it is served with.
    """
    if tool_block not in TOOL_BLOCKS:
        raise ValueError(f"tool_block must be one of {', '.join(TOOL_BLOCKS)}, not {tool_block!r}")
    return compact_tools(tools) if tool_block == "compact" else list(tools)

