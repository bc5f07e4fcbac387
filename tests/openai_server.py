"""A strict OpenAI-compatible chat-completions server on loopback, for tests.

The real APIs cannot be reached from here, so what the backend sends is checked against a
server at least as strict as OpenAI's and DeepSeek's. It answers HTTP 400 (with OpenAI's error
shape) to anything they refuse, and to a few things they might accept but this project must
never send:

- a ``tool`` message that does not answer a call of the assistant message before it, or one
  that answers a call twice ("Messages with role 'tool' must be a response to a preceding
  message with 'tool_calls'");
- an assistant ``tool_calls`` some of whose ids get no ``tool`` answer before the next message;
- a call whose ``arguments`` is not a string holding JSON, whose ``type`` is not ``function``,
  or whose id is empty or used twice in the request;
- unknown keys in the body or in a message (OpenAI: "Additional properties are not allowed"),
  ``name`` on a tool message, content that is not a string (this project sends no parts), an
  assistant message with neither content nor calls;
- (stricter than OpenAI) ``<tool_call>`` text in the content of an assistant message that also
  carries ``tool_calls``: the visible text must not repeat the calls.

Answers come from a script: a function of the request, or a list used in order. Faults are
answers too: any status with headers (401, 403, 429 + ``Retry-After``, 5xx), a delay longer than
the client's timeout, or a 200 whose body is not a chat completion. Everything is bounded: body
size, delays (at most ``MAX_DELAY_S``), the number of requests kept.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from agent.formats import parse_reply

MAX_BODY = 4_000_000
MAX_DELAY_S = 10.0
MAX_KEPT = 2000
BODY_KEYS = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "tools",
             "tool_choice", "parallel_tool_calls", "stop", "seed", "n", "stream", "user", "response_format",
             "frequency_penalty", "presence_penalty", "logprobs", "top_logprobs"}
MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}


@dataclass
class Reply:
    """One scripted answer: a status, a JSON body (or raw bytes), headers, an optional delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(body={"content": content})

    @classmethod
    def calls(cls, calls: list[tuple[str, str]], content: str | None = None) -> Reply:
        """Native tool calls: (name, arguments text) pairs, sent exactly as given."""
        return cls(body={"content": content, "calls": calls})

    @classmethod
    def error(cls, status: int, message: str = "error", headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, body={"error": {"message": message, "type": "server_error"}}, headers=headers or {})

    @classmethod
    def raw(cls, data: bytes, status: int = 200) -> Reply:
        return cls(status=status, body=data)

    @classmethod
    def hang(cls, seconds: float) -> Reply:
        """Answer only after ``seconds`` (longer than the client waits: a timeout)."""
        return cls(body={"content": "too late"}, delay=seconds)


@dataclass
class Request:
    body: dict[str, Any]
    authorization: str | None
    status: int = 0  # what the server answered
    problem: str | None = None  # why it was refused (400), else None
    raw: bytes = b""  # the body exactly as it arrived (what a server's tokenizer would read)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])


Script = Callable[[Request], Reply] | list[Reply]


