"""The tool-call grammar: built from registry schemas, parsed and enforced by real llama.cpp."""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import pytest
from llama_cpp import Llama
from pydantic import BaseModel, Field

from agent.grammar import CALL_CLOSE, check_grammar, compile_grammar, grammar_accepts, tool_call_gbnf
from agent.parsing import format_tool_call, parse_reply
from tools.registry import Registry, Tool, ToolResult

# ------------------------------------------------------------------ a toy registry


class Kind(str, Enum):
    work = "work"
    personal = "personal"


class CreateEvent(BaseModel):
    title: str
    start: str = Field(description="ISO 8601 local date-time")
    duration_minutes: int = 60
    all_day: bool = False
    location: str | None = None
    kind: Kind = Kind.personal
    attendees: list[str] = []
    priority: Literal["low", "high"] | None = None


class DeleteEvent(BaseModel):
    event_id: int


def _ok(_: Any) -> ToolResult:
    return ToolResult.success()


REGISTRY = Registry.of(
    [
        Tool("create_event", "Add an event to the calendar.", CreateEvent, _ok),
        Tool("delete_event", "Delete an event by id.", DeleteEvent, _ok, destructive=True),
    ]
)
GBNF = tool_call_gbnf(REGISTRY.schemas())


def after_tag(name: str, arguments: dict[str, Any]) -> str:
    """What the grammar must match: the canonical call text after ``<tool_call>``."""
    return format_tool_call(name, arguments).removeprefix("<tool_call>")


@pytest.fixture(scope="module")
def llm(smollm2: Path) -> Iterator[Llama]:
    model = Llama(str(smollm2), n_ctx=2048, verbose=False, n_threads=2, seed=0)
    yield model
    model.close()


# ------------------------------------------------------------------ the text of the grammar


def test_grammar_needs_at_least_one_tool() -> None:
    with pytest.raises(ValueError):
        tool_call_gbnf([])


def test_grammar_has_no_unbounded_whitespace_loops() -> None:
    # a whitespace character class or literal repeated with * or + lets a small model spin forever
    unbounded = re.compile(r'(\[[^\]]*(\\n|\\t|\\r| )[^\]]*\]|"(\\n|\\t| )+")\s*[*+]')
    assert not unbounded.search(GBNF), GBNF


def test_each_tool_gets_its_own_rule_prefix() -> None:
    rule_names = [line.split(" ::= ")[0] for line in GBNF.splitlines()]
    assert len(rule_names) == len(set(rule_names))
    assert any(n.startswith("t0-create-event-") for n in rule_names)
    assert any(n.startswith("t1-delete-event-") for n in rule_names)


def test_compile_grammar_is_cached_by_text() -> None:
    first = compile_grammar(GBNF)
    assert compile_grammar(GBNF) is first
    other = tool_call_gbnf(REGISTRY.schemas()[:1])
    assert compile_grammar(other) is not first


# ------------------------------------------------------------------ llama.cpp enforces it


def test_llama_cpp_parses_the_grammar_and_refuses_a_broken_one(llm: Llama) -> None:
    check_grammar(llm, GBNF)
    with pytest.raises(ValueError):
        check_grammar(llm, "root ::= undefined-rule")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("delete_event", {"event_id": 42}),
        ("create_event", {"title": "치과 예약", "start": "2026-12-01T15:00"}),
        (
            "create_event",
            {
                "title": "Lunch",
                "start": "2026-12-01T12:00",
                "duration_minutes": 90,
                "all_day": False,
                "location": None,
                "kind": "work",
                "attendees": ["Mina", "준호"],
                "priority": "high",
            },
        ),
        ("create_event", {"title": "Trip", "start": "2026-12-24", "all_day": True, "priority": None}),
    ],
)
def test_canonical_calls_to_known_tools_are_accepted(llm: Llama, name: str, arguments: dict[str, Any]) -> None:
    assert grammar_accepts(llm, GBNF, after_tag(name, arguments))


def test_compact_json_without_newlines_is_accepted(llm: Llama) -> None:
    assert grammar_accepts(llm, GBNF, '{"name":"delete_event","arguments":{"event_id":3}}</tool_call>')


@pytest.mark.parametrize(
    ("why", "text"),
    [
        ("unknown tool", after_tag("drop_tables", {"event_id": 1})),
        ("missing required field", after_tag("create_event", {"title": "x"})),
        ("wrong type", after_tag("delete_event", {"event_id": "42"})),
        ("unknown enum value", after_tag("create_event", {"title": "x", "start": "y", "kind": "party"})),
        ("unknown argument", after_tag("delete_event", {"event_id": 1, "force": True})),
        ("arguments of the other tool", after_tag("delete_event", {"title": "x", "start": "y"})),
        ("parameters instead of arguments", '\n{"name": "delete_event", "parameters": {"event_id": 1}}\n</tool_call>'),
        ("arguments before name", '\n{"arguments": {"event_id": 1}, "name": "delete_event"}\n</tool_call>'),
        ("single quotes", "\n{'name': 'delete_event', 'arguments': {'event_id': 1}}\n</tool_call>"),
        ("raw newline inside a string", after_tag("create_event", {"title": "a", "start": "b"}).replace('"a"', '"a\nb"')),
        ("endless leading whitespace", "\n\n\n\n" + after_tag("delete_event", {"event_id": 1}).lstrip()),
        ("missing closing tag", after_tag("delete_event", {"event_id": 1}).removesuffix(CALL_CLOSE)),
        ("text after the closing tag", after_tag("delete_event", {"event_id": 1}) + " done"),
    ],
)
def test_invalid_calls_are_rejected(llm: Llama, why: str, text: str) -> None:
    assert not grammar_accepts(llm, GBNF, text), why


