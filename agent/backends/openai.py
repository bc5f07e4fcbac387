"""OpenAI-compatible HTTP backend (OpenAI, DeepSeek, vLLM, llama-server, llama_cpp.server, ...).

The stored history is one format for every backend (``agent.loop``): an assistant message keeps
the model's exact text in ``content`` (calls included, as ``<tool_call>`` blocks) and the parsed
calls in ``tool_calls``; each ``tool`` message answers one call id. ``wire_messages`` turns that
history into what a server is sent, in one of two wire formats:

- ``openai`` (default): the API's own format. An assistant turn that made calls goes out with
  structured ``tool_calls`` (id, ``type: function``, ``arguments`` as a JSON string) and only its
  visible text in ``content``; every ``tool`` message answers one of those ids, in order; the
  tool schemas go in ``tools``. OpenAI and DeepSeek answer anything else with HTTP 400.
  ``arguments`` is sent exactly as stored (control spellings in it aside, see below), which is
  the text the server generated when the call came back natively
  (``Completion.native_tool_calls``), else the loop's canonical dump: the same bytes every turn,
  so server-side prefix caches (llama-server's KV cache, DeepSeek's billed cache hits) stay hot.
- ``text``: for a server whose chat template ignores tools (SmolLM2's plain ChatML on
  llama-server renders an assistant turn that carries only ``tool_calls`` as empty, so the call
  is lost from the prompt). The messages are what the in-process runtime renders for such a
  template (``ChatFormat.plain_chat``): the Hermes tool block in the system message, each
  assistant turn's exact text, tool results as user turns in ``<tool_response>`` tags; no
  ``tools`` field. Strict APIs accept this too, but their models then see calls as plain text.

Data is data on the wire too: llama-server and llama_cpp.server tokenize the rendered prompt with
special tokens parsed, so every chat-control spelling in message data (``<|im_end|>``,
``</tool_response>``, ...) is broken with an invisible word joiner before sending
(``agent.formats.wire_text``); the model's own ``<tool_call>``/``<think>`` tags in its turns stay.

Reading the answer back: native ``tool_calls`` are also written into ``Completion.text`` in
the backend's chat format (Hermes unless told otherwise: a remote server renders its own template,
so the format here is only the text form of calls, tool block and results), so the history
renders and exports the same way whichever backend produced it.

Remote faults are results, never exceptions: 401/403 is one line and is not retried; 429 waits
as long as ``Retry-After`` asks, within ``max_retry_wait``; 5xx, timeouts and connection errors
are retried with backoff; an answer of unknown shape is an error whose first 300 characters go
to the log. The key never leaves in an error or a log line: whatever the server or httpx says is
scrubbed of it (``<api key>``) before it is cut short, logged or returned, because an error
becomes the turn's ``error`` and so a line in the trajectory log, an eval episode and the bot's log.
Nor does it leave over plain http to another machine: the constructor refuses a key with an
``http://`` base URL whose host is not this machine or named in ``allow_plain_http_hosts``, and a
base URL with a user name or password in it (``agent.url_policy``), before a connection is made.
"""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import time
from typing import Any, Callable, Iterable, Literal

import httpx

from agent.backends.base import KEY_REFUSED, Completion
from agent.backends.sampling import Sampling
from agent.formats.chat_format import DEFAULT_FORMAT, ChatFormat, format_named
from agent.formats.wire_text import data_safe_messages
from agent.url_policy import credentials_problem, plain_http_problem

log = logging.getLogger(__name__)

WireFormat = Literal["openai", "text"]
WIRE_FORMATS: tuple[str, ...] = ("openai", "text")
RETRY_STATUS = {408, 409, 425, 429}  # besides 5xx: "try again later" answers
AUTH_STATUS = {401, 403}
BODY_IN_LOG = 300  # characters of an unreadable answer kept in the log line

# The answer a call gets on the wire when the stored history has none (e.g. the process died
# while the call ran): strict APIs refuse an assistant ``tool_calls`` with an unanswered id.
NOT_ANSWERED = json.dumps(
    {"ok": False, "error": "not_run", "message": "No result was recorded for this call; it may not have run."},
    ensure_ascii=False,
)


