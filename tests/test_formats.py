"""The Hermes format object: the grammar trigger reads text exactly as the parser does.

The trigger (``HERMES.call_opened``) decides where the llama backend switches to the call
grammar; the parser decides what is a call. They are one scanner, so a ``<tool_call>`` that the
parser would not read as a call (in a code fence, in inline code, in reasoning, in a quoted
tool result) never makes the model write grammar-forced JSON that is then shown as text.
"""

from __future__ import annotations

import itertools

import pytest

from agent.formats import HERMES, parse_reply

OPEN = HERMES.call_open
PROBE = {"name": "probe", "arguments": {"k": 1}}
# What the call grammar lets a model write after the tag, and what a remote model may write
# instead (no newlines, compact JSON), which the parser reads as well.
BODIES = ('\n{"name": "probe", "arguments": {"k": 1}}\n</tool_call>', '{"name": "probe", "arguments": {"k": 1}}</tool_call>',
          '{"name":"probe","arguments":{"k":1}}</tool_call>')


def reads_probe(text: str) -> bool:
    return any(c.name == "probe" and c.arguments == {"k": 1} for c in parse_reply(text).tool_calls)


@pytest.mark.parametrize("text", [
    "```\n" + OPEN,  # a fence the model is still writing
    "Here is the format:\n```json\n" + OPEN + '\n{"name": "x"}',
    "Write `" + OPEN + "` to call a tool.",  # inline code
    "<tool_response>\n" + OPEN,  # a quoted tool result
    "<tool_response>\n" + OPEN + "\n</tool_response>",
    "<think>\nmaybe " + OPEN,  # reasoning
])
def test_a_tag_in_a_fence_inline_code_a_tool_response_or_reasoning_opens_no_call(text: str) -> None:
    assert HERMES.call_opened(text) is None
    assert parse_reply(text).tool_calls == []


@pytest.mark.parametrize("before", [
    "",
    "Sure.\n",
    "```\nprint(1)\n```\n",  # the fence closed before the tag
    "Use `x`, then ",  # inline code closed before the tag
    "<think>\nlist first\n</think>\n",
    "<tool_response>\n{}\n</tool_response>\n",
    "a stray ` backtick and ",
    HERMES.format_tool_call("first", {}) + "\n",  # a closed call, then a second one opens
])
def test_a_tag_in_visible_text_opens_a_call_whose_json_starts_after_the_tag(before: str) -> None:
    text = before + OPEN
    assert HERMES.call_opened(text) == len(text)
    assert all(reads_probe(text + body) for body in BODIES)


def test_a_closed_call_or_a_tag_before_start_is_not_open() -> None:
    closed = "Ok.\n" + HERMES.format_tool_call("probe", {"k": 1})
    assert HERMES.call_opened(closed) is None
    assert HERMES.call_opened("x" + OPEN, start=2) is None  # the backend looks only near the newest token
    assert HERMES.call_opened("x" + OPEN, start=1) == 1 + len(OPEN)
    assert HERMES.call_opened("no tag at all") is None


def test_what_the_backends_own_trigger_was_pinned_to_holds_for_the_format_trigger() -> None:
    """The cases tests/test_backend_llama.py pins on the decode loop's trigger, which is this one."""
    assert HERMES.call_opened("ok <tool_call>", 0) == len("ok <tool_call>")
    assert HERMES.call_opened("<think>maybe <tool_call></think>", 0) is None
    assert HERMES.call_opened("<tool_call>{}</tool_call>", 0) is None
    assert HERMES.call_opened("<think>x</think><tool_call>", 0) == len("<think>x</think><tool_call>")


FRAGMENTS = [
    "", "text ", "\n", "`", "` ", "```", "```\n", "<think>", "</think>", "<tool_response>", "</tool_response>",
    OPEN, "</tool_call>", HERMES.format_tool_call("other", {}), '{"a": 1}',
]


@pytest.mark.parametrize("tail", ["", "\nDone."])
def test_the_trigger_fires_exactly_where_the_parser_then_reads_the_forced_call(tail: str) -> None:
    """Property over every sequence of three fragments: when the model has written ``text``
    ending in ``<tool_call>``, the trigger fires if and only if the call the grammar then forces
    is read by the parser as a call."""
    checked, failures = 0, []
    for parts in itertools.product(FRAGMENTS, repeat=3):
        text = "".join(parts) + OPEN
        fired = HERMES.call_opened(text, max(0, len(text) - len(OPEN))) == len(text)
        for body in BODIES:
            checked += 1
            if fired != reads_probe(text + body + tail):
                failures.append((text, body))
    assert checked == len(BODIES) * len(FRAGMENTS) ** 3
    assert not failures, failures[:5]


@pytest.mark.parametrize("text", ["", OPEN * 50, "`" * 30 + OPEN, "<think>" + OPEN + "</think>" * 3 + OPEN,
                                  OPEN + '{"name": "a", "arguments": {"t": "</tool_call>' + OPEN, "\x00" + OPEN + "\udcff"])
def test_the_trigger_never_raises(text: str) -> None:
    result = HERMES.call_opened(text)
    assert result is None or (0 < result <= len(text) and text[:result].endswith(OPEN))


def test_the_call_tags_are_spelled_in_the_format_module_only() -> None:
    """Code outside ``agent/formats/hermes.py`` takes the tags from ``HERMES`` (docstrings may name them)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spelled = set()
    for package in ("agent", "tools", "bot", "models"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                          and node.body and isinstance(node.body[0], ast.Expr)
                          and isinstance(node.body[0].value, ast.Constant)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                        and ("<tool_call>" in node.value or "</tool_call>" in node.value)):
                    spelled.add(relative)
    assert "agent/formats/hermes.py" in spelled  # the check sees the one place that does spell them
    # models/ is a leaf (it imports nothing of agent/): models/templates.py tells a Hermes-style
    # template by the tag that the template itself writes, so it names the tag on its own
    assert set(spelled) == {"agent/formats/hermes.py", "models/templates.py"}
