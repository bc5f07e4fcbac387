"""parse_reply: the Hermes/Qwen3 reply parser, its repairs, and that it never raises."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.formats import ParsedReply, ToolCall, format_tool_call, parse_reply


def call(name: str, arguments: Any) -> str:
    return format_tool_call(name, arguments)


def only_call(reply: ParsedReply) -> ToolCall:
    assert len(reply.tool_calls) == 1, reply
    return reply.tool_calls[0]


def has_problem(reply: ParsedReply, words: str) -> bool:
    return any(words in p for p in reply.problems)


# ---------------------------------------------------------------- clean replies


def test_plain_text_is_content_without_calls_or_problems() -> None:
    reply = parse_reply("  내일 오후 3시에 치과 예약이 있어요.  \n")
    assert reply == ParsedReply(content="내일 오후 3시에 치과 예약이 있어요.")


def test_canonical_call_parses_with_name_arguments_and_raw() -> None:
    text = call("create_event", {"title": "치과", "start": "2026-12-01T15:00"})
    reply = parse_reply(text)
    c = only_call(reply)
    assert c.name == "create_event"
    assert c.arguments == {"title": "치과", "start": "2026-12-01T15:00"}
    assert c.raw == '\n{"name": "create_event", "arguments": {"title": "치과", "start": "2026-12-01T15:00"}}\n'
    assert reply.content == "" and reply.problems == []


def test_format_tool_call_writes_canonical_hermes_text_with_unescaped_korean() -> None:
    assert format_tool_call("delete_event", {"id": 3, "title": "회의"}) == (
        '<tool_call>\n{"name": "delete_event", "arguments": {"id": 3, "title": "회의"}}\n</tool_call>'
    )


def test_several_calls_keep_their_order_and_text_between_them_is_content() -> None:
    text = f"먼저 확인할게요.\n{call('list_events', {'day': 'today'})}\n그리고\n{call('delete_event', {'id': 7})}"
    reply = parse_reply(text)
    assert [c.name for c in reply.tool_calls] == ["list_events", "delete_event"]
    assert [c.arguments for c in reply.tool_calls] == [{"day": "today"}, {"id": 7}]
    assert reply.content == "먼저 확인할게요.\n\n그리고"
    assert reply.problems == []


def test_call_without_newlines_inside_tags_parses() -> None:
    c = only_call(parse_reply('<tool_call>{"name":"a","arguments":{"x":[1,2]}}</tool_call>'))
    assert (c.name, c.arguments) == ("a", {"x": [1, 2]})


@pytest.mark.parametrize("body", [
    '{ "name" : "a" , "arguments" : { "x" : [ 1 , 2 ] } }',
    '{\n  "name": "a",\n  "arguments": {\n    "x": [\n      1,\n      2\n    ]\n  }\n}',
    '{"name":"a",\t"arguments":{"x":[1,2]}}',
])
def test_calls_in_any_json_spacing_parse_without_problems(body: str) -> None:
    """The call grammar admits only ``json.dumps`` spacing, but it binds the llama backend alone:
    a remote model's call in any valid JSON spacing is the same call."""
    reply = parse_reply(f"<tool_call>\n{body}\n</tool_call>")
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("a", {"x": [1, 2]})]
    assert reply.problems == []


# ---------------------------------------------------------------- reasoning


def test_think_block_is_reasoning_not_content() -> None:
    reply = parse_reply("<think>\n사용자가 일정을 원한다.\n</think>\n\n알겠습니다.")
    assert reply.reasoning == "사용자가 일정을 원한다."
    assert reply.content == "알겠습니다."


def test_unclosed_think_makes_everything_after_it_reasoning() -> None:
    reply = parse_reply("Sure. <think>let me think about " + call("a", {}))
    assert reply.content == "Sure."
    assert reply.reasoning.startswith("let me think about <tool_call>")
    assert reply.tool_calls == []


def test_reasoning_that_only_closes_is_the_text_before_the_closing_tag() -> None:
    reply = parse_reply("The user wants a meeting.\n</think>\n\n" + call("create_event", {"title": "m"}))
    assert reply.reasoning == "The user wants a meeting."
    assert reply.content == ""
    assert only_call(reply).name == "create_event"


def test_empty_think_block_gives_empty_reasoning() -> None:
    reply = parse_reply("<think>\n\n</think>\n\n안녕하세요")
    assert reply.reasoning == "" and reply.content == "안녕하세요"


def test_stray_second_closing_think_tag_is_not_shown() -> None:
    reply = parse_reply("<think>a</think>보이는 글</think> 끝")
    assert reply.reasoning == "a" and reply.content == "보이는 글 끝"


def test_tool_call_inside_reasoning_is_not_a_call() -> None:
    reply = parse_reply("<think>I could write " + call("delete_event", {"id": 1}) + " but no.</think>Done.")
    assert reply.tool_calls == []
    assert "delete_event" in reply.reasoning
    assert reply.content == "Done."


