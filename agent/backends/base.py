"""The Backend protocol: one model step from a message history, whatever runs the model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.backends.sampling import Sampling
from agent.formats.chat_format import ChatFormat

# How a remote backend's error line starts when the server refused the key (HTTP 401/403);
# frontends recognise it to tell the user what to fix instead of "try again".
KEY_REFUSED = "the API key was refused"


@dataclass
class Completion:
    """One model step. ``text`` is exactly what the model produced; the history keeps it verbatim."""

    text: str
    finish_reason: str = "stop"  # "stop" | "length" | "error" | "context_limit"
    # Calls the server returned natively (OpenAI backends): {"id", "name", "arguments" (parsed),
    # "arguments_text" (exactly as the server wrote it)}; None when the text must be parsed.
    native_tool_calls: list[dict[str, Any]] | None = None
    prompt_tokens: int = 0  # length of the rendered prompt
    evaluated_tokens: int = 0  # prompt tokens the engine actually evaluated this step
    reused_tokens: int = 0  # prompt tokens served from the KV cache / saved state
    generated_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class Backend(Protocol):
    """Anything that turns (messages, tools) into one Completion.

    ``messages`` are OpenAI-style dicts. Assistant messages carry the model's exact raw text in
    ``content``; a backend that renders a prompt must render that text unchanged so the token
    prefix of earlier steps stays byte-identical. ``session_id`` lets a backend keep per-session
    state (saved KV caches) across interleaved conversations. ``sampling`` sets this step's
    temperature/top-p/seed (None: the backend's default, greedy); see ``agent.backends.sampling``.

    ``chat_format`` is the model's format, chosen once when the backend is made
    (``agent.formats.chat_format``): the loop parses with it, eval and export record its name in
    ``identity()["chat_format"]``, and nothing downstream picks a format of its own.
    """

    name: str
    chat_format: ChatFormat

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        max_tokens: int = 512,
        sampling: Sampling | None = None,
    ) -> Completion: ...

    def identity(self) -> dict[str, Any]:
        """Model and adapter identity for the trajectory log (paths, sha256, scale, backend)."""
        ...


class TextSink(Protocol):
    """Where a backend that can stream sends the text of a step as it is generated (the REPL).

    Optional: a backend offers it as a ``stream`` attribute (None: nobody listens). The pieces are
    raw model output, tags and all; what to show is the listener's business.
    """

    def start_step(self) -> None: ...

    def text(self, piece: str) -> None: ...
