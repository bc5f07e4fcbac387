"""parse_reply: the one parser of model output (Hermes / Qwen3 ``<tool_call>`` format).

Small models write almost-JSON: single quotes, trailing commas, Python literals, arguments as a
string, a forgotten closing tag. The parser repairs what it safely can and reports every repair
in ``ParsedReply.problems`` so that the loop (and the trajectory log) can see how clean the
model's output really was. A block that cannot be read at all yields no call, only a problem
that names the block, so the loop can tell the model what went wrong.

``<tool_call>`` text is only a call in visible text: not inside ``<think>`` reasoning, not in
code fences or inline code, and not inside a quoted ``<tool_response>``.

It never raises on any input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
FENCE = "```"

_SNIPPET_CHARS = 80
_WHITESPACE = re.compile(r"\s*")


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


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The canonical Hermes text of one call, exactly as scripted policies and exports write it."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}"


def parse_reply(text: str) -> ParsedReply:
    """Split a raw model reply into reasoning, visible content, tool calls and problems."""
    try:
        return _Scanner(text if isinstance(text, str) else str(text)).run()
    except Exception as exc:  # the contract is "never raises": a parser bug must not kill a turn
        return ParsedReply(content=str(text).strip(), problems=[f"reply could not be parsed: {type(exc).__name__}"])


# --------------------------------------------------------------------------------------------
# Splitting the reply into reasoning, visible text and call blocks
# --------------------------------------------------------------------------------------------


class _Scanner:
    """One left-to-right pass over the reply; keeps the pieces in order."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: list[ToolCall] = []
        self.problems: list[str] = []
        self.blocks = 0  # <tool_call> blocks seen, for naming them in problems

    def run(self) -> ParsedReply:
        start = self._leading_reasoning()
        self._scan(start)
        content = re.sub(r"\n{3,}", "\n\n", "".join(self.content)).strip()
        reasoning = "\n\n".join(part.strip() for part in self.reasoning if part.strip())
        return ParsedReply(reasoning=reasoning, content=content, tool_calls=self.calls, problems=self.problems)

    def _leading_reasoning(self) -> int:
        """Qwen3 templates put ``<think>`` in the prompt: text before a lone ``</think>`` is reasoning.

        A ``</think>`` that sits inside a well-formed call's JSON strings is data, not a tag.
        """
        text = self.text
        close = text.find(THINK_CLOSE)
        if close == -1 or THINK_OPEN in text[:close]:
            return 0
        opened = text.find(CALL_OPEN)
        while opened != -1 and opened < close:
            end = _clean_block_end(text, opened + len(CALL_OPEN))
            if end is not None and end > close:
                return 0
            opened = text.find(CALL_OPEN, opened + len(CALL_OPEN))
        self.reasoning.append(text[:close])
        return close + len(THINK_CLOSE)

    def _scan(self, pos: int) -> None:
        text = self.text
        markers = (FENCE, "`", THINK_OPEN, THINK_CLOSE, RESPONSE_OPEN, CALL_OPEN, CALL_CLOSE)
        while pos < len(text):
            found = [(i, m) for m in markers if (i := text.find(m, pos)) != -1]
            if not found:
                self.content.append(text[pos:])
                return
            # earliest marker; at equal positions the longer one (``` before `) wins
            at, marker = min(found, key=lambda f: (f[0], -len(f[1])))
            self.content.append(text[pos:at])
            pos = self._handle(marker, at)

    def _handle(self, marker: str, at: int) -> int:
        """Consume the construct starting at ``at``; return where scanning resumes."""
        text = self.text
        if marker == FENCE:
            end = text.find(FENCE, at + len(FENCE))
            stop = len(text) if end == -1 else end + len(FENCE)
            self.content.append(text[at:stop])  # code stays visible, calls inside it do not count
            return stop
        if marker == "`":
            end = text.find("`", at + 1)
            line_end = text.find("\n", at + 1)
            if end == -1 or (line_end != -1 and line_end < end):
                self.content.append("`")  # a stray backtick, not inline code
                return at + 1
            self.content.append(text[at : end + 1])
            return end + 1
        if marker == THINK_OPEN:
            body_start = at + len(THINK_OPEN)
            end = text.find(THINK_CLOSE, body_start)
            if end == -1:  # unclosed: everything after is reasoning
                self.reasoning.append(text[body_start:])
                return len(text)
            self.reasoning.append(text[body_start:end])
            return end + len(THINK_CLOSE)
        if marker == RESPONSE_OPEN:
            end = text.find(RESPONSE_CLOSE, at)
            stop = len(text) if end == -1 else end + len(RESPONSE_CLOSE)
            self.content.append(text[at:stop])  # a quoted result is text, not a call
            return stop
        if marker == THINK_CLOSE:  # a second, stray closing tag: not something to show the user
            return at + len(THINK_CLOSE)
        if marker == CALL_CLOSE:
            self.problems.append(f"stray {CALL_CLOSE} without {CALL_OPEN} ignored")
            return at + len(CALL_CLOSE)
        return self._call_block(at)

    def _call_block(self, at: int) -> int:
        text = self.text
        body_start = at + len(CALL_OPEN)
        close = text.find(CALL_CLOSE, body_start)
        reopen = text.find(CALL_OPEN, body_start)
        self.blocks += 1
        label = f"tool call {self.blocks}"
        clean_end = _clean_block_end(text, body_start)
        if clean_end is not None:  # tags quoted inside the JSON strings do not end the block
            body, resume = text[body_start : clean_end - len(CALL_CLOSE)], clean_end
        elif close != -1 and (reopen == -1 or close < reopen):
            body, resume = text[body_start:close], close + len(CALL_CLOSE)
        elif reopen != -1:
            body, resume = text[body_start:reopen], reopen
            self.problems.append(f"{label}: missing {CALL_CLOSE} before the next {CALL_OPEN}")
        else:
            body, resume = text[body_start:], len(text)
            self.problems.append(f"{label}: missing {CALL_CLOSE} at end of reply")
        calls, problems = _read_block(body)
        self.calls.extend(calls)
        self.problems.extend(f"{label}: {p}" for p in problems)
        return resume


def _clean_block_end(text: str, body_start: int) -> int | None:
    """End of ``</tool_call>`` when the block is one valid JSON object followed by the closing tag."""
    start = _WHITESPACE.match(text, body_start).end()
    if not text.startswith("{", start):
        return None
    try:
        _, end = json.JSONDecoder(strict=False).raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    tag = _WHITESPACE.match(text, end).end()
    return tag + len(CALL_CLOSE) if text.startswith(CALL_CLOSE, tag) else None


# --------------------------------------------------------------------------------------------
# Reading one block: JSON first, then careful repairs
# --------------------------------------------------------------------------------------------


def _snippet(raw: str) -> str:
    flat = " ".join(raw.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 1] + "…"


def _read_block(raw: str) -> tuple[list[ToolCall], list[str]]:
    """The calls in one ``<tool_call>`` block (normally one) and the problems found reading it."""
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