class OpenAIBackend:
    """POSTs ``/v1/chat/completions``; see the module docstring for the wire format and faults."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        wire_format: str = "openai",
        tool_choice: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        temperature: float = 0.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        allow_plain_http_hosts: Iterable[str] = (),
        chat_format: str = DEFAULT_FORMAT,
    ) -> None:
        if wire_format not in WIRE_FORMATS:
            raise ValueError(f"wire_format must be one of {', '.join(WIRE_FORMATS)}, got {wire_format!r}")
        problem = key_transport_problem(base_url, api_key, allow_plain_http_hosts)
        if problem:
            raise ValueError(problem)
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model = model
        self.wire_format = wire_format
        self.chat_format = format_named(chat_format)
        self.tool_choice = tool_choice  # None: not sent (the server's default, "auto" for OpenAI)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self.temperature = temperature
        self.has_key = bool(api_key)
        self._key = api_key or None  # only for scrubbing; the client's header is what is sent
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers, transport=transport)
        self._sleep = sleep
        self._lock = threading.Lock()
        self.attempts = 0  # requests sent over the backend's life (tests check the retry path)
        self.waits: list[float] = []  # seconds slept before retries, in order

    def __repr__(self) -> str:  # the client's headers hold the key: never show them
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, wire_format={self.wire_format!r})"

    def close(self) -> None:
        self._client.close()

    def _scrub(self, text: str) -> str:
        """``text`` without the key: a proxy may echo the Authorization header in an error body."""
        return text.replace(self._key, "<api key>") if self._key else text

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                     max_tokens: int = 512, sampling: Sampling | None = None) -> dict[str, Any]:
        """The JSON body for one step (public so tests and ``doctor`` can show the exact bytes).

        ``sampling`` (eval, expert iteration) sends its temperature, and its top_p and seed when
        it samples; without it the body is the backend's fixed temperature alone, as before."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(messages, tools, self.wire_format, self.chat_format),
            "max_tokens": max_tokens,
            "temperature": self.temperature if sampling is None else sampling.temperature,
        }
        if sampling is not None and not sampling.greedy:
            body["seed"] = sampling.seed  # vLLM and OpenAI honour it; servers that do not ignore it
            if sampling.top_p < 1.0:
                body["top_p"] = sampling.top_p
        if tools and self.wire_format == "openai":
            body["tools"] = tools
            if self.tool_choice:
                body["tool_choice"] = self.tool_choice
        return body

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        max_tokens: int = 512,
        sampling: Sampling | None = None,
    ) -> Completion:
        started = time.perf_counter()
        data, error = self._post(self.request_body(messages, tools, max_tokens, sampling))
        seconds = time.perf_counter() - started
        if error is not None:
            return Completion(text="", finish_reason="error", error=error, seconds=seconds)
        try:
            result = completion_from(data, self.chat_format)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            shown = self._scrub(json.dumps(data, ensure_ascii=False))[:BODY_IN_LOG]
            log.warning("%s answered in a shape this backend does not know (%s: %s): %s",
                        self.base_url, type(exc).__name__, exc, shown)
            return Completion(text="", finish_reason="error", seconds=seconds,
                              error=self._scrub(f"unexpected response shape from {self.base_url}: {type(exc).__name__}: {exc}"))
        result.seconds = seconds
        return result

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "model_path": f"{self.base_url}#{self.model}", "wire_format": self.wire_format,
                "adapter_path": None, "adapter_sha256": None, "lora_scale": None, "chat_format": self.chat_format.name}

    # -- HTTP with retries ------------------------------------------------------------------

    def _wait(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)
        self._sleep(seconds)

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The parsed JSON answer, or one error line once retrying is pointless (never raises)."""
        last = "no attempt made"
        delay: float | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._wait(delay if delay is not None else self.backoff * 2 ** (attempt - 1))
            delay = None
            with self._lock:
                self.attempts += 1
            try:
                response = self._client.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                last = "the server did not answer in time"
                continue
            except httpx.TransportError as exc:
                last = f"connection error: {type(exc).__name__}: {self._scrub(str(exc))}"
                continue
            except httpx.HTTPError as exc:  # e.g. a body that cannot be decoded: retrying will not help
                return None, f"the request to {self.base_url} failed: {type(exc).__name__}: {_one_line(self._scrub(str(exc)))[:200]}"
            status = response.status_code
            text = self._scrub(response.text)  # before any of it is cut short, logged or returned
            if status in AUTH_STATUS:
                hint = "" if self.has_key else " (no key is set: AGENT_API_KEY or the key file)"
                return None, f"{KEY_REFUSED} (HTTP {status} from {self.base_url}){hint}"
            if status == 429:
                wait = retry_after(response.headers.get("Retry-After"))
                if wait is not None and wait > self.max_retry_wait:
                    return None, (f"rate limited by {self.base_url}: it asks to wait {wait:.0f} s, "
                                  f"more than the {self.max_retry_wait:.0f} s this backend waits")
                delay = wait
                last = f"rate limited (HTTP 429{f', Retry-After {wait:g} s' if wait is not None else ''})"
                continue
            if status >= 500 or status in RETRY_STATUS:
                last = f"HTTP {status}: {_one_line(text)[:200]}"
                continue
            if 300 <= status < 400:
                where = response.headers.get("Location", "no Location header")
                return None, f"HTTP {status} from {self.base_url}: it redirects to {where}; use that as the base URL"
            if status >= 400:
                return None, f"HTTP {status} from {self.base_url}: {_one_line(text)[:BODY_IN_LOG]}"
            try:
                data = response.json()
            except ValueError:
                log.warning("%s answered with something that is not JSON: %s", self.base_url, text[:BODY_IN_LOG])
                return None, f"the answer from {self.base_url} is not JSON: {_one_line(text)[:200]}"
            if not isinstance(data, dict):
                log.warning("%s answered in a shape this backend does not know: %s", self.base_url, text[:BODY_IN_LOG])
                return None, f"unexpected response shape from {self.base_url}: not a JSON object"
            return data, None
        return None, f"gave up after {self.max_retries + 1} attempts: {last} ({self.base_url})"


def key_transport_problem(base_url: str, api_key: str | None, allowed_hosts: Iterable[str] = ()) -> str | None:
    """Why the key may not go to ``base_url`` (one line, never the URL's userinfo), or None.

    Judged on the URL as httpx will send it (its own parser), so that no spelling trick makes the
    check and the connection disagree about the host."""
    problem = credentials_problem(base_url, "base URL", "put the key in the key file (AGENT_API_KEY_FILE, mode 600)")
    if problem or not api_key:
        return problem
    try:
        sent_to = str(httpx.URL(base_url))
    except httpx.InvalidURL:
        return "the base URL is not a valid URL"
    return plain_http_problem(sent_to, allowed_hosts, "the API key") or plain_http_problem(
        base_url, allowed_hosts, "the API key")


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (a number or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- history -> wire ----------------------------------------------------------------------------


def wire_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                  wire_format: str = "openai", chat_format: ChatFormat | None = None) -> list[dict[str, Any]]:
    """The stored history as a server is sent it (see the module docstring).

    Data goes out with its chat-control spellings broken (``agent.formats.wire_text``): before the
    tool block and ``<tool_response>`` tags are added in ``text``, after the calls are read in ``openai``.
    ``chat_format``: the backend's (None: the default, Hermes)."""
    fmt = chat_format or format_named(DEFAULT_FORMAT)
    if wire_format == "text":
        safe = data_safe_messages(messages, fmt.own_tags)
        return [{"role": m["role"], "content": m["content"]} for m in fmt.plain_chat(safe, list(tools or []))]
    return data_safe_messages(openai_messages(messages, fmt), fmt.own_tags)


def openai_messages(messages: list[dict[str, Any]], chat_format: ChatFormat | None = None) -> list[dict[str, Any]]:
    """OpenAI's sequence: calls as ``tool_calls``, each answered by one ``tool`` message, in order.

    Whatever the stored history holds, the result obeys the rules strict APIs check:
    - a ``tool`` message whose id no pending call has (the loop's ``call_unreadable`` answer to a
      call it could not read, or an orphan) goes out as a **user** message with the same text:
      the model still reads why its call failed, and no API sees an answer to an unknown call.
      (``export sft --assistant-format structured``, the same message format, leaves such episodes out;
      the stored history keeps the ``tool`` message for every backend);
    - a call left without an answer (the process stopped while it ran) gets ``NOT_ANSWERED``;
    - call ids are unique within the request (a repeated one gets a ``_2``, ``_3``, ... suffix;
      the loop numbers calls per turn, so ids repeat across turns);
    - reasoning (``<think>``) is not sent back (DeepSeek refuses ``reasoning_content`` in input).
    ``chat_format`` reads the stored turns (None: the default, Hermes).
    """
    fmt = chat_format or format_named(DEFAULT_FORMAT)
    out: list[dict[str, Any]] = []
    pending: dict[str, str] = {}  # stored id -> wire id, calls of the last assistant turn not yet answered
    used: dict[str, int] = {}

    def close_pending() -> None:
        for wire_id in list(pending.values()):
            out.append({"role": "tool", "tool_call_id": wire_id, "content": NOT_ANSWERED})
        pending.clear()

    def unique(call_id: str) -> str:
        used[call_id] = used.get(call_id, 0) + 1
        return call_id if used[call_id] == 1 else f"{call_id}_{used[call_id]}"

    for m in messages:
        role = m.get("role")
        content = m.get("content") or ""
        if role == "tool":
            call_id = str(m.get("tool_call_id") or "")
            if call_id in pending:
                out.append({"role": "tool", "tool_call_id": pending.pop(call_id), "content": content})
            else:
                close_pending()
                out.append({"role": "user", "content": content})
            continue
        close_pending()
        if role != "assistant":
            out.append({"role": str(role), "content": content})
            continue
        calls = m.get("tool_calls") or []
        if not calls:
            # No readable call: the text as written (an unreadable block stays visible, so the
            # correction that follows refers to something the model can see), minus reasoning.
            parsed = fmt.parse_reply(content)
            text = content if fmt.call_open in content else parsed.content
            out.append({"role": "assistant", "content": text})
            continue
        wire_calls = []
        for number, call in enumerate(calls):
            stored_id = str(call.get("id") or f"call_{number}")
            wire_id = unique(stored_id)
            pending[stored_id] = wire_id
            fn = call.get("function") or {}
            wire_calls.append({"id": wire_id, "type": "function", "function": {
                "name": str(fn.get("name", "")), "arguments": arguments_text(fn.get("arguments"))}})
        # "" rather than null when there is no visible text: OpenAI and DeepSeek take either, but
        # llama_cpp.server 0.3's request model requires a string (null fails validation, HTTP 500).
        out.append({"role": "assistant", "content": fmt.parse_reply(content).content, "tool_calls": wire_calls})
    close_pending()
    return out


def arguments_text(arguments: Any) -> str:
    """``arguments`` as the JSON string the API wants: a stored string unchanged, else one fixed dump."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


# -- wire -> Completion -------------------------------------------------------------------------


def completion_from(data: dict[str, Any], chat_format: ChatFormat | None = None) -> Completion:
    """A Completion from a chat-completions answer; raises on a shape it does not know. Native
    calls are written in ``chat_format``'s text (None: the default, Hermes)."""
    choice = data["choices"][0]
    message = choice["message"]
    content = message.get("content") or ""
    if not isinstance(content, str):
        raise TypeError(f"message content is {type(content).__name__}, not text")
    native = None
    if message.get("tool_calls"):
        native = []
        for call in message["tool_calls"]:
            fn = call["function"]
            raw = fn.get("arguments")
            text = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}, ensure_ascii=False)
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                parsed = text  # left as the string; the loop reports invalid arguments to the model
            native.append({"id": call.get("id"), "name": str(fn["name"]), "arguments": parsed, "arguments_text": text})
        fmt = chat_format or format_named(DEFAULT_FORMAT)
        calls_text = "\n".join(fmt.call_text(c["name"], c["arguments_text"]) for c in native)
        content = f"{content}\n{calls_text}" if content else calls_text
    finish = choice.get("finish_reason") or "stop"
    if finish == "tool_calls":
        finish = "stop"
    usage = data.get("usage") or {}
    timings = data.get("timings") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = _cached_tokens(usage, timings)
    evaluated = int(timings["prompt_n"]) if "prompt_n" in timings else max(0, prompt - (cached or 0))
    return Completion(
        text=content, finish_reason=finish, native_tool_calls=native,
        prompt_tokens=prompt, evaluated_tokens=evaluated, reused_tokens=cached or 0,
        generated_tokens=int(usage.get("completion_tokens") or 0),
        timings={k: float(v) for k, v in timings.items() if isinstance(v, (int, float))},
    )


def _cached_tokens(usage: dict[str, Any], timings: dict[str, Any]) -> int | None:
    """Prompt tokens served from the server's cache, in whichever field the server reports them.

    OpenAI: ``usage.prompt_tokens_details.cached_tokens``; DeepSeek: ``usage.prompt_cache_hit_tokens``;
    llama-server: ``timings.cache_n`` (with ``timings.prompt_n`` the tokens it evaluated).
    """
    details = usage.get("prompt_tokens_details") or {}
    for value in (details.get("cached_tokens"), usage.get("prompt_cache_hit_tokens"), timings.get("cache_n")):
        if isinstance(value, (int, float)):
            return int(value)
    return None
