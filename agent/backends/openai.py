"""OpenAI-compatible HTTP backend (llama-server, llama_cpp.server, vLLM, DeepSeek, ...).

The history keeps text, not structured calls: when the server returns native ``tool_calls``
they are also written into ``text`` in Hermes format (``<tool_call>{...}</tool_call>``), so the
same history renders and exports the same way whichever backend produced it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import httpx

from agent.backends.base import Completion
from agent.parsing import format_tool_call

RETRY_STATUS = {408, 409, 425, 429}  # besides 5xx: "try again later" answers


class OpenAIBackend:
    """POSTs /v1/chat/completions; retries 5xx, timeouts and connection errors with backoff."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        temperature: float = 0.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model = model
        self.max_retries = max_retries
        self.backoff = backoff
        self.temperature = temperature
        key = api_key or os.environ.get("OPENAI_API_KEY") or os.environ.get("AGENT_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers, transport=transport)
        self.attempts = 0  # requests sent over the backend's life (tests check the retry path)

    def close(self) -> None:
        self._client.close()

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        max_tokens: int = 512,
    ) -> Completion:
        started = time.perf_counter()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire_message(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": self.temperature,
        }
        if tools:
            body["tools"] = tools
        data, error = self._post(body)
        seconds = time.perf_counter() - started
        if error is not None:
            return Completion(text="", finish_reason="error", error=error, seconds=seconds)
        try:
            result = _completion_from(data)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            return Completion(text="", finish_reason="error", seconds=seconds,
                              error=f"unexpected response shape: {type(exc).__name__}: {exc}")
        result.seconds = seconds
        return result

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "model_path": f"{self.base_url}#{self.model}",
                "adapter_path": None, "adapter_sha256": None, "lora_scale": None}

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The parsed JSON answer, or an error line after retries ran out (never raises)."""
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.attempts += 1
            try:
                response = self._client.post("/chat/completions", json=body)
            except httpx.TimeoutException as exc:
                last = f"timeout: {exc!r}"
                continue
            except httpx.TransportError as exc:
                last = f"connection error: {exc!r}"
                continue
            if response.status_code >= 500 or response.status_code in RETRY_STATUS:
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                return None, f"HTTP {response.status_code}: {response.text[:300]}"
            try:
                return response.json(), None
            except ValueError:
                return None, f"response is not JSON: {response.text[:200]}"
        return None, f"gave up after {self.max_retries + 1} attempts: {last}"


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    """Assistant turns go out as their raw text (calls included); the server sees what we keep."""
    out = {"role": message["role"], "content": message.get("content") or ""}
    if message["role"] == "tool" and message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _completion_from(data: dict[str, Any]) -> Completion:
    choice = data["choices"][0]
    message = choice["message"]
    content = message.get("content") or ""
    usage = data.get("usage") or {}
    native = None
    if message.get("tool_calls"):
        native = []
        for call in message["tool_calls"]:
            fn = call["function"]
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass  # left as the string; the loop reports invalid arguments to the model
            native.append({"name": fn["name"], "arguments": args})
        calls_text = "\n".join(format_tool_call(c["name"], c["arguments"]) for c in native)
        content = f"{content}\n{calls_text}" if content else calls_text
    finish = choice.get("finish_reason") or "stop"
    if finish == "tool_calls":
        finish = "stop"
    return Completion(
        text=content, finish_reason=finish, native_tool_calls=native,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        evaluated_tokens=int(usage.get("prompt_tokens") or 0),
        generated_tokens=int(usage.get("completion_tokens") or 0),
    )
