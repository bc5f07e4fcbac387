"""Reading the JSON body of one tool-call block: JSON first, then careful repairs.

Small models write almost-JSON: single quotes, trailing commas, Python literals, arguments as a
string. ``read_block`` repairs what it safely can and names every repair in the problems it
returns; a body that cannot be read yields no call, only a problem that says why. The body is
the ``{"name": ..., "arguments": ...}`` object that Hermes/Qwen (and most JSON-call formats)
write between their tags, so a second format reuses this as it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.formats.reply import ToolCall

_SNIPPET_CHARS = 80


def _snippet(raw: str) -> str:
    flat = " ".join(raw.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 1] + "…"


def read_block(raw: str) -> tuple[list[ToolCall], list[str]]:
    """The calls in one call block's body (normally one) and the problems found reading it."""
    problems: list[str] = []
    body = raw.strip()
    if not body:
        return [], ["could not be read: the block is empty"]
    fenced = re.fullmatch(r"```[A-Za-z]*\s*(.*?)\s*```", body, flags=re.DOTALL)
    if fenced:
        body = fenced.group(1)
        problems.append("code fence inside the block removed")
    value, read_problems = _load_json_object(body)
    problems.extend(read_problems)
    if value is None:
        return [], problems + [f"could not be read as JSON: {_snippet(raw)!r}"]
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list):
        problems.append("several calls given as a list in one block")
    calls: list[ToolCall] = []
    for item in items:
        call, call_problems = _to_call(item, raw)
        problems.extend(call_problems)
        if call is not None:
            calls.append(call)
    return calls, problems


def _to_call(obj: Any, raw: str) -> tuple[ToolCall | None, list[str]]:
    """Normalise a decoded object into a ToolCall, naming each liberty taken."""
    problems: list[str] = []
    if not isinstance(obj, dict):
        return None, [f"could not be read: expected a JSON object, got {_json_type(obj)}: {_snippet(raw)!r}"]
    if "name" not in obj and isinstance(obj.get("function"), dict):
        obj = obj["function"]  # OpenAI-style {"function": {"name": ..., "arguments": ...}}
        problems.append("call wrapped in 'function' unwrapped")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, problems + [f"could not be read: no tool name: {_snippet(raw)!r}"]
    if name != name.strip():
        problems.append("whitespace around the tool name removed")
        name = name.strip()

    if "arguments" in obj:
        arguments = obj["arguments"]
    elif "parameters" in obj:
        arguments = obj["parameters"]
        problems.append("used 'parameters' instead of 'arguments'")
    else:
        rest = {k: v for k, v in obj.items() if k != "name"}
        if rest:
            arguments = rest
            problems.append("arguments given next to 'name' instead of inside 'arguments'")
        else:
            arguments = {}
            problems.append("missing 'arguments' (assumed {})")

    if isinstance(arguments, str):
        if not arguments.strip():
            arguments = {}
            problems.append("arguments given as an empty string (assumed {})")
        else:
            decoded, string_problems = _load_json_object(arguments)
            if isinstance(decoded, dict):
                arguments = decoded
                problems.append("arguments given as a JSON string")
                problems.extend(string_problems)
            else:
                problems.append("arguments given as a string that is not a JSON object")
    elif arguments is None:
        arguments = {}
        problems.append("arguments given as null (assumed {})")
    return ToolCall(name=name, arguments=arguments, raw=raw), problems


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _load_json_object(text: str) -> tuple[Any, list[str]]:
    """Decode the first JSON value in ``text`` (normally an object), repairing if plain JSON fails.

    Returns ``(None, problems)`` when nothing sensible can be read.
    """
    problems: list[str] = []
    start = _first_value_start(text)
    if start == -1:
        return None, []
    if text[:start].strip():
        problems.append("text before the JSON object ignored")
    decoder = json.JSONDecoder(strict=False)  # raw newlines inside strings are common and harmless
    try:
        value, end = decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    else:
        if text[end:].strip():
            problems.append("extra text after the JSON object ignored")
        return value, problems

    span, closed = _balanced_span(text, start)
    repaired, repairs = _repair(span)
    if not closed:
        repaired += _missing_closers(repaired)
        repairs.append("missing closing brackets added")
    try:
        value = json.loads(repaired, strict=False)
    except (ValueError, RecursionError):
        return None, problems
    if text[start + len(span) :].strip():
        problems.append("extra text after the JSON object ignored")
    return value, problems + repairs


def _first_value_start(text: str) -> int:
    """Where the call object starts: the first ``{``, or a ``[`` of objects if that comes first."""
    brace = text.find("{")
    bracket = text.find("[")
    if bracket != -1 and (brace == -1 or bracket < brace) and text[bracket + 1 :].lstrip().startswith("{"):
        return bracket
    return brace


def _balanced_span(text: str, start: int) -> tuple[str, bool]:
    """The text of the bracketed value at ``start`` (strings in either quote respected).

    Returns the span and whether its brackets closed; an unclosed value runs to the end.
    """
    depth = 0
    quote = ""
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1], True
        i += 1
    return text[start:], False


_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def _repair(text: str) -> tuple[str, list[str]]:
    """Rewrite almost-JSON into JSON: single quotes, Python literals, trailing commas.

    Works token by token outside strings so that text inside strings is never touched.
    """
    out: list[str] = []
    fixes: dict[str, bool] = {"quotes": False, "literals": False, "commas": False}
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end, _ = _string_end(text, i, '"')
            out.append(text[i:end])
            i = end
        elif ch == "'":
            end, closed = _string_end(text, i, "'")
            out.append(_requote(text[i + 1 : end - 1] if closed else text[i + 1 : end]))
            fixes["quotes"] = True
            i = end
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if word in _PY_LITERALS:
                out.append(_PY_LITERALS[word])
                fixes["literals"] = True
            else:
                out.append(word)
            i = j
        elif ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                fixes["commas"] = True  # drop the comma, keep the whitespace
            else:
                out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    repairs = []
    if fixes["quotes"]:
        repairs.append("single quotes repaired")
    if fixes["literals"]:
        repairs.append("Python literals True/False/None converted")
    if fixes["commas"]:
        repairs.append("trailing comma removed")
    return "".join(out), repairs


def _string_end(text: str, start: int, quote: str) -> tuple[int, bool]:
    """Index just past the string opening at ``start``, and whether its closing quote was found."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1, True
        i += 1
    return len(text), False


def _requote(inner: str) -> str:
    """A single-quoted string's inside as a JSON double-quoted string."""
    inner = inner.replace("\\'", "'")
    inner = re.sub(r'(?<!\\)((?:\\\\)*)"', r'\1\\"', inner)
    return f'"{inner}"'


def _missing_closers(text: str) -> str:
    """The brackets that would close ``text``; nothing if it ends inside a string."""
    stack: list[str] = []
    in_string = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
        i += 1
    if in_string:
        return ""
    return "".join(reversed(stack))
