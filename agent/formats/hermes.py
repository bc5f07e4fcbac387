"""The Hermes / Qwen3 tool-call format, owned by one object: ``HERMES``.

Callers do not import it: the backend chooses a model's format (``chat_format.format_for``) and
everything else takes it from there. Other formats that write Hermes calls subclass it (``gemma``).

Everything that depends on how this model family writes a call lives here and nowhere else:
the tags (``<tool_call>``, ``<tool_response>``, ``<think>``), the tool block a template without
tool support gets in its system message, the canonical text of one call, the parser, the GBNF
that constrains a call once its tag is written, the grammar trigger, and the text that ends a
turn. A second model family is one new file beside this one with the same methods
(``chat_format.ChatFormat``).

The parser (``parse_reply``) and the trigger (``call_opened``) are one scanner: ``<tool_call>``
text is only a call in visible text: not inside ``<think>`` reasoning, not in code fences or
inline code, and not inside a quoted ``<tool_response>``. So the grammar constrains exactly the
tags that the parser will then read as calls. Small models write almost-JSON; reading a block
(``agent.formats.json_calls``) repairs what it safely can and names every repair in
``ParsedReply.problems``. Neither ever raises on any input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from agent.formats.gbnf import json_call_gbnf
from agent.formats.json_calls import read_block
from agent.formats.reply import ParsedReply, ToolCall
from agent.formats.tool_view import shown_tools, tool_signature

_WHITESPACE = re.compile(r"\s*")


@dataclass(frozen=True)
class HermesFormat:
    """Tags and rules of the Hermes/Qwen format; use the module's ``HERMES``."""

    name: str = "hermes"
    call_open: str = "<tool_call>"
    call_close: str = "</tool_call>"
    response_open: str = "<tool_response>"
    response_close: str = "</tool_response>"
    think_open: str = "<think>"
    think_close: str = "</think>"
    fence: str = "```"
    # Text that ends the turn for models whose EOS token differs from the turn end (ChatML).
    stop_markers: tuple[str, ...] = ("<|im_end|>",)
    # The chat template this format brings for a GGUF that carries none (None: such a GGUF
    # cannot be served; every Hermes model here carries its own).
    template: str | None = field(default=None, repr=False)

    @property
    def own_tags(self) -> tuple[str, ...]:
        """The tags the model itself writes, read back as the tokens it produced when its turns
        are rendered again; anything else in a turn is data (``agent.segments``)."""
        return (self.call_open, self.call_close, self.think_open, self.think_close)

    @property
    def control_tags(self) -> tuple[str, ...]:
        """Every spelling of this format a tokenizer may make a control token of: its tags and
        the text that ends its turns. Data sent to a remote server has them broken (``wire_text``)."""
        return (self.call_open, self.call_close, self.response_open, self.response_close,
                self.think_open, self.think_close, *self.stop_markers)

    # -- writing ------------------------------------------------------------------------------

    def format_tool_call(self, name: str, arguments: dict[str, Any]) -> str:
        """The canonical Hermes text of one call, exactly as scripted policies and exports write it."""
        body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return f"{self.call_open}\n{body}\n{self.call_close}"

    def call_text(self, name: str, arguments: str) -> str:
        """One call as text, holding an API server's ``arguments`` text byte for byte.

        For arguments a JSON object, this is what ``format_tool_call`` writes when the server's
        text is ``json.dumps`` of it; arguments that are not valid JSON go in as a string, so the
        block still parses and the loop answers "invalid arguments" to the model.
        """
        try:
            json.loads(arguments)
            inner = arguments
        except ValueError:
            inner = json.dumps(arguments, ensure_ascii=False)
        return f'{self.call_open}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {inner}}}\n{self.call_close}'

    @property
    def call_example(self) -> str:
        """How a call looks, for telling a model that its call could not be read."""
        return f'{self.call_open}{{"name": ..., "arguments": {{...}}}}{self.call_close}'

    def tool_block(self, tools: Iterable[dict[str, Any]], tool_block: str = "full") -> str:
        """The tool instructions for templates that do not render tools themselves.

        Kept short on purpose: every token here is paid at every step and in every training example.
        ``full`` lists the JSON schemas as Hermes does; ``compact`` one signature line per tool.
        """
        tools = shown_tools(list(tools), tool_block)
        tags = f"{self.call_open}{self.call_close}"
        example = f'{self.call_open}{{"name": <function-name>, "arguments": <args-json-object>}}{self.call_close}'
        if tool_block == "compact":
            lines = "\n".join(tool_signature(t) for t in tools)
            return (
                f"# Tools\n<tools>\n{lines}\n</tools>\n"
                f"To call a function, reply with a JSON object within {tags} tags:\n"
                + example
            )
        lines = "\n".join(json.dumps(t, ensure_ascii=False, separators=(",", ":")) for t in tools)
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            f"Function signatures:\n<tools>\n{lines}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            f"{tags} XML tags:\n"
            + example
        )

    def tool_response(self, content: str) -> str:
        """A tool result as the user turn that carries it, as Qwen's template writes it."""
        return f"{self.response_open}\n{content}\n{self.response_close}"

    def plain_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                   tool_block: str = "full") -> list[dict[str, Any]]:
        """Plain role/content messages for a template that does not render tools (SmolLM2's ChatML).

        The Hermes tool block goes into the system message and tool results become user turns in
        ``<tool_response>`` tags. The runtime renders exactly this, and exports for such a model
        carry exactly this, so training and inference see the same tokens.
        """
        out: list[dict[str, Any]] = []
        for m in messages:
            role, content = str(m.get("role")), m.get("content") or ""
            if role == "tool":
                out.append({"role": "user", "content": self.tool_response(content)})
            else:
                out.append({"role": role, "content": content})
        if tools:
            block = self.tool_block(tools, tool_block)
            if out and out[0]["role"] == "system":
                out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{block}"}
            else:
                out.insert(0, {"role": "system", "content": block})
        return out

    # -- reading ------------------------------------------------------------------------------

    def parse_reply(self, text: str) -> ParsedReply:
        """Split a raw model reply into reasoning, visible content, tool calls and problems."""
        try:
            return _Scanner(self, text if isinstance(text, str) else str(text)).run()
        except Exception as exc:  # the contract is "never raises": a parser bug must not kill a turn
            return ParsedReply(content=str(text).strip(), problems=[f"reply could not be parsed: {type(exc).__name__}"])

    def call_opened(self, text: str, start: int = 0) -> int | None:
        """The grammar trigger: where the JSON of a call that is open at the end of ``text`` starts.

        That is the end index of a ``<tool_call>`` at or after ``start`` that the parser reads as
        a call (the scanner of ``parse_reply`` decides, so a tag in a fence, in inline code, in
        reasoning or in a quoted tool result opens nothing) and that no ``</tool_call>`` has
        closed yet; None if there is none. ``text`` is what the model has written so far.
        """
        if text.find(self.call_open, start) == -1:
            return None  # the common case, checked per generated token: no scan at all
        try:
            scanner = _Scanner(self, text, read_calls=False)
            scanner.run()
        except Exception:  # never raises; no constraint then, and the parser still reads the text
            return None
        return next((body for at, body, closed in scanner.tags if at >= start and not closed), None)

    def call_gbnf(self, tools: list[dict[str, Any]]) -> str:
        """GBNF for the text after ``<tool_call>``: one call to one of ``tools``, then ``</tool_call>``."""
        return json_call_gbnf(tools, close=self.call_close)