def test_tool_call_in_reasoning_that_only_closes_is_not_a_call() -> None:
    reply = parse_reply(call("delete_event", {"id": 1}) + "</think>No call.")
    assert reply.tool_calls == [] and reply.content == "No call."


# ---------------------------------------------------------------- text that only quotes calls


def test_tool_call_inside_code_fence_is_not_a_call() -> None:
    fenced = "Example:\n```json\n" + call("delete_event", {"id": 1}) + "\n```\nThat's the format."
    reply = parse_reply(fenced)
    assert reply.tool_calls == []
    assert "```json" in reply.content and "That's the format." in reply.content


def test_unclosed_code_fence_hides_calls_until_the_end() -> None:
    reply = parse_reply("```\n" + call("delete_event", {"id": 1}))
    assert reply.tool_calls == []


def test_tool_call_inside_inline_code_is_not_a_call_but_one_after_it_is() -> None:
    reply = parse_reply("Use the `<tool_call>` tag like this:\n" + call("a", {}))
    assert only_call(reply).name == "a"
    assert reply.content == "Use the `<tool_call>` tag like this:"


def test_stray_backtick_does_not_hide_a_later_call() -> None:
    reply = parse_reply("don`t worry\n" + call("a", {"x": 1}))
    assert only_call(reply).arguments == {"x": 1}


def test_tool_call_inside_quoted_tool_response_is_not_a_call() -> None:
    quoted = '<tool_response>{"ok": true, "echo": "' + "<tool_call>{}</tool_call>" + '"}</tool_response> 완료!'
    reply = parse_reply(quoted)
    assert reply.tool_calls == [] and reply.problems == []
    assert reply.content.endswith("완료!")


# ---------------------------------------------------------------- repairs, each reported


def test_arguments_given_as_json_string_are_decoded_and_reported() -> None:
    text = '<tool_call>{"name": "a", "arguments": "{\\"title\\": \\"점심\\"}"}</tool_call>'
    reply = parse_reply(text)
    assert only_call(reply).arguments == {"title": "점심"}
    assert has_problem(reply, "arguments given as a JSON string")


def test_parameters_key_is_accepted_and_reported() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "parameters": {"x": 1}}</tool_call>')
    assert only_call(reply).arguments == {"x": 1}
    assert has_problem(reply, "used 'parameters' instead of 'arguments'")


def test_single_quotes_are_repaired_without_touching_apostrophes_inside_strings() -> None:
    text = "<tool_call>{'name': 'a', 'arguments': {'t': \"it's\", 'q': 'say \"hi\"', 'k': '회의'}}</tool_call>"
    reply = parse_reply(text)
    assert only_call(reply).arguments == {"t": "it's", "q": 'say "hi"', "k": "회의"}
    assert has_problem(reply, "single quotes repaired")


def test_trailing_commas_are_removed_and_reported() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": {"x": [1, 2,], "y": 3,},}</tool_call>')
    assert only_call(reply).arguments == {"x": [1, 2], "y": 3}
    assert has_problem(reply, "trailing comma removed")


def test_python_literals_are_converted_but_not_inside_strings() -> None:
    text = '<tool_call>{"name": "a", "arguments": {"all_day": True, "note": None, "t": "True story", "f": False}}</tool_call>'
    reply = parse_reply(text)
    assert only_call(reply).arguments == {"all_day": True, "note": None, "t": "True story", "f": False}
    assert has_problem(reply, "Python literals True/False/None converted")


def test_missing_closing_tag_at_end_of_reply_is_accepted_and_reported() -> None:
    reply = parse_reply('알겠어요.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n')
    assert only_call(reply).arguments == {"x": 1}
    assert reply.content == "알겠어요."
    assert has_problem(reply, "missing </tool_call> at end of reply")


def test_missing_closing_tag_before_next_call_splits_the_calls() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": {}}\n' + call("b", {}))
    assert [c.name for c in reply.tool_calls] == ["a", "b"]
    assert has_problem(reply, "tool call 1: missing </tool_call>")


def test_missing_arguments_become_empty_object_with_problem() -> None:
    reply = parse_reply('<tool_call>{"name": "list_events"}</tool_call>')
    assert only_call(reply).arguments == {}
    assert has_problem(reply, "missing 'arguments'")


def test_arguments_written_next_to_name_are_gathered_with_problem() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "title": "요가", "day": 2}</tool_call>')
    assert only_call(reply).arguments == {"title": "요가", "day": 2}
    assert has_problem(reply, "instead of inside 'arguments'")


def test_extra_text_after_the_json_object_is_ignored_and_reported() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": {"x": 1}} I hope this helps!</tool_call>')
    assert only_call(reply).arguments == {"x": 1}
    assert has_problem(reply, "extra text after the JSON object")


def test_missing_final_brace_is_added_and_reported() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": {"x": 1}</tool_call>')
    assert only_call(reply).arguments == {"x": 1}
    assert has_problem(reply, "missing closing brackets added")


def test_json_code_fence_inside_the_block_is_unwrapped() -> None:
    reply = parse_reply('<tool_call>\n```json\n{"name": "a", "arguments": {}}\n```\n</tool_call>')
    assert only_call(reply).name == "a"
    assert has_problem(reply, "code fence")


