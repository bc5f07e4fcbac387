"""The OpenAI backend's wire format and remote faults, against the strict local server."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from agent.approval import ApproveAll
from agent.backends.openai import NOT_ANSWERED, OpenAIBackend, completion_from, wire_messages
from agent.loop import Agent
from agent.formats import format_tool_call
from agent.records import CallStatus, StopReason
from tests.openai_server import Reply, StrictOpenAIServer, check_request
from tools.calendar import CalendarStore, build_registry

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=SEOUL)
KEY = "sk-test-0123456789abcdef"
TOOLS = [{"type": "function", "function": {
    "name": "create_event", "description": "Create a calendar event.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}}]
CREATE_ARGS = {"title": "치과", "date": "2026-12-02", "start_time": "15:00", "duration_minutes": 60}


def backend_for(server: StrictOpenAIServer, **kwargs) -> OpenAIBackend:
    kwargs.setdefault("backoff", 0.0)
    return OpenAIBackend(server.url, "deepseek-chat", KEY, **kwargs)


def stored_turn() -> list[dict]:
    """A history as the loop stores it: raw text with two calls, their results, then more."""
    raw = "Let me check.\n" + format_tool_call("search_events", {"date": "2026-12-01"}) + "\n" + \
        format_tool_call("find_free_slots", {"date": "2026-12-01", "duration_minutes": 30})
    return [
        {"role": "system", "content": "You manage a calendar."},
        {"role": "user", "content": "[09:00] what is free tomorrow?"},
        {"role": "assistant", "content": raw, "tool_calls": [
            {"id": "call_0_0", "type": "function", "function": {"name": "search_events", "arguments": '{"date": "2026-12-01"}'}},
            {"id": "call_0_1", "type": "function", "function": {"name": "find_free_slots",
                                                                "arguments": '{"date":"2026-12-01","duration_minutes":30}'}}]},
        {"role": "tool", "tool_call_id": "call_0_0", "name": "search_events", "content": '{"ok": true, "data": {"events": []}}'},
        {"role": "tool", "tool_call_id": "call_0_1", "name": "find_free_slots", "content": '{"ok": true, "data": {"slots": []}}'},
        {"role": "assistant", "content": "You are free all day."},
        {"role": "user", "content": "[09:01] thanks"},
    ]


def test_calls_go_out_structured_with_only_visible_text_in_content() -> None:
    wire = wire_messages(stored_turn(), TOOLS)
    assert wire[2] == {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "call_0_0", "type": "function", "function": {"name": "search_events", "arguments": '{"date": "2026-12-01"}'}},
        {"id": "call_0_1", "type": "function", "function": {"name": "find_free_slots",
                                                            "arguments": '{"date":"2026-12-01","duration_minutes":30}'}}]}
    assert wire[3] == {"role": "tool", "tool_call_id": "call_0_0", "content": '{"ok": true, "data": {"events": []}}'}
    assert [m.get("tool_call_id") for m in wire[3:5]] == ["call_0_0", "call_0_1"]
    assert check_request({"model": "m", "messages": wire, "tools": TOOLS}) is None


def test_the_strict_server_refuses_what_the_old_text_form_sent() -> None:
    """Calls as text plus tool messages answering them: what OpenAI and DeepSeek answer with 400."""
    old = [{"role": m["role"], "content": m["content"], **({"tool_call_id": m["tool_call_id"]} if "tool_call_id" in m else {})}
           for m in stored_turn()]
    problem = check_request({"model": "m", "messages": old})
    assert problem and "must be a response to a preceding message with 'tool_calls'" in problem
    with StrictOpenAIServer([Reply.text("unreached")]) as server:
        sent = backend_for(server, wire_format="openai")._client.post("/chat/completions", json={"model": "m", "messages": old})
    assert sent.status_code == 400 and len(server.rejected) == 1


@pytest.mark.parametrize("broken, rule", [
    (lambda w: w[2]["tool_calls"][0]["function"].update(arguments={"date": "x"}), "must be a string"),
    (lambda w: w[2]["tool_calls"][0]["function"].update(arguments="{not json"), "not valid JSON"),
    (lambda w: w.pop(4), "did not have response messages"),
    (lambda w: w[2].update(content=w[2]["content"] + "\n<tool_call>{}</tool_call>"), "<tool_call> text"),
    (lambda w: w[3].update(name="search_events"), "Additional properties"),
    (lambda w: w[2]["tool_calls"][1].update(id="call_0_0"), "used twice"),
])
def test_the_strict_server_refuses_each_rule_broken(broken, rule: str) -> None:
    wire = wire_messages(stored_turn(), TOOLS)
    broken(wire)
    problem = check_request({"model": "m", "messages": wire})
    assert problem and rule in problem


def test_an_unreadable_call_goes_out_as_a_user_correction() -> None:
    history = [{"role": "user", "content": "add it"},
               {"role": "assistant", "content": 'Adding.\n<tool_call>\n{"name": "create_event", "arguments": {bad}\n</tool_call>'},
               {"role": "tool", "tool_call_id": "call_unreadable", "name": "invalid_call", "content": '{"ok": false, "error": "invalid_call"}'}]
    wire = wire_messages(history)
    assert wire[1] == {"role": "assistant", "content": history[1]["content"]}  # no tool_calls: the text as written
    assert wire[2] == {"role": "user", "content": '{"ok": false, "error": "invalid_call"}'}
    assert check_request({"model": "m", "messages": wire}) is None


def test_a_call_without_a_stored_answer_gets_one_and_repeated_ids_are_renamed() -> None:
    first = stored_turn()
    interrupted = {"role": "assistant", "content": format_tool_call("search_events", {"date": "2026-12-03"}), "tool_calls": [
        {"id": "call_0_0", "type": "function", "function": {"name": "search_events", "arguments": '{"date": "2026-12-03"}'}}]}
    wire = wire_messages([*first, interrupted, {"role": "user", "content": "[09:05] hello?"}])
    assert wire[7]["tool_calls"][0]["id"] == "call_0_0_2" and wire[7]["content"] == ""  # a string, never null
    assert wire[8] == {"role": "tool", "tool_call_id": "call_0_0_2", "content": NOT_ANSWERED}
    assert check_request({"model": "m", "messages": wire}) is None


def test_reasoning_is_not_sent_back() -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>plan</think>Hello."}]
    assert wire_messages(history)[1] == {"role": "assistant", "content": "Hello."}


def test_a_multi_step_turn_keeps_every_byte_it_sent_and_the_servers_arguments(store: CalendarStore) -> None:
    """Call → result → answer with native calls; each request extends the previous one byte for byte."""
    server_args = json.dumps(CREATE_ARGS, ensure_ascii=False, separators=(",", ":"))  # not the loop's own dump
    script = [Reply.calls([("create_event", server_args)], "Adding it."), Reply.text("Added 치과 at 15:00.")]
    with StrictOpenAIServer(script, api_key=KEY) as server:
        agent = Agent(backend_for(server), build_registry(store, now=lambda: NOW))
        messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": "[09:00] 치과 내일 3시"}]
        turn = agent.run_turn(messages, ApproveAll())
        # a second user turn on the same history
        messages.append({"role": "user", "content": "[09:01] thanks"})
        server._script.append(Reply.text("You're welcome."))
        agent.run_turn(messages, ApproveAll())
    assert server.rejected == [] and len(server.requests) == 3
    assert turn.stop_reason is StopReason.FINAL_REPLY and turn.reply == "Added 치과 at 15:00."
    assert [c.status for c in turn.calls] == [CallStatus.OK]
    day = datetime(2026, 12, 2, tzinfo=SEOUL)
    assert [e.title for e in store.events_between(day, day.replace(day=3))] == ["치과"]
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == server_args  # stored as the server wrote it
    bodies = [json.dumps(r.messages, ensure_ascii=False) for r in server.requests]
    for earlier, later in zip(bodies, bodies[1:]):
        assert later.startswith(earlier[:-1])  # the previous messages, unchanged, then more
    assistant = server.requests[1].messages[2]
    assert assistant["content"] == "Adding it." and assistant["tool_calls"][0]["function"]["arguments"] == server_args
    assert server.requests[0].body["tools"] and all(r.authorization == f"Bearer {KEY}" for r in server.requests)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_one_line_and_not_retried(status: int) -> None:
    with StrictOpenAIServer([Reply.error(status, "Authentication Fails")] * 3) as server:
        backend = backend_for(server, max_retries=3)
        result = backend.complete([{"role": "user", "content": "hi"}], [])
    assert result.finish_reason == "error" and "the API key was refused" in result.error
    assert f"HTTP {status}" in result.error and "\n" not in result.error and KEY not in result.error
    assert backend.attempts == 1


def test_a_wrong_key_is_refused_by_the_server_itself() -> None:
    with StrictOpenAIServer([Reply.text("hi")], api_key=KEY) as server:
        result = OpenAIBackend(server.url, "m", "sk-wrong", backoff=0).complete([{"role": "user", "content": "hi"}], [])
        unset = OpenAIBackend(server.url, "m", None, backoff=0).complete([{"role": "user", "content": "hi"}], [])
    assert "the API key was refused (HTTP 401" in result.error
    assert "no key is set" in unset.error


def test_429_waits_what_retry_after_asks_then_retries() -> None:
    script = [Reply.error(429, "slow down", {"Retry-After": "2"}), Reply.error(429, "slow down"), Reply.text("hello")]
    slept: list[float] = []
    with StrictOpenAIServer(script) as server:
        backend = backend_for(server, backoff=0.25, sleep=slept.append)
        result = backend.complete([{"role": "user", "content": "hi"}], [])
    assert result.error is None and result.text == "hello"
    assert slept == [2.0, 0.5]  # Retry-After, then the backoff for the second retry
    assert backend.attempts == 3


def test_429_asking_for_more_than_the_bound_gives_up_at_once() -> None:
    slept: list[float] = []
    with StrictOpenAIServer([Reply.error(429, "quota", {"Retry-After": "3600"})]) as server:
        backend = backend_for(server, max_retry_wait=30, sleep=slept.append)
        result = backend.complete([{"role": "user", "content": "hi"}], [])
    assert result.finish_reason == "error" and "asks to wait 3600 s" in result.error
    assert slept == [] and backend.attempts == 1


def test_5xx_and_timeouts_are_retried_then_the_turn_says_so_and_keeps_the_history(store: CalendarStore) -> None:
    script = [Reply.error(503, "overloaded"), Reply.hang(5), Reply.error(500, "boom")]
    with StrictOpenAIServer(script) as server:
        agent = Agent(backend_for(server, max_retries=2, timeout=0.5), build_registry(store, now=lambda: NOW))
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "[09:00] hi"}]
        turn = agent.run_turn(messages, ApproveAll())
    assert turn.stop_reason is StopReason.MODEL_ERROR
    assert "gave up after 3 attempts" in turn.error and "HTTP 500" in turn.error
    assert messages == [{"role": "system", "content": "s"}, {"role": "user", "content": "[09:00] hi"}]
    assert [r.status for r in server.requests] == [503, 200, 500]  # the hung one answered after the client left


def test_an_unknown_answer_shape_is_a_model_error_with_the_body_in_the_log(store, caplog) -> None:
    odd = {"result": {"text": "I am not a chat completion " + "x" * 400}}
    with StrictOpenAIServer([Reply.raw(json.dumps(odd).encode())]) as server:
        agent = Agent(backend_for(server), build_registry(store, now=lambda: NOW))
        with caplog.at_level(logging.WARNING, logger="agent.backends.openai"):
            turn = agent.run_turn([{"role": "user", "content": "hi"}], ApproveAll())
    assert turn.stop_reason is StopReason.MODEL_ERROR and "unexpected response shape" in turn.error
    logged = [r.getMessage() for r in caplog.records if r.name == "agent.backends.openai"]
    assert len(logged) == 1 and '{"result": {"text": "I am not a chat completion' in logged[0]
    assert json.dumps(odd)[:300] in logged[0] and json.dumps(odd)[:301] not in logged[0]


def test_the_text_wire_format_sends_what_the_runtime_renders_for_a_tool_less_template() -> None:
    with StrictOpenAIServer([Reply.text("ok")]) as server:
        backend_for(server, wire_format="text").complete(stored_turn(), TOOLS)
    body = server.requests[0].body
    assert "tools" not in body and server.rejected == []
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user", "user", "assistant", "user"]
    assert body["messages"][2]["content"] == stored_turn()[2]["content"]  # the exact raw text, calls included
    assert body["messages"][3]["content"].startswith("<tool_response>\n")
    assert "<tools>" in body["messages"][0]["content"]


def test_cached_prompt_tokens_are_read_from_each_servers_field() -> None:
    base = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}
    openai = completion_from({**base, "usage": {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}}})
    deepseek = completion_from({**base, "usage": {"prompt_tokens": 100, "prompt_cache_hit_tokens": 90, "prompt_cache_miss_tokens": 10}})
    llama = completion_from({**base, "usage": {"prompt_tokens": 100}, "timings": {"prompt_n": 12, "cache_n": 88, "prompt_ms": 5.5}})
    assert (openai.reused_tokens, openai.evaluated_tokens) == (64, 36)
    assert (deepseek.reused_tokens, deepseek.evaluated_tokens) == (90, 10)
    assert (llama.reused_tokens, llama.evaluated_tokens, llama.timings["prompt_ms"]) == (88, 12, 5.5)


def test_a_repaired_native_call_is_stored_as_valid_json_so_later_turns_are_not_refused(store: CalendarStore) -> None:
    """The server's arguments are broken JSON the parser mends: what is stored and resent is valid."""
    broken = '{"date": "2026-12-02"'  # truncated: not valid JSON, but readable
    script = [Reply.calls([("search_events", broken)]), Reply.text("Nothing that day."), Reply.text("Bye.")]
    with StrictOpenAIServer(script, api_key=KEY) as server:
        agent = Agent(backend_for(server), build_registry(store, now=lambda: NOW))
        messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": "[09:00] 모레 일정?"}]
        turn = agent.run_turn(messages, ApproveAll())
        messages.append({"role": "user", "content": "[09:01] ok"})
        agent.run_turn(messages, ApproveAll())
    assert [c.status for c in turn.calls] == [CallStatus.OK]
    stored = messages[2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(stored) == {"date": "2026-12-02"}
    assert server.rejected == [] and len(server.requests) == 3


def test_an_undecodable_body_is_an_error_result_not_an_exception() -> None:
    garbled = Reply(status=200, body=b"\x00not gzip at all", headers={"Content-Encoding": "gzip"})
    with StrictOpenAIServer([garbled]) as server:
        result = backend_for(server, max_retries=2).complete([{"role": "user", "content": "hi"}], [])
    assert result.finish_reason == "error" and "DecodingError" in result.error and "\n" not in result.error


def test_a_redirect_names_where_it_points() -> None:
    moved = Reply(status=301, body=b"", headers={"Location": "https://api.example.test/v1/chat/completions"})
    with StrictOpenAIServer([moved]) as server:
        result = backend_for(server, max_retries=2).complete([{"role": "user", "content": "hi"}], [])
    assert result.finish_reason == "error"
    assert "HTTP 301" in result.error and "https://api.example.test/v1/chat/completions" in result.error
