"""OpenAIBackend against llama-cpp-python's own server on loopback, and a flaky stdlib server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.backends.openai import OpenAIBackend
from agent.bench.peer_server import free_port
from agent.bench.peer_server import llama_server as start_llama_server
from agent.formats import parse_reply

TOOLS = [{"type": "function", "function": {
    "name": "create_event", "description": "Create a calendar event.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}}]


@pytest.fixture(scope="module")
def llama_server(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's own server on loopback, with the model's chat template."""
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    with start_llama_server(str(smollm2), n_ctx=2048, n_threads=2, alias="smollm2", log_path=log_path) as base:
        yield base


@pytest.mark.slow
def test_real_server_answers_with_text_and_usage(llama_server: str) -> None:
    backend = OpenAIBackend(llama_server, "smollm2", api_key="unused", timeout=120)
    messages = [{"role": "system", "content": "You are a calendar assistant."},
                {"role": "user", "content": "Say hello in one short sentence."}]
    result = backend.complete(messages, TOOLS, max_tokens=16)
    assert result.finish_reason in ("stop", "length"), result.error
    assert result.text.strip()
    assert result.prompt_tokens > 10 and 0 < result.generated_tokens <= 16
    assert backend.attempts == 1
    assert backend.identity()["model_path"].endswith("#smollm2")


@pytest.mark.slow
@pytest.mark.parametrize("wire_format", ["openai", "text"])
def test_real_server_takes_a_history_with_calls_in_either_wire_format(llama_server: str, wire_format: str) -> None:
    """llama_cpp.server 0.3 refuses an assistant ``content: null`` (HTTP 500): calls go with a string."""
    backend = OpenAIBackend(llama_server, "smollm2", wire_format=wire_format, max_retries=0, timeout=120)
    raw = '<tool_call>\n{"name": "create_event", "arguments": {"title": "Dentist"}}\n</tool_call>'
    messages = [
        {"role": "system", "content": "You are a calendar assistant."},
        {"role": "user", "content": "Add the dentist."},
        {"role": "assistant", "content": raw, "tool_calls": [{"id": "call_0_0", "type": "function", "function": {
            "name": "create_event", "arguments": '{"title": "Dentist"}'}}]},
        {"role": "tool", "tool_call_id": "call_0_0", "name": "create_event", "content": '{"ok": true}'},
    ]
    result = backend.complete(messages, TOOLS, max_tokens=8)
    assert result.error is None and backend.attempts == 1
    assert result.prompt_tokens > 20


def test_unreachable_server_is_an_error_result_after_retries() -> None:
    backend = OpenAIBackend(f"http://127.0.0.1:{free_port()}", "m", max_retries=2, backoff=0.01, timeout=2)
    result = backend.complete([{"role": "user", "content": "hi"}], [])
    assert result.finish_reason == "error"
    assert "gave up after 3 attempts" in result.error and "connection error" in result.error
    assert backend.attempts == 3


class FlakyServer:
    """Answers with the scripted (status, body) list in order, recording each request body."""

    def __init__(self, answers: list[tuple[int, dict]]) -> None:
        self.answers = list(answers)
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(json.loads(self.rfile.read(length)))
                outer.auth.append(self.headers.get("Authorization"))
                status, body = outer.answers.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


TOOL_ANSWER = {
    "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Adding it.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "create_event", "arguments": "{\"title\": \"치과\"}"}}]}}],
    "usage": {"prompt_tokens": 42, "completion_tokens": 9},
}


def test_retries_5xx_then_returns_native_calls_as_hermes_text() -> None:
    # The key is given by the caller (agent.apikey reads it); the text wire format sends the raw text.
    server = FlakyServer([(503, {"error": "busy"}), (502, {"error": "busy"}), (200, TOOL_ANSWER)])
    try:
        backend = OpenAIBackend(server.url, "qwen3-lora", api_key="sk-test", max_retries=3, backoff=0.01,
                                wire_format="text")
        history = [{"role": "user", "content": "치과 추가"},
                   {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>", "tool_calls": [{"x": 1}]}]
        result = backend.complete(history, TOOLS, max_tokens=32)
    finally:
        server.close()
    assert backend.attempts == 3 and len(server.requests) == 3
    assert server.auth == ["Bearer sk-test"] * 3
    sent = server.requests[-1]
    # text format: no tools field, the Hermes tool block in a system message instead
    assert sent["model"] == "qwen3-lora" and "tools" not in sent and sent["max_tokens"] == 32
    assert sent["messages"][0]["role"] == "system" and '"name":"create_event"' in sent["messages"][0]["content"]
    assert sent["messages"][2] == {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>"}
    assert result.finish_reason == "stop" and result.error is None
    assert result.native_tool_calls == [{"id": "c1", "name": "create_event", "arguments": {"title": "치과"},
                                         "arguments_text": "{\"title\": \"치과\"}"}]
    assert result.prompt_tokens == 42 and result.generated_tokens == 9
    parsed = parse_reply(result.text)
    assert parsed.content.strip() == "Adding it."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("create_event", {"title": "치과"})]


def test_4xx_is_an_error_without_retry() -> None:
    server = FlakyServer([(400, {"error": {"message": "bad tools"}}), (200, TOOL_ANSWER)])
    try:
        backend = OpenAIBackend(server.url, "m", max_retries=3, backoff=0.01)
        result = backend.complete([{"role": "user", "content": "hi"}], [])
    finally:
        server.close()
    assert result.finish_reason == "error" and result.error.startswith("HTTP 400") and "bad tools" in result.error
    assert backend.attempts == 1
    assert "tools" not in server.requests[0]  # no tools, no key


def test_retries_run_out_on_persistent_5xx() -> None:
    server = FlakyServer([(500, {"error": "down"})] * 3)
    try:
        result = OpenAIBackend(server.url, "m", max_retries=2, backoff=0.01).complete([{"role": "user", "content": "x"}], [])
    finally:
        server.close()
    assert result.finish_reason == "error" and "gave up after 3 attempts: HTTP 500" in result.error


def test_malformed_answer_is_an_error_result() -> None:
    server = FlakyServer([(200, {"choices": []})])
    try:
        result = OpenAIBackend(server.url, "m").complete([{"role": "user", "content": "x"}], [])
    finally:
        server.close()
    assert result.finish_reason == "error" and "unexpected response shape" in result.error
