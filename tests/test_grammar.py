"""The tool-call grammar: built from registry schemas, parsed and enforced by real llama.cpp."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from llama_cpp import Llama
from pydantic import BaseModel, Field

from agent.formats import HERMES, format_tool_call, parse_reply
from agent.formats.gbnf import DEFAULT_MAX_STRING, int_range_gbnf, max_text_bytes
from tests.llama_grammar import check_grammar, compile_grammar, grammar_accepts
from agent.tools import Registry, Tool, ToolResult

CALL_CLOSE = HERMES.call_close
tool_call_gbnf = HERMES.call_gbnf

# ------------------------------------------------------------------ a toy registry


class Kind(str, Enum):
    work = "work"
    personal = "personal"


class CreateEvent(BaseModel):
    title: str = Field(max_length=12)
    start: str = Field(max_length=16, description="ISO 8601 local date-time")
    duration_minutes: int = 60
    all_day: bool = False
    location: str | None = Field(None, max_length=8)
    kind: Kind = Kind.personal
    attendees: list[Annotated[str, Field(max_length=8)]] = Field([], max_length=2)
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


@pytest.mark.parametrize(("lead", "tail", "accepted"), [
    ("\n", "\n", True),  # format_tool_call, the Qwen3 and Hermes templates
    ("", "", False),  # the tool block's one-line example
    ("\n\n", "\n", False),
    (" ", "\n", False),
    ("\n", "", False),
])
def test_the_call_sits_between_its_tags_with_one_newline_each(llm: Llama, lead: str, tail: str, accepted: bool) -> None:
    """One spelling, so the newline and ``{"name": "`` after the tag and ``</tool_call>`` after the
    object are forced text for jump-forward; the parser reads the other spellings as well."""
    text = lead + '{"name": "delete_event", "arguments": {"event_id": 3}}' + tail + CALL_CLOSE
    assert grammar_accepts(llm, GBNF, text) == accepted
    assert parse_reply("<tool_call>" + text).tool_calls


@pytest.mark.parametrize(
    ("why", "text"),
    [
        ("compact separators", '{"name":"delete_event","arguments":{"event_id":3}}</tool_call>'),
        ("a blank after an opening brace", '{ "name": "delete_event", "arguments": {"event_id": 3}}</tool_call>'),
        ("a blank before a closing brace", '{"name": "delete_event", "arguments": {"event_id": 3} }</tool_call>'),
        ("a blank before a colon", '{"name" : "delete_event", "arguments": {"event_id": 3}}</tool_call>'),
        ("no blank after a colon", '{"name": "delete_event", "arguments": {"event_id":3}}</tool_call>'),
        ("a blank before a comma", '{"name": "delete_event" , "arguments": {"event_id": 3}}</tool_call>'),
        ("compact array items", after_tag("create_event", {"title": "x", "start": "y", "attendees": ["a", "b"]})
         .replace('"a", "b"', '"a","b"')),
        ("blanks inside the array's brackets", after_tag("create_event", {"title": "x", "start": "y", "attendees": ["a"]})
         .replace('["a"]', '[ "a" ]')),
        ("indented JSON", "\n" + json.dumps({"name": "delete_event", "arguments": {"event_id": 3}}, indent=1) + "\n</tool_call>"),
    ],
)
def test_only_json_dumps_separators_are_accepted_inside_the_call(llm: Llama, why: str, text: str) -> None:
    """Whitespace inside the call is exactly what ``json.dumps`` (and so the training data) writes:
    one spelling per call, which is what makes most of a call forced text for jump-forward. The
    parser still reads the other spellings from remote models (tests/test_parsing.py)."""
    assert not grammar_accepts(llm, GBNF, text), why
    assert parse_reply("<tool_call>" + text).tool_calls, why  # the same call, spelled loosely, still parses


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
def test_generated_calls_always_finish_as_valid_calls_within_the_grammars_bound(llm: Llama) -> None:
    """Sampled at temperature 1 (whatever the CPU's floats make of it), every generation ends in a
    complete call: the grammar admits nothing longer than ``max_text_bytes``, and a token is at
    least one byte, so that many tokens always suffice."""
    grammar = compile_grammar(GBNF)
    budget = int(max_text_bytes(GBNF))
    assert budget < 500  # the toy schema's limits keep it small (each token can cost a full-vocabulary mask)
    for seed in (0, 1):
        out = llm.create_completion(PROMPT, max_tokens=budget, temperature=1.0, seed=seed, grammar=grammar)
        choice = out["choices"][0]
        text = choice["text"]
        assert choice["finish_reason"] == "stop", text
        reply = parse_reply("<tool_call>" + text)
        assert reply.problems == [], (text, reply.problems)
        [call] = reply.tool_calls
        validated = REGISTRY.validate(call.name, call.arguments)
        assert isinstance(validated, BaseModel), (text, validated)


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


# ------------------------------------------------------------------ the calendar's tight schemas


@pytest.fixture(scope="module")
def calendar_gbnf(calendar_tools: list[dict[str, Any]]) -> str:
    return tool_call_gbnf(calendar_tools)


@pytest.fixture(scope="module")
def qwen(tiny_qwen3: Path) -> Iterator[Llama]:
    model = Llama(str(tiny_qwen3), n_ctx=512, verbose=False, n_threads=2)
    yield model
    model.close()


@pytest.fixture(params=["smollm2", "tiny_qwen3"])
def vocab(request: pytest.FixtureRequest) -> Llama:
    """Both vocabularies: a grammar is enforced on tokens, and the two split text differently."""
    return request.getfixturevalue("llm" if request.param == "smollm2" else "qwen")


def _update(**arguments: Any) -> str:
    return after_tag("update_event", {"event_id": 7, **arguments})


def test_every_repetition_in_the_calendar_grammar_is_bounded(calendar_gbnf: str) -> None:
    bodies = [line.split(" ::= ", 1)[1] for line in calendar_gbnf.splitlines()]
    outside_literals = [re.sub(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]', "", body) for body in bodies]
    assert not [b for b in outside_literals if "*" in b or "+" in b]
    assert max_text_bytes(calendar_gbnf) < 10_000  # so any call closes within that many tokens


def test_max_text_bytes_counts_repetitions_and_sees_unbounded_ones() -> None:
    assert max_text_bytes('root ::= "ab" [0-9]{0,3} ("x" | "yz")?\n') == 7
    assert max_text_bytes('root ::= [^"]{2}\n') == 8  # any character: up to 4 bytes of UTF-8
    assert math.isinf(max_text_bytes('root ::= "a" item*\nitem ::= "b"\n'))
    assert math.isinf(max_text_bytes('root ::= "(" root ")" | "x"\n'))


def test_a_looping_attendee_list_and_a_5000_character_title_are_rejected(vocab: Llama, calendar_gbnf: str) -> None:
    loop = _update(attendees=["Jane", "John"] + ["Mike"] * 40)
    assert not grammar_accepts(vocab, calendar_gbnf, loop, partial=True)  # refused at the 21st name, not at the end
    assert grammar_accepts(vocab, calendar_gbnf, _update(attendees=["Jane", "John"] + ["Mike"] * 18))
    assert not grammar_accepts(vocab, calendar_gbnf, _update(title="회의" * 2500), partial=True)
    assert grammar_accepts(vocab, calendar_gbnf, _update(title="회" * 200))
    assert not grammar_accepts(vocab, calendar_gbnf, _update(title="회" * 201))


@pytest.mark.parametrize(
    ("why", "arguments"),
    [
        ("date-time for a date", {"date": "2023-01-08T12:00:00Z"}),
        ("date-time for a time", {"start_time": "2023-01-08T12:00:00Z"}),
        ("month 13", {"date": "2026-13-01"}),
        ("12-hour time", {"start_time": "3pm"}),
        ("hour 24", {"start_time": "24:00"}),
        ("seconds", {"start_time": "15:00:00"}),
        ("zero length", {"duration_minutes": 0}),
        ("longer than a day", {"duration_minutes": 1441}),
        ("six reminders", {"remind_minutes_before": [5, 10, 15, 30, 60, 120]}),
        ("a reminder beyond a week", {"remind_minutes_before": [10081]}),
        ("a negative reminder", {"remind_minutes_before": [-5]}),
        ("a 51-character name", {"attendees": ["x" * 51]}),
        ("a leading zero", {"duration_minutes": "030"}),
    ],
)
def test_arguments_outside_the_schemas_ranges_are_rejected(vocab: Llama, calendar_gbnf: str, why: str,
                                                           arguments: dict[str, Any]) -> None:
    text = _update(**arguments).replace('"030"', "030")
    assert not grammar_accepts(vocab, calendar_gbnf, text), why


@pytest.mark.parametrize(
    "arguments",
    [
        {"date": "2026-12-31", "start_time": "23:59", "duration_minutes": 1440},
        {"start_time": "00:00", "duration_minutes": 1, "remind_minutes_before": [0, 10080]},
        {"attendees": [], "location": "", "notes": "a\nb \"quoted\"", "remind_minutes_before": []},
        {"title": "치과 예약", "end_time": "09:30", "allow_conflict": True},
    ],
)
def test_arguments_at_the_edges_of_the_ranges_are_accepted(vocab: Llama, calendar_gbnf: str,
                                                           arguments: dict[str, Any]) -> None:
    assert grammar_accepts(vocab, calendar_gbnf, _update(**arguments))


def test_event_ids_are_positive_integers(llm: Llama, calendar_gbnf: str) -> None:
    for good in (1, 9, 10, 4321, 10**15):
        assert grammar_accepts(llm, calendar_gbnf, after_tag("delete_event", {"event_id": good})), good
    for bad in (0, -1, 1.5, "3"):
        assert not grammar_accepts(llm, calendar_gbnf, after_tag("delete_event", {"event_id": bad})), bad


@pytest.mark.parametrize(("low", "high"), [(1, 1440), (0, 10080), (-5, 12), (37, 4521), (0, 0), (-300, -20)])
def test_integer_ranges_admit_exactly_their_numbers(llm: Llama, low: int, high: int) -> None:
    gbnf = f"root ::= {int_range_gbnf(low, high)}\n"
    probes = {low - 1, low, low + 1, high - 1, high, high + 1, (low + high) // 2, 10 * high + 1, 0}
    for number in sorted(probes):
        assert grammar_accepts(llm, gbnf, str(number)) == (low <= number <= high), number
    assert not grammar_accepts(llm, gbnf, "0" + str(abs(high)) if high > 0 else "00")


def test_properties_come_in_the_schemas_order_and_optional_ones_may_be_skipped(llm: Llama, calendar_gbnf: str) -> None:
    slots = {"date": "2026-12-01", "duration_minutes": 60, "working_hours_end": "17:00"}
    assert grammar_accepts(llm, calendar_gbnf, after_tag("find_free_slots", slots))
    reordered = {"duration_minutes": 60, "date": "2026-12-01"}
    assert not grammar_accepts(llm, calendar_gbnf, after_tag("find_free_slots", reordered))
    assert not grammar_accepts(llm, calendar_gbnf, after_tag("find_free_slots", {"date": "2026-12-01"}))  # required


def test_strings_and_lists_without_a_limit_get_the_default_cap(llm: Llama) -> None:
    class Note(BaseModel):
        text: str
        tags: list[int] = []

    gbnf = tool_call_gbnf([{"function": {"name": "note", "parameters": Note.model_json_schema()}}])
    assert grammar_accepts(llm, gbnf, after_tag("note", {"text": "x" * DEFAULT_MAX_STRING}))
    assert not grammar_accepts(llm, gbnf, after_tag("note", {"text": "x" * (DEFAULT_MAX_STRING + 1)}))
    assert math.isfinite(max_text_bytes(gbnf))


def test_a_free_form_object_argument_is_refused_rather_than_left_unbounded() -> None:
    loose = {"type": "object", "properties": {"extra": {"type": "object"}}}
    with pytest.raises(ValueError, match="unbounded"):
        tool_call_gbnf([{"function": {"name": "loose", "parameters": loose}}])


def test_every_call_the_oracle_makes_on_all_scenarios_is_admitted(llm: Llama, calendar_gbnf: str) -> None:
    """The grammar is tight, not wrong: what the reference policy writes (and SFT teaches) passes."""
    from agent.backends.scripted import ScriptedBackend
    from agent.eval.dialogue import run_episode
    from tools.calendar.lab.eval_suite import load_eval_suite

    suite = load_eval_suite()
    scenarios = suite.scenarios()
    assert len(scenarios) >= 480
    calls: set[str] = set()
    for scenario in scenarios:
        environment = suite.make_environment(scenario)
        try:
            trace = run_episode(scenario, ScriptedBackend(suite.policies["oracle"](scenario)), environment)
        finally:
            environment.close()
        for exchange in trace.exchanges:
            for step in exchange.turn.steps:
                calls.update(json.dumps([c.name, c.arguments], ensure_ascii=False) for c in step.calls)
    assert len(calls) > 300
    refused = [c for c in sorted(calls) if not grammar_accepts(llm, calendar_gbnf, after_tag(*json.loads(c)))]
    assert refused == []


def _create(**arguments: Any) -> str:
    return after_tag("create_event", {"title": "요가", "date": "2026-12-01", "start_time": "19:00",
                                      "duration_minutes": 60, **arguments})


@pytest.mark.parametrize(
    ("why", "text", "accepted"),
    [
        ("a weekly series", _create(repeat={"freq": "weekly", "by_weekday": ["TU"], "count": 52}), True),
        ("every weekday, until a day", _create(repeat={"freq": "weekly", "interval": 2,
                                                        "by_weekday": ["MO", "TU", "WE", "TH", "FR", "SA", "SU"],
                                                        "until": "2027-06-30"}), True),
        ("an hourly series", _create(repeat={"freq": "hourly"}), False),
        ("a weekday name", _create(repeat={"freq": "weekly", "by_weekday": ["Tuesday"]}), False),
        ("eight weekdays", _create(repeat={"freq": "weekly", "by_weekday": ["MO"] * 8}), False),
        ("501 occurrences", _create(repeat={"freq": "daily", "count": 501}), False),
        ("an interval of 31", _create(repeat={"freq": "daily", "interval": 31}), False),
        ("an unknown repeat field", _create(repeat={"freq": "daily", "forever": True}), False),
        ("an all-day event", after_tag("create_event", {"title": "휴가", "date": "2026-12-04", "all_day": True,
                                                         "end_date": "2026-12-07"}), True),
        ("scope all", after_tag("delete_event", {"event_id": 3, "scope": "all"}), True),
        ("scope of one occurrence", after_tag("delete_event", {"event_id": 3, "occurrence_date": "2026-12-07",
                                                                "scope": "this"}), True),
        ("an unknown scope", after_tag("delete_event", {"event_id": 3, "scope": "some"}), False),
        ("a date-time occurrence", after_tag("update_event", {"event_id": 3, "occurrence_date": "2026-12-07T10:00",
                                                               "title": "x"}), False),
    ],
)
def test_repeat_and_scope_are_bounded_in_the_grammar(vocab: Llama, calendar_gbnf: str, why: str, text: str,
                                                     accepted: bool) -> None:
    assert grammar_accepts(vocab, calendar_gbnf, text) == accepted, why
