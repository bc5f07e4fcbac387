"""ScriptedBackend: replays raw outputs for loop tests; running out is an error result."""

from __future__ import annotations

from agent.backends.scripted import ScriptedBackend


def test_replays_outputs_in_order_then_reports_exhaustion() -> None:
    backend = ScriptedBackend(["first", "<tool_call>\n{}\n</tool_call>"])
    messages = [{"role": "user", "content": "hi"}]
    assert backend.complete(messages, []).text == "first"
    assert backend.complete(messages, []).text == "<tool_call>\n{}\n</tool_call>"
    done = backend.complete(messages, [])
    assert done.finish_reason == "error" and done.text == ""
    assert "exhausted after 2 outputs" in done.error
    assert len(backend.calls) == 3 and backend.calls[0] == messages


def test_callable_script_sees_the_messages_and_its_failure_is_a_result() -> None:
    backend = ScriptedBackend(lambda messages: f"echo {messages[-1]['content']}")
    assert backend.complete([{"role": "user", "content": "x"}], []).text == "echo x"
    broken = ScriptedBackend(lambda messages: messages[5]["content"])
    result = broken.complete([{"role": "user", "content": "x"}], [])
    assert result.finish_reason == "error" and "IndexError" in result.error


def test_recorded_messages_are_copies() -> None:
    backend = ScriptedBackend(["a"])
    messages = [{"role": "user", "content": "x"}]
    backend.complete(messages, [])
    messages[0]["content"] = "changed"
    assert backend.calls[0][0]["content"] == "x"


def test_identity_says_scripted() -> None:
    assert ScriptedBackend([]).identity()["backend"] == "scripted"