def test_openai_style_function_wrapper_is_unwrapped() -> None:
    reply = parse_reply('<tool_call>{"function": {"name": "a", "arguments": "{}"}}</tool_call>')
    c = only_call(reply)
    assert (c.name, c.arguments) == ("a", {})


def test_list_of_calls_in_one_block_gives_each_call() -> None:
    reply = parse_reply('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"y": 2}}]</tool_call>')
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("a", {}), ("b", {"y": 2})]


def test_several_repairs_in_one_call_are_all_reported() -> None:
    reply = parse_reply("<tool_call>{'name': 'a', 'arguments': {'ok': True,}}")
    assert only_call(reply).arguments == {"ok": True}
    for words in ("single quotes", "Python literals", "trailing comma", "missing </tool_call>"):
        assert has_problem(reply, words), words


def test_clean_call_reports_no_problems() -> None:
    assert parse_reply(call("a", {"x": [1, "둘", None, True]})).problems == []


# ---------------------------------------------------------------- unreadable blocks


@pytest.mark.parametrize(
    "body",
    ["not json at all", "", '{"arguments": {"x": 1}}', '"just a string"', "{'name': 'a', 'arguments': {'x': \"unterminated"],
)
def test_unreadable_block_gives_no_call_and_a_problem_naming_the_block(body: str) -> None:
    reply = parse_reply(f"확인 중... <tool_call>{body}</tool_call> " + call("ok", {}))
    assert [c.name for c in reply.tool_calls] == ["ok"]
    assert any(p.startswith("tool call 1:") and "could not be read" in p for p in reply.problems), reply.problems
    assert reply.content == "확인 중..."


def test_arguments_that_are_not_an_object_are_kept_for_the_loop_to_reject() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>')
    assert only_call(reply).arguments == [1, 2]


def test_arguments_string_that_is_not_json_is_kept_and_reported() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": "tomorrow at 3"}</tool_call>')
    assert only_call(reply).arguments == "tomorrow at 3"
    assert has_problem(reply, "not a JSON object")


def test_stray_closing_tag_is_dropped_from_content_and_reported() -> None:
    reply = parse_reply("Done.</tool_call>")
    assert reply.content == "Done." and has_problem(reply, "stray </tool_call>")


def test_deeply_nested_arguments_do_not_raise() -> None:
    reply = parse_reply('<tool_call>{"name": "a", "arguments": ' + "[" * 100_000 + "</tool_call>")
    assert isinstance(reply, ParsedReply)


# ---------------------------------------------------------------- properties


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
tool_names = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(name=tool_names, arguments=st.dictionaries(st.text(max_size=10), json_values, max_size=4))
def test_canonical_calls_round_trip_exactly(name: str, arguments: dict[str, Any]) -> None:
    reply = parse_reply(format_tool_call(name, arguments))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [(name, arguments)]
    assert reply.problems == [] and reply.content == ""


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    reply = parse_reply(text)
    assert isinstance(reply, ParsedReply)
    assert all(isinstance(c, ToolCall) and isinstance(c.name, str) for c in reply.tool_calls)
    assert all(isinstance(p, str) for p in reply.problems)


structured_pieces = st.sampled_from(
    [
        "<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>",
        "```", "`", "{", "}", "[", "]", '"', "'", ",", ":", "\\", "\n", " ", "name", "arguments",
        "parameters", '"name"', '"arguments"', "True", "None", "false", "1", "-", "일정", "\x00",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(structured_pieces | st.text(max_size=5), max_size=40).map("".join))
def test_never_raises_on_text_made_of_tags_braces_and_quotes(text: str) -> None:
    reply = parse_reply(text)
    assert isinstance(reply, ParsedReply)
    for c in reply.tool_calls:
        assert isinstance(c.name, str) and c.name.strip() == c.name and c.name
        json.dumps(c.arguments)  # whatever was read is plain JSON data


@settings(max_examples=100, deadline=None)
@given(
    before=st.text(alphabet=st.characters(blacklist_characters="<`"), max_size=30),
    name=tool_names,
    arguments=st.dictionaries(st.text(max_size=6), json_scalars, max_size=3),
)
def test_call_survives_arbitrary_visible_text_before_it(before: str, name: str, arguments: dict[str, Any]) -> None:
    reply = parse_reply(before + format_tool_call(name, arguments))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [(name, arguments)]
    assert reply.content == before.strip()


def test_tags_quoted_inside_a_well_formed_calls_strings_are_data() -> None:
    arguments = {"note": "write </tool_call> or </think> or ``` here", "title": "<tool_call>"}
    reply = parse_reply(call("create_event", arguments))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("create_event", arguments)]
    assert reply.reasoning == "" and reply.content == "" and reply.problems == []

    after_reasoning = parse_reply("생각 중</think>\n" + call("create_event", arguments))
    assert after_reasoning.reasoning == "생각 중"
    assert [c.arguments for c in after_reasoning.tool_calls] == [arguments]