class StrictOpenAIServer:
    def __init__(self, script: Script, *, api_key: str | None = None, forbid_call_text: bool = True) -> None:
        self._script = script if callable(script) else list(script)
        self.api_key = api_key
        self.forbid_call_text = forbid_call_text
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._ids = 0
        self._stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30  # a stuck client cannot hold a handler thread forever

            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                outer._handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> StrictOpenAIServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> StrictOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests read ------------------------------------------------------------------

    @property
    def rejected(self) -> list[Request]:
        """Requests answered 400: a correct client never gets one."""
        return [r for r in self.requests if r.status == 400]

    def answered(self) -> list[Request]:
        return [r for r in self.requests if r.status == 200]

    # -- serving --------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path.rstrip("/") != "/v1/chat/completions":
            return self._send(handler, 404, {"error": {"message": f"no route {handler.path}"}})
        length = int(handler.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            return self._send(handler, 400, _error(f"body length {length} outside 1..{MAX_BODY}"))
        raw = handler.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(handler, 400, _error("We could not parse the JSON body of your request."))
        request = Request(body=body if isinstance(body, dict) else {}, authorization=handler.headers.get("Authorization"),
                          raw=raw)
        with self._lock:
            if len(self.requests) < MAX_KEPT:
                self.requests.append(request)
        if self.api_key is not None and request.authorization != f"Bearer {self.api_key}":
            request.status = 401
            return self._send(handler, 401, {"error": {"message": "Incorrect API key provided.",
                                                        "type": "invalid_request_error", "code": "invalid_api_key"}})
        problem = check_request(body, forbid_call_text=self.forbid_call_text)
        if problem:
            request.status, request.problem = 400, problem
            return self._send(handler, 400, _error(problem))
        reply = self._next(request)
        request.status = reply.status
        if reply.delay:
            self._stop.wait(min(reply.delay, MAX_DELAY_S))
        if isinstance(reply.body, (bytes, bytearray)):
            return self._send(handler, reply.status, bytes(reply.body), reply.headers)
        if reply.status != 200:
            return self._send(handler, reply.status, reply.body or {}, reply.headers)
        return self._send(handler, 200, self._completion(body, reply.body or {}), reply.headers)

    def _next(self, request: Request) -> Reply:
        if callable(self._script):
            return self._script(request)
        with self._lock:
            if not self._script:
                return Reply.error(500, "the test script ran out of answers")
            return self._script.pop(0)

    def _completion(self, body: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
        finish = "stop"
        if spec.get("calls"):
            with self._lock:
                start, self._ids = self._ids, self._ids + len(spec["calls"])
            message["tool_calls"] = [
                {"id": f"call_srv{start + i}", "type": "function", "function": {"name": name, "arguments": arguments}}
                for i, (name, arguments) in enumerate(spec["calls"])]
            finish = "tool_calls"
        elif message["content"] is None:
            message["content"] = ""
        prompt = len(json.dumps(body.get("messages"), ensure_ascii=False)) // 4
        completion = len(json.dumps(message, ensure_ascii=False)) // 4
        return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model"), "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def check_request(body: Any, *, forbid_call_text: bool = True) -> str | None:
    """Why OpenAI (or this project's stricter rule) would refuse the body; None if it is fine."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    unknown = set(body) - BODY_KEYS
    if unknown:
        return f"Unrecognized request argument supplied: {', '.join(sorted(unknown))}"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    if "max_tokens" in body and (not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1):
        return "max_tokens must be a positive integer"
    problem = _check_tools(body.get("tools"), body.get("tool_choice"))
    if problem:
        return problem
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    pending: set[str] = set()
    seen_ids: set[str] = set()
    for index, m in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(m, dict) or m.get("role") not in MESSAGE_KEYS:
            return f"{where}: role must be one of system, user, assistant, tool"
        role = m["role"]
        extra = set(m) - MESSAGE_KEYS[role]
        if extra:
            return f"Additional properties are not allowed ({', '.join(sorted(extra))} was unexpected) - '{where}'"
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                return (f"Invalid parameter: {where}: messages with role 'tool' must be a response to a "
                        f"preceding message with 'tool_calls' (tool_call_id {call_id!r})")
            pending.discard(call_id)
            if not isinstance(m.get("content"), str):
                return f"{where}.content must be a string"
            continue
        if pending:
            return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {sorted(pending)}")
        content = m.get("content")
        if role != "assistant":
            if not isinstance(content, str):
                return f"{where}.content must be a string"
            continue
        calls = m.get("tool_calls")
        if content is not None and not isinstance(content, str):
            return f"{where}.content must be a string or null"
        if calls is None:
            if content is None:
                return f"{where}: an assistant message needs content or tool_calls"
            continue
        if not isinstance(calls, list) or not calls:
            return f"{where}.tool_calls must be a non-empty array"
        if forbid_call_text and isinstance(content, str) and "<tool_call>" in content:
            return f"{where}: content repeats the calls as <tool_call> text (this project's rule)"
        for number, call in enumerate(calls):
            problem = _check_call(call, f"{where}.tool_calls[{number}]", seen_ids)
            if problem:
                return problem
            pending.add(call["id"])
    if pending:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {sorted(pending)}")
    return None


def _check_call(call: Any, where: str, seen_ids: set[str]) -> str | None:
    if not isinstance(call, dict) or set(call) - {"id", "type", "function"}:
        return f"{where}: a call has exactly id, type and function"
    if not isinstance(call.get("id"), str) or not call["id"]:
        return f"{where}.id must be a non-empty string"
    if call["id"] in seen_ids:
        return f"{where}.id {call['id']!r} is used twice in the request"
    seen_ids.add(call["id"])
    if call.get("type") != "function":
        return f"{where}.type must be 'function'"
    fn = call.get("function")
    if not isinstance(fn, dict) or set(fn) - {"name", "arguments"} or not isinstance(fn.get("name"), str) or not fn["name"]:
        return f"{where}.function must have a name (and arguments)"
    arguments = fn.get("arguments")
    if not isinstance(arguments, str):
        return f"{where}.function.arguments must be a string, got {type(arguments).__name__}"
    try:
        json.loads(arguments)
    except ValueError:
        return f"{where}.function.arguments is not valid JSON"
    return None


def _check_tools(tools: Any, tool_choice: Any) -> str | None:
    if tools is None:
        return "tool_choice is only allowed when tools are specified" if tool_choice is not None else None
    if not isinstance(tools, list) or not tools:
        return "tools must be a non-empty array"
    names = []
    for number, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            return f"tools[{number}] must be {{'type': 'function', 'function': {{...}}}}"
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            return f"tools[{number}].function.name is required"
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            return f"tools[{number}].function.parameters must be an object"
        names.append(fn["name"])
    if len(set(names)) != len(names):
        return "tool names must be unique"
    if tool_choice is not None and tool_choice not in ("auto", "none", "required"):
        if not (isinstance(tool_choice, dict) and (tool_choice.get("function") or {}).get("name") in names):
            return f"tool_choice {tool_choice!r} is not auto, none, required or a listed function"
    return None


# -- scripted behaviour: a text policy played through native calls -------------------------------


def internal_messages(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages read back into the loop's form (calls as text, tool results named by call)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for m in wire:
        if m["role"] == "assistant" and m.get("tool_calls"):
            blocks = []
            for call in m["tool_calls"]:
                names[call["id"]] = call["function"]["name"]
                blocks.append('<tool_call>\n{"name": %s, "arguments": %s}\n</tool_call>'
                              % (json.dumps(call["function"]["name"]), call["function"]["arguments"]))
            out.append({"role": "assistant", "content": "\n".join(([m["content"]] if m.get("content") else []) + blocks)})
        elif m["role"] == "tool":
            out.append({"role": "tool", "name": names.get(m["tool_call_id"], ""), "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m.get("content") or ""})
    return out


def compact(arguments: Any) -> str:
    """Arguments the way DeepSeek writes them (no spaces): differs from the loop's own dump."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def native_reply(text: str) -> Reply:
    """A policy's Hermes text answered as the API would: visible text plus native calls."""
    parsed = parse_reply(text)
    if parsed.tool_calls:
        return Reply.calls([(c.name, compact(c.arguments)) for c in parsed.tool_calls], parsed.content or None)
    return Reply.text(parsed.content)


def policy_script(policy_for: Callable[[list[dict[str, Any]]], Callable[[list[dict[str, Any]]], str] | None]) -> Callable[[Request], Reply]:
    """A server script from text policies: ``policy_for(messages)`` picks one per conversation."""
    def script(request: Request) -> Reply:
        messages = internal_messages(request.messages)
        policy = policy_for(messages)
        if policy is None:
            return Reply.error(500, "the test has no policy for this conversation")
        return native_reply(policy(messages))

    return script
