"""The instruments: a backend wrapper that records what llama.cpp did, a clock inside llama.cpp,
and a bare llama.cpp that replays the recorded tokens as the baseline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from agent.backends.llama import common_prefix
from agent.backends.llama.engine import keep_prefix, sample


@dataclass
class StepTrace:
    """What llama.cpp did in one step, enough to replay it on a bare Llama."""

    session_id: str | None
    prompt: list[int]  # the rendered prompt's tokens
    reused: int  # prompt tokens served from the KV cache / saved state
    evaluated: int
    new: int  # prompt tokens no earlier context (engine's or the session's) held
    generated: list[int]  # sampled tokens that were then evaluated
    samples: int  # sampler calls (generated + the final one that stopped)
    llama_seconds: float  # prompt eval + generation, as the backend timed them


class RecordingBackend:
    """Wraps a LlamaBackend: starts each reply with a scripted prefix and records the tokens.

    Reads the tokens in the backend's context (``engine.tokens()``) after each step: the bench
    measures the backend, it does not change it.
    """

    name = "llama"

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.prefixes: list[str] = []
        self.steps: list[StepTrace] = []
        self._last_by_session: dict[str, list[int]] = {}

    def _context(self) -> list[int]:
        return self.backend.engine.tokens()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                 session_id: str | None = None, max_tokens: int = 512) -> Any:
        prefix = self.prefixes.pop(0) if self.prefixes else ""
        before = self._context()
        result = self.backend.complete(messages, tools, session_id=session_id, max_tokens=max_tokens,
                                       assistant_prefix=prefix)
        after = self._context()
        prompt = after[: result.prompt_tokens] if len(after) >= result.prompt_tokens else []
        if not prompt:  # the step failed before evaluating; nothing to replay
            return result
        known = max(common_prefix(prompt, before), common_prefix(prompt, self._last_by_session.get(session_id or "", [])))
        generated = after[result.prompt_tokens:]
        self.steps.append(StepTrace(
            session_id=session_id, prompt=prompt, reused=result.reused_tokens, evaluated=result.evaluated_tokens,
            new=len(prompt) - known, generated=generated, samples=len(generated) + 1,
            llama_seconds=result.timings.get("prompt_eval_s", 0.0) + result.timings.get("generate_s", 0.0),
        ))
        if session_id:
            self._last_by_session[session_id] = after
        return result

    def identity(self) -> dict[str, Any]:
        return self.backend.identity()

    @property
    def chat_format(self) -> Any:
        """The wrapped backend's chat format (the loop parses the replies with it)."""
        from agent.formats.chat_format import format_of

        return format_of(self.backend)


class LlamaClock:
    """Accumulates wall time spent inside ``Llama.eval`` and ``LlamaSampler.sample``.

    Installed by wrapping the two methods on their classes for the bench process only: that is
    exactly the work a bare llama.cpp needs for the same tokens (decode + greedy sample).
    """

    def __init__(self) -> None:
        from llama_cpp import Llama, _internals

        self.seconds = 0.0
        self._originals = [(Llama, "eval", Llama.eval), (_internals.LlamaSampler, "sample", _internals.LlamaSampler.sample)]
        for owner, name, original in self._originals:
            setattr(owner, name, self._timed(original))

    def _timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t

        return wrapper

    def close(self) -> None:
        for owner, name, original in self._originals:
            setattr(owner, name, original)


def hold(llm: Any, tokens: list[int]) -> None:
    """Make a ``Llama``'s context hold exactly ``tokens``, evaluating only what it does not hold
    already; the last token is always evaluated, so the logits are fresh."""
    have = min(common_prefix(llm.input_ids[: llm.n_tokens].tolist(), tokens), max(len(tokens) - 1, 0))
    keep_prefix(llm, have)
    if have < len(tokens):
        llm.eval(tokens[have:])


class BareLlama:
    """llama.cpp alone: evaluates and samples given token sequences, nothing else."""

    def __init__(self, model_path: str, n_ctx: int, n_threads: int | None) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path, n_ctx=n_ctx, n_batch=min(512, n_ctx), n_threads=n_threads,
                         n_threads_batch=n_threads, seed=0, verbose=False)

    def prepare(self, step: StepTrace) -> None:
        """Untimed: make the KV cache hold the step's reused prefix, as the runtime's did."""
        hold(self.llm, step.prompt[: step.reused])

    def replay(self, step: StepTrace) -> None:
        """Timed part: evaluate the step's new prompt tokens, then sample and evaluate its tokens."""
        from llama_cpp import _internals

        llm = self.llm
        sampler = _internals.LlamaSampler()
        sampler.add_greedy()
        llm.eval(step.prompt[step.reused:])
        for token in step.generated:
            sample(llm, sampler)
            llm.eval([token])
        sample(llm, sampler)