def test_a_cut_off_call_is_a_valid_beginning_but_not_a_match(llm: Llama) -> None:
    cut = after_tag("create_event", {"title": "회의", "start": "2026-12-01T09:00"})[:30]
    assert grammar_accepts(llm, GBNF, cut, partial=True)
    assert not grammar_accepts(llm, GBNF, cut)


def test_same_defs_name_in_two_tools_does_not_leak_between_them(llm: Llama) -> None:
    class A(str, Enum):
        a = "a"

    class B(str, Enum):
        b = "b"

    class UsesA(BaseModel):
        kind: A

    class UsesB(BaseModel):
        kind: B

    # give both tools a "$defs/A" with different contents: a shared converter would reuse the first
    schema_a = UsesA.model_json_schema()
    schema_b = UsesB.model_json_schema()
    schema_b["$defs"] = {"A": schema_b["$defs"].pop("B")}
    schema_b["properties"]["kind"] = {"$ref": "#/$defs/A"}
    tools = [{"function": {"name": "first", "parameters": schema_a}}, {"function": {"name": "second", "parameters": schema_b}}]
    gbnf = tool_call_gbnf(tools)
    assert grammar_accepts(llm, gbnf, after_tag("first", {"kind": "a"}))
    assert grammar_accepts(llm, gbnf, after_tag("second", {"kind": "b"}))
    assert not grammar_accepts(llm, gbnf, after_tag("second", {"kind": "a"}))


def test_tool_without_parameters_takes_an_empty_object(llm: Llama) -> None:
    gbnf = tool_call_gbnf([{"type": "function", "function": {"name": "list_today"}}])
    assert grammar_accepts(llm, gbnf, after_tag("list_today", {}))
    assert not grammar_accepts(llm, gbnf, after_tag("list_today", {"day": 1}))


# ------------------------------------------------------------------ generation under the grammar

PROMPT = (
    "<|im_start|>system\nYou are a calendar assistant. Tools: create_event(title, start, ...) and "
    "delete_event(event_id). Call a tool inside <tool_call></tool_call> tags.<|im_end|>\n"
    "<|im_start|>user\nAdd lunch with Mina tomorrow at noon.<|im_end|>\n"
    "<|im_start|>assistant\n<tool_call>\n"
)


@pytest.mark.slow
def test_generated_calls_are_always_valid_calls_to_known_tools(llm: Llama) -> None:
    grammar = compile_grammar(GBNF)
    finished = 0
    for seed in (0, 1, 2):
        out = llm.create_completion(PROMPT, max_tokens=120, temperature=1.0, seed=seed, grammar=grammar)
        choice = out["choices"][0]
        text = choice["text"]
        assert grammar_accepts(llm, GBNF, text, partial=True), text  # never leaves the grammar
        if choice["finish_reason"] != "stop":
            continue  # cut off by max_tokens inside a string: the loop reports "length"
        finished += 1
        reply = parse_reply("<tool_call>" + text)
        assert reply.problems == [], (text, reply.problems)
        [call] = reply.tool_calls
        validated = REGISTRY.validate(call.name, call.arguments)
        assert isinstance(validated, BaseModel), (text, validated)
    assert finished >= 1, "no generation finished within max_tokens"


def test_qwen3_closing_tag_as_its_single_special_token_ends_the_call(tiny_qwen3: Path) -> None:
    model = Llama(str(tiny_qwen3), n_ctx=512, verbose=False, n_threads=2)
    try:
        close_ids = model.tokenize(CALL_CLOSE.encode(), add_bos=False, special=True)
        assert len(close_ids) == 1  # the production format: </tool_call> is one control token
        text = after_tag("create_event", {"title": "치과", "start": "2026-12-01T15:00"})
        assert model.tokenize(text.encode(), add_bos=False, special=True)[-1] == close_ids[0]
        assert grammar_accepts(model, GBNF, text)
        assert not grammar_accepts(model, GBNF, after_tag("create_event", {"title": "치과"}))
    finally:
        model.close()


def test_the_calendar_domains_real_tools_give_a_grammar_llama_cpp_parses(llm: Llama, tmp_path: Path) -> None:
    from tools.calendar.store import CalendarStore
    from tools.calendar.tools import build_registry

    registry = build_registry(CalendarStore(tmp_path / "calendar.sqlite3"))
    gbnf = tool_call_gbnf(registry.schemas())
    check_grammar(llm, gbnf)
    assert not grammar_accepts(llm, gbnf, after_tag("no_such_tool", {}))
