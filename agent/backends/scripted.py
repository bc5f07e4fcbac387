"""A backend that replays given raw outputs, so the loop can be tested without a model."""

from __future__ import annotations

from typing import Any, Callable

from agent.backends.base import Completion
from agent.backends.sampling import Sampling
from agent.formats.chat_format import DEFAULT_FORMAT, format_named

Script = list[str] | Callable[[list[dict[str, Any]]], str]


class ScriptedBackend:
    """Returns the next scripted output on each call (or asks a function for it).

    Running out of outputs is a result (``finish_reason="error"``), not an exception: the loop
    must treat it like any other model error. Every call's messages are kept in ``calls`` so
    tests can check what the loop sent.
    """

    name = "scripted"

    def __init__(self, outputs: Script, chat_format: str = DEFAULT_FORMAT) -> None:
        """``chat_format``: the format the scripted outputs are written in (a format's name)."""
        self.chat_format = format_named(chat_format)
        self._outputs = outputs if callable(outputs) else list(outputs)
        self._index = 0
        self.calls: list[list[dict[str, Any]]] = []

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        max_tokens: int = 512,
        sampling: Sampling | None = None,  # a script has nothing to sample
    ) -> Completion:
        self.calls.append([dict(m) for m in messages])
        if callable(self._outputs):
            try:
                text = self._outputs(messages)
            except Exception as exc:  # a script function failing is a model error for the loop
                return Completion(text="", finish_reason="error", error=f"scripted function failed: {exc!r}")
        else:
            if self._index >= len(self._outputs):
                return Completion(
                    text="", finish_reason="error",
                    error=f"scripted backend exhausted after {len(self._outputs)} outputs",
                )
            text = self._outputs[self._index]
            self._index += 1
        return Completion(text=text, finish_reason="stop", generated_tokens=len(text.split()))

    def identity(self) -> dict[str, Any]:
        return {"backend": "scripted", "model_path": None, "adapter_path": None,
                "adapter_sha256": None, "lora_scale": None, "chat_format": self.chat_format.name}