HERMES = HermesFormat()


# --------------------------------------------------------------------------------------------
# Splitting the reply into reasoning, visible text and call blocks
# --------------------------------------------------------------------------------------------


class _Scanner:
    """One left-to-right pass over the reply; keeps the pieces in order.

    ``tags`` records every call block as (tag start, body start, closed), for the trigger;
    with ``read_calls=False`` the blocks' JSON is not read (the trigger needs only where they are).
    """

    def __init__(self, fmt: HermesFormat, text: str, *, read_calls: bool = True) -> None:
        self.fmt = fmt
        self.text = text
        self.read_calls = read_calls
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: list[ToolCall] = []
        self.problems: list[str] = []
        self.tags: list[tuple[int, int, bool]] = []
        self.blocks = 0  # <tool_call> blocks seen, for naming them in problems

    def run(self) -> ParsedReply:
        start = self._leading_reasoning()
        self._scan(start)
        content = re.sub(r"\n{3,}", "\n\n", "".join(self.content)).strip()
        reasoning = "\n\n".join(part.strip() for part in self.reasoning if part.strip())
        return ParsedReply(reasoning=reasoning, content=content, tool_calls=self.calls, problems=self.problems)

    def _leading_reasoning(self) -> int:
        """Text before a lone ``</think>`` is reasoning: for templates whose generation prompt opens
        the think block (Qwen3-Thinking-2507's ``<think>\n``; a remote server's output for one).

        Neither production template does: 2507's generation prompt has no think block, the hybrid
        Qwen3's is closed (empty, thinking off) or absent (thinking on, the model writes ``<think>``).
        For them a lone ``</think>`` is stray, yet the text before it is still taken as reasoning.
        A ``</think>`` that sits inside a well-formed call's JSON strings is data, not a tag.
        """
        text, f = self.text, self.fmt
        close = text.find(f.think_close)
        if close == -1 or f.think_open in text[:close]:
            return 0
        opened = text.find(f.call_open)
        while opened != -1 and opened < close:
            end = _clean_block_end(text, opened + len(f.call_open), f.call_close)
            if end is not None and end > close:
                return 0
            opened = text.find(f.call_open, opened + len(f.call_open))
        self.reasoning.append(text[:close])
        return close + len(f.think_close)

    def _scan(self, pos: int) -> None:
        text, f = self.text, self.fmt
        markers = (f.fence, "`", f.think_open, f.think_close, f.response_open, f.call_open, f.call_close)
        while pos < len(text):
            found = [(i, m) for m in markers if (i := text.find(m, pos)) != -1]
            if not found:
                self.content.append(text[pos:])
                return
            # earliest marker; at equal positions the longer one (``` before `) wins
            at, marker = min(found, key=lambda hit: (hit[0], -len(hit[1])))
            self.content.append(text[pos:at])
            pos = self._handle(marker, at)

    def _handle(self, marker: str, at: int) -> int:
        """Consume the construct starting at ``at``; return where scanning resumes."""
        text, f = self.text, self.fmt
        if marker == f.fence:
            end = text.find(f.fence, at + len(f.fence))
            stop = len(text) if end == -1 else end + len(f.fence)
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
        if marker == f.think_open:
            body_start = at + len(f.think_open)
            end = text.find(f.think_close, body_start)
            if end == -1:  # unclosed: everything after is reasoning
                self.reasoning.append(text[body_start:])
                return len(text)
            self.reasoning.append(text[body_start:end])
            return end + len(f.think_close)
        if marker == f.response_open:
            end = text.find(f.response_close, at)
            stop = len(text) if end == -1 else end + len(f.response_close)
            self.content.append(text[at:stop])  # a quoted result is text, not a call
            return stop
        if marker == f.think_close:  # a second, stray closing tag: not something to show the user
            return at + len(f.think_close)
        if marker == f.call_close:
            self.problems.append(f"stray {f.call_close} without {f.call_open} ignored")
            return at + len(f.call_close)
        return self._call_block(at)

    def _call_block(self, at: int) -> int:
        text, f = self.text, self.fmt
        body_start = at + len(f.call_open)
        close = text.find(f.call_close, body_start)
        reopen = text.find(f.call_open, body_start)
        self.blocks += 1
        label = f"tool call {self.blocks}"
        clean_end = _clean_block_end(text, body_start, f.call_close)
        closed = True
        if clean_end is not None:  # tags quoted inside the JSON strings do not end the block
            body, resume = text[body_start : clean_end - len(f.call_close)], clean_end
        elif close != -1 and (reopen == -1 or close < reopen):
            body, resume = text[body_start:close], close + len(f.call_close)
        elif reopen != -1:
            body, resume = text[body_start:reopen], reopen
            self.problems.append(f"{label}: missing {f.call_close} before the next {f.call_open}")
        else:
            body, resume, closed = text[body_start:], len(text), False
            self.problems.append(f"{label}: missing {f.call_close} at end of reply")
        self.tags.append((at, body_start, closed))
        if self.read_calls:
            calls, problems = read_block(body)
            self.calls.extend(calls)
            self.problems.extend(f"{label}: {p}" for p in problems)
        return resume


def _clean_block_end(text: str, body_start: int, close: str) -> int | None:
    """End of the closing tag when the block is one valid JSON object followed by ``close``."""
    start = _WHITESPACE.match(text, body_start).end()
    if not text.startswith("{", start):
        return None
    try:
        _, end = json.JSONDecoder(strict=False).raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    tag = _WHITESPACE.match(text, end).end()
    return tag + len(close) if text.startswith(close, tag) else None
