"""The per-episode wrapper that hands each model step its own seed (the scheme is in
``agent.backends.sampling``).

It lives apart from the sampling settings because it is a Backend: it needs the protocol from
``agent.backends.base``, which itself names ``Sampling`` in its signature.
"""

from __future__ import annotations

from typing import Any

from agent.backends.base import Backend, Completion
from agent.backends.sampling import Sampling
from agent.formats.chat_format import format_of


class SeededBackend:
    """One episode's view of a shared backend: every ``complete`` gets the next step's sampling.

    Everything else (``identity`` aside, which adds the sampling) is the shared backend's own, so
    the loop, the KV-state cache and the stream behave as without the wrapper.
    """

    def __init__(self, inner: Backend, sampling: Sampling) -> None:
        self.inner = inner
        self.sampling = sampling
        self.steps = 0
        self.name = inner.name
        self.chat_format = format_of(inner)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any) -> Completion:
        step = self.sampling.for_step(self.steps)
        self.steps += 1
        return self.inner.complete(messages, tools, sampling=step, **kwargs)

    def identity(self) -> dict[str, Any]:
        return {**self.inner.identity(), "sampling": self.sampling.to_dict()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
